package ops

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// globalRun is a left join of a stream with a global table kept in
// Pebble, whose rows are the keys of every length and UUIDs with an even
// index.
func globalRun(t *testing.T) (*joinCtx, *GlobalJoin[string, string, string, string, string]) {
	c := newJoinCtx(t)
	e, err := store.OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	var ws []store.Write
	for i, k := range testkeys.All() {
		if i%2 == 0 {
			ws = append(ws, store.Write{Key: []byte(k), Value: []byte("g" + k)})
		}
	}
	if err := e.Apply(ws, store.NoCheckpoint); err != nil {
		t.Fatal(err)
	}
	c.globals["rows"] = e
	p := NewGlobalJoin(GlobalJoinConfig[string, string, string, string, string]{Table: "rows", Key: serde.String, Value: serde.String,
		// The row key is the record's value: a key of another length
		// than the record's.
		KeyOf: func(k, v string) string { return v },
		Join: func(k, v, gv string, ok bool) (string, bool) {
			if strings.HasPrefix(k, "drop") {
				return "", false
			}
			return fmt.Sprintf("%v:%s", ok, gv), true
		}})
	if err := p.Init(c); err != nil {
		t.Fatal(err)
	}
	return c, p
}

func globalSteps(p *GlobalJoin[string, string, string, string, string]) (steps []func() error, want []string) {
	keys := testkeys.All()
	for i, k := range keys {
		rk := keys[(i*5+2)%len(keys)]
		steps = append(steps, func() error { return p.Process(exec.Record{Key: k, Value: rk, Timestamp: int64(i)}) })
		if j := slices.Index(keys, rk); j%2 == 0 {
			want = append(want, fmt.Sprintf("%s=true:g%s@%d", k, rk, i))
		} else {
			want = append(want, fmt.Sprintf("%s=false:@%d", k, i))
		}
	}
	steps = append(steps,
		func() error { return p.Process(exec.Record{Key: "drop", Value: keys[0]}) },
		func() error { return p.Process(exec.Record{Key: "tomb", Value: exec.Tombstone}) })
	return steps, want
}

// TestGlobalJoinEveryKey joins records with rows whose keys have every
// encoded length and UUIDs; records without a row join with ok=false, a
// join that drops its record and a tombstone forward nothing; an abort and
// replay gives the same output.
func TestGlobalJoinEveryKey(t *testing.T) {
	c, p := globalRun(t)
	steps, want := globalSteps(p)
	out, _ := c.runTxns(t, steps, 1, func(int) bool { return false })
	if !slices.Equal(out, want) {
		t.Fatalf("joined %q\nwant %q", out, want)
	}
	c, p = globalRun(t)
	steps, _ = globalSteps(p)
	if out, _ := c.runTxns(t, steps, 3, func(i int) bool { return i%2 == 0 }); !slices.Equal(out, want) {
		t.Fatalf("after aborts joined %d, want %d", len(out), len(want))
	}
}

// TestGlobalJoinErrors: a global table the task lacks fails Init, a row
// that does not decode fails the record.
func TestGlobalJoinErrors(t *testing.T) {
	p := NewGlobalJoin(GlobalJoinConfig[string, string, string, string, string]{Table: "missing"})
	if err := p.Init(newJoinCtx(t)); err == nil || !strings.Contains(err.Error(), `"missing" is not available`) {
		t.Fatalf("Init without the table: %v", err)
	}
	c, _ := globalRun(t)
	bad := errors.New("bad row")
	q := NewGlobalJoin(GlobalJoinConfig[string, string, string, string, string]{Table: "rows", Key: serde.String,
		Value: serde.Funcs(func(s string) ([]byte, error) { return []byte(s), nil }, func([]byte) (string, error) { return "", bad }),
		KeyOf: func(k, v string) string { return v }, Join: func(k, v, gv string, ok bool) (string, bool) { return gv, true }})
	if err := q.Init(c); err != nil {
		t.Fatal(err)
	}
	if err := q.Process(exec.Record{Key: "k", Value: ""}); !errors.Is(err, bad) || !strings.Contains(err.Error(), "global table rows: value") {
		t.Fatalf("a row that does not decode: %v", err)
	}
}
