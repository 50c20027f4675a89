package ops

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/store"
)

// The sentinels the tests' states wrap, standing in for topology's.
var (
	errCorrupt    = errors.New("test: corrupt state")
	errNoTime     = errors.New("test: no time")
	errUndeclared = errors.New("test: unknown store")
	testErrors    = StateErrors{Corrupt: errCorrupt, NoTime: errNoTime, Undeclared: errUndeclared}
)

// clock is a task's stream time that a test moves.
type clock struct{ ts int64 }

func (c *clock) StreamTime() int64 { return c.ts }

// pebbleStaged is a Staged store named "s" over a real Pebble database.
func pebbleStaged(t *testing.T) *store.Staged {
	t.Helper()
	p, err := store.OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return store.NewStaged("s", p)
}

func commit(t *testing.T, st *store.Staged) {
	t.Helper()
	st.Flush()
	if err := st.Commit(store.NoCheckpoint); err != nil {
		t.Fatal(err)
	}
}

// dump renders every entry of st, staged writes included, in key order.
func dump(t *testing.T, st *store.Staged) string {
	t.Helper()
	var b strings.Builder
	err := st.Range(nil, nil, func(k, v []byte) error {
		fmt.Fprintf(&b, "%q=%q\n", k, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
