package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/diskfault"
)

// garbleTables damages every sstable in dir (diskfault.GarbleTables) and
// returns how many.
func garbleTables(t *testing.T, dir string) int {
	t.Helper()
	n, err := diskfault.GarbleTables(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPebbleReportsCorruption (defect 15): a store whose files were damaged
// on disk answers with an error matching ErrCorrupted that names its
// directory, so that the processor can wipe it and restore it from the
// changelog. Before, Pebble's default corruption handler called Fatalf and
// the whole process exited.
func TestPebbleReportsCorruption(t *testing.T) {
	for _, flushCheckpoint := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoint in table %v", flushCheckpoint), func(t *testing.T) {
			dir := t.TempDir()
			p, err := OpenPebble(dir)
			if err != nil {
				t.Fatal(err)
			}
			keys := [][]byte{{}, {0}, []byte("123e4567-e89b-12d3-a456-426614174000"), []byte(strings.Repeat("x", 130))}
			for i := range 500 {
				keys = append(keys, fmt.Appendf(nil, "k%d", i))
			}
			var ws []Write
			for _, k := range keys {
				ws = append(ws, Write{Key: k, Value: make([]byte, 100)})
			}
			if err := p.Apply(ws, 41); err != nil {
				t.Fatal(err)
			}
			if err := p.db.Flush(); err != nil {
				t.Fatal(err)
			}
			if !flushCheckpoint {
				// The checkpoint moves to the memtable (WAL): open
				// succeeds, and the damage shows on a read.
				if err := p.Apply(nil, 42); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			if garbleTables(t, dir) == 0 {
				t.Fatal("no sstable to damage")
			}
			p, err = OpenPebble(dir)
			if err == nil {
				defer p.Close()
				err = p.Range(nil, nil, func(_, _ []byte) error { return nil })
			}
			var ce *CorruptedError
			if !errors.Is(err, ErrCorrupted) || !errors.As(err, &ce) || ce.Dir != dir {
				t.Fatalf("damaged store: %v, want an error matching ErrCorrupted naming %s", err, dir)
			}
		})
	}
}
