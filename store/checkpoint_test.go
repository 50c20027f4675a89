package store

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// contents is every entry of e, in order, and its checkpoint.
func contents(t *testing.T, e Engine) (string, int64) {
	t.Helper()
	h := sha256.New()
	n := 0
	if err := e.Range(nil, nil, func(k, v []byte) error {
		fmt.Fprintf(h, "%d:%x=%d:%x;", len(k), k, len(v), v)
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cp, err := e.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d entries %x", n, h.Sum(nil)), cp
}

// fileHashes hashes every file under dir (LOCK aside).
func fileHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[d.Name()] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCheckpointToAndCopyDir: a checkpoint holds exactly what was applied
// before it (keys of every length, a delete, an empty value) with its
// changelog offset, nothing applied after; a CopyDir of it opened
// read-write and written to leaves the checkpoint's files unchanged; a
// checkpoint into an existing directory is refused.
func TestCheckpointToAndCopyDir(t *testing.T) {
	p, err := OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var ws []Write
	for i, k := range testkeys.Bytes() {
		ws = append(ws, Write{Key: k, Value: fmt.Appendf(nil, "v%d", i)})
	}
	ws = append(ws, Write{Key: []byte("empty"), Value: []byte{}})
	if err := p.Apply(ws, 41); err != nil {
		t.Fatal(err)
	}
	// A flush in between: the checkpoint has sstables and a WAL.
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := p.Apply([]Write{{Key: ws[3].Key}, {Key: []byte("late-in-wal"), Value: []byte("x")}}, 57); err != nil {
		t.Fatal(err)
	}
	want, wantCP := contents(t, p)
	cpDir := filepath.Join(t.TempDir(), "a", "cp")
	got, err := p.CheckpointTo(cpDir)
	if err != nil {
		t.Fatal(err)
	}
	if got != 57 || wantCP != 57 {
		t.Fatalf("checkpoint offset %d (store %d), want 57", got, wantCP)
	}
	if err := p.Apply([]Write{{Key: []byte("after"), Value: []byte("y")}}, 60); err != nil {
		t.Fatal(err)
	}
	if _, err := p.CheckpointTo(cpDir); err == nil {
		t.Fatal("a checkpoint into an existing directory was accepted")
	}
	r, err := OpenPebbleReadOnly(cpDir)
	if err != nil {
		t.Fatal(err)
	}
	gotC, gotCP := contents(t, r)
	r.Close()
	if gotC != want || gotCP != 57 {
		t.Fatalf("checkpoint holds %s @%d, want %s @57", gotC, gotCP, want)
	}
	// Control: the live store moved on, so a wrong copy would be seen.
	if live, _ := contents(t, p); live == want {
		t.Fatal("control: the store did not change after the checkpoint")
	}

	before := fileHashes(t, cpDir)
	cp2 := filepath.Join(t.TempDir(), "copy")
	if err := CopyDir(cpDir, cp2); err != nil {
		t.Fatal(err)
	}
	if err := CopyDir(cpDir, cp2); err == nil {
		t.Fatal("CopyDir into an existing directory was accepted")
	}
	c, err := OpenPebble(cp2)
	if err != nil {
		t.Fatal(err)
	}
	if gotC, gotCP := contents(t, c); gotC != want || gotCP != 57 {
		t.Fatalf("copy holds %s @%d, want %s @57", gotC, gotCP, want)
	}
	// Write, flush and compact the copy: the source's files stay as they were.
	for i := range 2000 {
		if err := c.Apply([]Write{{Key: fmt.Appendf(nil, "n%05d", i), Value: make([]byte, 100)}}, int64(100+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.db.Compact(t.Context(), wipeLower, wipeUpper, true); err != nil {
		t.Fatal(err)
	}
	c.Close()
	after := fileHashes(t, cpDir)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("writing the copy changed the source:\nbefore %v\nafter  %v", before, after)
	}
	r, err = OpenPebbleReadOnly(cpDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if gotC, _ := contents(t, r); gotC != want {
		t.Fatalf("source after the copy was written: %s, want %s", gotC, want)
	}
}
