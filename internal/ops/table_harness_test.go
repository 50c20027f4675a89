package ops

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/store"
)

// tableCtx is the part of a task the table runtimes use: its stores (real
// store.Staged over Pebble), what they forward, and whether they fold. The
// rest of exec.Context is left nil: a runtime calling it fails the test by
// panicking.
type tableCtx struct {
	exec.Context
	stores map[string]*store.Staged
	fold   bool
	out    []exec.Record
	// ignored counts the deletes the runtime ignored.
	ignored int
}

// newTableCtx opens a Pebble-backed staged store for each name.
func newTableCtx(t *testing.T, fold bool, names ...string) *tableCtx {
	t.Helper()
	c := &tableCtx{stores: map[string]*store.Staged{}, fold: fold}
	for _, name := range names {
		e, err := store.OpenPebble(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		c.stores[name] = store.NewStaged(name, e)
	}
	return c
}

func (c *tableCtx) Forward(r exec.Record) error { c.out = append(c.out, r); return nil }
func (c *tableCtx) Store(name string) *store.Staged {
	s, ok := c.stores[name]
	if !ok {
		panic("no store " + name)
	}
	return s
}
func (c *tableCtx) Folding() bool       { return c.fold }
func (c *tableCtx) CountIgnoredDelete() { c.ignored++ }

// take returns what was forwarded since the last take, one line each.
func (c *tableCtx) take() []string {
	var lines []string
	for _, r := range c.out {
		lines = append(lines, fmtRecord(r))
	}
	c.out = nil
	return lines
}

// commit flushes and commits every store, as the task does after its
// transaction committed.
func (c *tableCtx) commit(t *testing.T, cp int64) {
	t.Helper()
	for _, s := range c.stores {
		s.Flush()
		if err := s.Commit(cp); err != nil {
			t.Fatal(err)
		}
	}
}

// abort drops every store's stage, as the task does when its transaction
// aborted.
func (c *tableCtx) abort() {
	for _, s := range c.stores {
		s.Abort()
	}
}

// unfold hands p every held update of the store, as the task's flush does.
func (c *tableCtx) unfold(t *testing.T, name string, p exec.Unfolder) {
	t.Helper()
	if err := c.stores[name].TakeHeld(p.Unfold); err != nil {
		t.Fatal(err)
	}
}

// fmtRecord prints a record's key (its length if long), value and
// timestamp; a change as old->new, with _ for absent.
func fmtRecord(r exec.Record) string {
	side := func(v any) string {
		if v == nil {
			return "_"
		}
		return fmt.Sprint(v)
	}
	v := fmt.Sprint(r.Value)
	switch x := r.Value.(type) {
	case exec.Change:
		v = side(x.Old) + "->" + side(x.New)
	case TableOp[int64]:
		v = fmt.Sprintf("op(sub=%v %d, add=%v %d)", x.Sub, x.Old, x.Add, x.New)
	}
	if r.Value == exec.Tombstone {
		v = "tombstone"
	}
	return fmt.Sprintf("%s=%s@%d", fmtKey(r.Key), v, r.Timestamp)
}

func fmtKey(k any) string {
	s := fmt.Sprint(k)
	if len(s) > 12 {
		return fmt.Sprintf("%s…(%d)", s[:8], len(s))
	}
	return s
}

func sorted(lines []string) string {
	lines = append([]string(nil), lines...)
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
