package ops

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// joinCtx is the exec.Context the join and sliding tests drive runtimes
// with: real stores (store.Staged over Pebble), a watermark the test sets,
// and the forwarded records collected, or handed to fwd.
type joinCtx struct {
	stores    map[string]*store.Staged
	globals   map[string]store.Engine
	wm        int64
	out       []string
	fwd       func(r exec.Record) error               // nil: record r in out
	fwdTo     func(child string, r exec.Record) error // nil: record child and r in out
	changelog []string
	late      int
	children  []string
}

var _ exec.Context = (*joinCtx)(nil)

// newJoinCtx opens a Pebble store of each name in a fresh directory; the
// stores' changelog records are collected in changelog.
func newJoinCtx(t testing.TB, names ...string) *joinCtx {
	return newJoinCtxWith(t, nil, names...)
}

// newJoinCtxWith is newJoinCtx, with the stages made with opts.
func newJoinCtxWith(t testing.TB, opts []store.StagedOption, names ...string) *joinCtx {
	return newJoinCtxOn(t, func() store.Engine {
		e, err := store.OpenPebble(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return e
	}, opts, names...)
}

// newJoinCtxOn is newJoinCtxWith, each store's engine made by engine.
func newJoinCtxOn(t testing.TB, engine func() store.Engine, opts []store.StagedOption, names ...string) *joinCtx {
	c := &joinCtx{stores: map[string]*store.Staged{}, globals: map[string]store.Engine{}, wm: window.NoWatermark}
	for _, name := range names {
		e := engine()
		t.Cleanup(func() { e.Close() })
		st := store.NewStaged(name, e, opts...)
		st.SetChangelog(func(k, v []byte) { c.changelog = append(c.changelog, fmt.Sprintf("%s %x=%x", name, k, v)) })
		st.SetRangeChangelog(func(start, end []byte) {
			c.changelog = append(c.changelog, fmt.Sprintf("%s range %x..%x", name, start, end))
		})
		c.stores[name] = st
	}
	return c
}

func (c *joinCtx) Forward(r exec.Record) error {
	if c.fwd != nil {
		return c.fwd(r)
	}
	c.out = append(c.out, fmt.Sprintf("%v=%v@%d", r.Key, r.Value, r.Timestamp))
	return nil
}

func (c *joinCtx) ForwardTo(child string, r exec.Record) error {
	if c.fwdTo != nil {
		return c.fwdTo(child, r)
	}
	c.out = append(c.out, fmt.Sprintf("->%s %v=%v@%d", child, r.Key, r.Value, r.Timestamp))
	return nil
}

func (c *joinCtx) Store(name string) *store.Staged { return c.stores[name] }
func (c *joinCtx) Send(string, bool, []byte, []byte, []exec.Header, int64) error {
	return fmt.Errorf("ops test: send")
}
func (c *joinCtx) RecordMeta() (string, int32, int64, bool) { return "in", 0, 0, true }
func (c *joinCtx) TaskID() string                           { return "0_0" }
func (c *joinCtx) Partition() int32                         { return 0 }
func (c *joinCtx) StreamTime() int64                        { return 0 }

// ForwardTyped runs send: no task links a typed chain here.
func (c *joinCtx) ForwardTyped(_ int64, send func() error) error { return send() }
func (c *joinCtx) Schedule(time.Duration, exec.PunctuationType, func(int64) error) func() {
	return func() {}
}
func (c *joinCtx) Watermark() int64                { return c.wm }
func (c *joinCtx) Children() []string              { return c.children }
func (c *joinCtx) CountLate()                      { c.late++ }
func (c *joinCtx) CountIgnoredDelete()             {}
func (c *joinCtx) Global(name string) store.Engine { return c.globals[name] }
func (c *joinCtx) WallClock() int64                { return 0 }
func (c *joinCtx) Folding() bool                   { return false }

// runTxns runs steps in transactions of per steps, as a task does: each
// transaction ends with a flush and a commit of every store. A
// transaction i with abort(i) is first run and aborted — its outputs and
// changelog records dropped, its stores' stages discarded, the watermark
// set back and every listener's OnAbort called — and then run again.
// It returns what the committed transactions forwarded, and their
// changelog.
func (c *joinCtx) runTxns(t testing.TB, steps []func() error, per int, abort func(i int) bool, listeners ...exec.AbortListener) (out, changelog []string) {
	t.Helper()
	names := make([]string, 0, len(c.stores))
	for name := range c.stores {
		names = append(names, name)
	}
	slices.Sort(names) // flush in one order, so changelogs compare
	run := func(txn []func() error) {
		t.Helper()
		for _, step := range txn {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range names {
			c.stores[name].Flush()
		}
	}
	for i, n := 0, 0; i < len(steps); i, n = i+per, n+1 {
		txn := steps[i:min(i+per, len(steps))]
		outAt, logAt, lateAt, wm := len(c.out), len(c.changelog), c.late, c.wm
		if abort(n) {
			run(txn)
			for _, name := range names {
				c.stores[name].Abort()
			}
			for _, l := range listeners {
				l.OnAbort()
			}
			c.out, c.changelog, c.late, c.wm = c.out[:outAt], c.changelog[:logAt], lateAt, wm
		}
		run(txn)
		for _, name := range names {
			if err := c.stores[name].Commit(store.NoCheckpoint); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c.out, c.changelog
}

// storeKeys returns every key of the named store, committed and staged.
func (c *joinCtx) storeKeys(t testing.TB, name string) []string {
	t.Helper()
	var keys []string
	if err := c.stores[name].Range(nil, nil, func(k, _ []byte) error {
		keys = append(keys, fmt.Sprintf("%x", k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// kvView is the typed view FKTable asks for, over a staged store.
type kvView[K, V any] struct {
	st *store.Staged
	ks serde.Serde[K]
	vs serde.Serde[V]
}

func (kv kvView[K, V]) Get(k K) (v V, ok bool, err error) {
	kb, err := kv.ks.Encode(k)
	if err != nil {
		return v, false, err
	}
	b, ok, err := kv.st.Get(kb)
	if err != nil || !ok {
		return v, false, err
	}
	v, err = kv.vs.Decode(b)
	return v, err == nil, err
}

func (kv kvView[K, V]) Put(k K, v V) error {
	kb, err := kv.ks.Encode(k)
	if err != nil {
		return err
	}
	vb, err := kv.vs.Encode(v)
	if err != nil {
		return err
	}
	return kv.st.Put(kb, vb)
}

func (kv kvView[K, V]) Delete(k K) error {
	kb, err := kv.ks.Encode(k)
	if err != nil {
		return err
	}
	return kv.st.Delete(kb)
}
