package ops

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// windowTestCtx is the exec.Context a window runtime sees in these tests:
// one store, a result child "out" and a late child "late", a watermark and
// a clock the test sets.
type windowTestCtx struct {
	st         *store.Staged
	wm, now    int64
	streamTime int64
	out        []string // the results, as windowResult formats them
	late       []exec.Record
	lateCount  int
}

func (c *windowTestCtx) Forward(exec.Record) error { return errors.New("ops test: Forward") }
func (c *windowTestCtx) ForwardTo(child string, r exec.Record) error {
	switch child {
	case "out":
		c.out = append(c.out, windowResult(r))
	case "late":
		c.late = append(c.late, r)
	default:
		return fmt.Errorf("ops test: no child %q", child)
	}
	return nil
}
func (c *windowTestCtx) Store(string) *store.Staged { return c.st }
func (c *windowTestCtx) Send(string, bool, []byte, []byte, []exec.Header, int64) error {
	return errors.New("ops test: Send")
}
func (c *windowTestCtx) RecordMeta() (string, int32, int64, bool) { return "", 0, 0, false }
func (c *windowTestCtx) TaskID() string                           { return "0_0" }
func (c *windowTestCtx) Partition() int32                         { return 0 }
func (c *windowTestCtx) StreamTime() int64                        { return c.streamTime }
func (c *windowTestCtx) Schedule(time.Duration, exec.PunctuationType, func(int64) error) func() {
	return func() {}
}
func (c *windowTestCtx) Watermark() int64           { return c.wm }
func (c *windowTestCtx) Children() []string         { return []string{"late", "out"} }
func (c *windowTestCtx) CountLate()                 { c.lateCount++ }
func (c *windowTestCtx) CountIgnoredDelete()        {}
func (c *windowTestCtx) Global(string) store.Engine { return nil }
func (c *windowTestCtx) WallClock() int64           { return c.now }
func (c *windowTestCtx) Folding() bool              { return false }

// ForwardTyped runs send: no task links a typed chain here.
func (c *windowTestCtx) ForwardTyped(_ int64, send func() error) error { return send() }

func (c *windowTestCtx) process(p exec.Processor, k string, v, ts int64) error {
	c.streamTime = max(c.streamTime, ts)
	return p.Process(exec.Record{Key: k, Value: v, Timestamp: ts})
}

// windowTestKey is the key of a result (topology.Windowed in production).
type windowTestKey struct {
	k string
	b window.Bounds
}

func windowTestKeyOf(k string, b window.Bounds) any { return windowTestKey{k, b} }

// windowResult formats a forwarded result: key length (keys are long),
// window, value or change, timestamp.
func windowResult(r exec.Record) string {
	wk := r.Key.(windowTestKey)
	v := fmt.Sprint(r.Value)
	if c, ok := r.Value.(exec.Change); ok {
		v = fmt.Sprintf("%v", c.New)
		if c.New == nil {
			v = fmt.Sprintf("retract %v", c.Old)
		}
	}
	return fmt.Sprintf("%s[%d,%d)=%s@%d", windowTestName(wk.k), wk.b.Start, wk.b.End, v, r.Timestamp)
}

// windowTestName names a key in results: its length and a short hash of
// its bytes, so two keys of one length differ.
func windowTestName(k string) string {
	h := uint32(2166136261)
	for i := 0; i < len(k); i++ {
		h = (h ^ uint32(k[i])) * 16777619
	}
	return fmt.Sprintf("k%d.%08x", len(k), h)
}

// windowTestKeys are keys of every encoded length and UUIDs, in the order
// their window keys sort (uvarint length, then bytes): the order in which
// windows due at one time fire.
func windowTestKeys() []string {
	keys := testkeys.All()
	slices.SortFunc(keys, func(a, b string) int {
		return bytes.Compare(layout.WindowKeyPrefix([]byte(a)), layout.WindowKeyPrefix([]byte(b)))
	})
	return keys
}

func windowTestSum(_ string, v, a int64, ok bool) int64 {
	if !ok {
		return v
	}
	return a + v
}

func windowTestNew(t *testing.T, c WindowConfig[string, int64, int64], e store.Engine) (*Window[string, int64, int64], *windowTestCtx) {
	t.Helper()
	c.Store, c.Keys, c.Windowed, c.LateChild = "w", serde.String, windowTestKeyOf, "late"
	if c.Values == nil {
		c.Values = serde.Int64
	}
	if c.Add == nil {
		c.Add = windowTestSum
	}
	ctx := &windowTestCtx{st: store.NewStaged("w", e), wm: window.NoWatermark}
	p := NewWindow(c)
	if err := p.Init(ctx); err != nil {
		t.Fatal(err)
	}
	return p, ctx
}

// TestWindowTumblingFiresLateAndCloses drives tumbling windows directly:
// each key's window fires once the watermark reaches its last timestamp,
// in window-key order; a record within the allowed lateness fires it again
// at once; a record past it is late (counted, handed to the late child);
// and at its close the window and its index entries are gone.
func TestWindowTumblingFiresLateAndCloses(t *testing.T) {
	keys := windowTestKeys()
	p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
		Windows: window.Tumbling(100 * time.Millisecond), Lateness: 50, Trigger: window.OnWatermark(),
	}, store.NewMemory())
	for _, k := range keys {
		for _, r := range []struct{ v, ts int64 }{{1, 10}, {2, 60}, {4, 130}} {
			if err := ctx.process(p, k, r.v, r.ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(ctx.out) != 0 {
		t.Fatalf("fired before the watermark: %v", ctx.out)
	}
	if err := p.OnWatermark(99); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range keys {
		want = append(want, windowTestName(k)+"[0,100)=3@99")
	}
	if !slices.Equal(ctx.out, want) {
		t.Fatalf("at watermark 99:\n got %v\nwant %v", ctx.out, want)
	}

	// Within the lateness: fired again at once, with the update.
	ctx.out, ctx.wm = nil, 99
	if err := ctx.process(p, keys[0], 10, 20); err != nil {
		t.Fatal(err)
	}
	if w := []string{windowTestName(keys[0]) + "[0,100)=13@99"}; !slices.Equal(ctx.out, w) {
		t.Fatalf("late update: %v, want %v", ctx.out, w)
	}
	// Past it: late, and nothing changes.
	ctx.out, ctx.wm = nil, 149
	if err := ctx.process(p, keys[1], 100, 20); err != nil {
		t.Fatal(err)
	}
	if len(ctx.out) != 0 || ctx.lateCount != 1 || len(ctx.late) != 1 || ctx.late[0].Key != keys[1] {
		t.Fatalf("late record: out %v, counted %d, late child %v", ctx.out, ctx.lateCount, ctx.late)
	}

	// The first windows close; the second ones fire and close.
	if err := p.OnWatermark(1 << 40); err != nil {
		t.Fatal(err)
	}
	want = want[:0]
	for _, k := range keys {
		want = append(want, windowTestName(k)+"[100,200)=4@199")
	}
	if !slices.Equal(ctx.out, want) {
		t.Fatalf("at the end:\n got %v\nwant %v", ctx.out, want)
	}
	if left := rangeDump(t, ctx.st, nil, nil); len(left) != 0 {
		t.Fatalf("closed windows left %d entries, first %s", len(left), left[0])
	}
}

// TestWindowSessionsMergeAndRetract: for keys of every length, a record
// bridging two emitted sessions retracts both (with what each emitted) and
// emits the merged one, counting since-fire across the merge.
func TestWindowSessionsMergeAndRetract(t *testing.T) {
	keys := windowTestKeys()
	p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
		Windows: window.InactivityGap(10 * time.Millisecond), Trigger: window.EveryRecord(),
		Merge: func(_ string, a, b int64) int64 { return a + b },
	}, store.NewMemory())
	for _, k := range keys {
		ctx.out = nil
		for _, r := range []struct{ v, ts int64 }{{1, 0}, {2, 20}, {4, 10}} {
			if err := ctx.process(p, k, r.v, r.ts); err != nil {
				t.Fatal(err)
			}
		}
		n := windowTestName(k)
		want := []string{n + "[0,1)=1@0", n + "[20,21)=2@20", n + "[0,1)=retract 1@0", n + "[20,21)=retract 2@20", n + "[0,21)=7@20"}
		if !slices.Equal(ctx.out, want) {
			t.Fatalf("key %d bytes:\n got %v\nwant %v", len(k), ctx.out, want)
		}
	}
	// The sessions close at their last record plus the gap; nothing is
	// left after the flush.
	ctx.out = nil
	if err := p.OnWatermark(30); err != nil {
		t.Fatal(err)
	}
	if len(ctx.out) != 0 {
		t.Fatalf("EveryRecord fired at the close: %v", ctx.out)
	}
	// At the flush (Spill, exec.Holder) the expiry entries due go too.
	if err := p.Spill(); err != nil {
		t.Fatal(err)
	}
	if left := rangeDump(t, ctx.st, nil, nil); len(left) != 0 {
		t.Fatalf("closed sessions left %d entries, first %s", len(left), left[0])
	}
}

// TestWindowElementsCountWindows drives the element mode the way tumbling
// and sliding count windows use it: a global window, CompleteEvery over an
// early trigger (fire and purge every 3 records), and a sliding one that
// keeps its last 3 elements by an evictor and by Trim.
func TestWindowElementsCountWindows(t *testing.T) {
	keys := windowTestKeys()
	fire := func(k string, b window.Bounds, es []Element[int64]) []any {
		var vs []string
		for _, e := range es {
			vs = append(vs, fmt.Sprint(e.Value))
		}
		return []any{strings.Join(vs, "+")}
	}
	t.Run("tumbling", func(t *testing.T) {
		p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
			Windows: window.Global(), Trigger: CompleteEvery(window.CountTrigger(2), 3),
			Elements: &WindowElements[string, int64]{Values: serde.Int64, Fire: fire},
		}, store.NewMemory())
		for _, k := range keys {
			ctx.out = nil
			for i := range int64(7) {
				ctx.streamTime = 0
				if err := ctx.process(p, k, i, 100+i); err != nil {
					t.Fatal(err)
				}
			}
			n := windowTestName(k) + "[-9223372036854775808,9223372036854775807)="
			// CountTrigger(2) fires at 2 since the last firing; at 3 the
			// window completes and purges.
			want := []string{n + "0+1@101", n + "0+1+2@102", n + "3+4@104", n + "3+4+5@105"}
			if !slices.Equal(ctx.out, want) {
				t.Fatalf("key %d bytes:\n got %v\nwant %v", len(k), ctx.out, want)
			}
			// One element left, seq 6.
			var elems []int64
			pre := layout.ElementPrefix(layout.WindowKey(nil, []byte(k), window.GlobalBounds.Start))
			if err := ctx.st.Range(pre, layout.PrefixEnd(pre), func(key, _ []byte) error {
				seq, _ := layout.ElementSeq(key)
				elems = append(elems, seq)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(elems, []int64{6}) {
				t.Fatalf("key %d bytes: elements kept %v, want [6]", len(k), elems)
			}
		}
	})
	t.Run("sliding", func(t *testing.T) {
		last3 := func(_ window.Bounds, es []Element[int64]) []Element[int64] {
			return es[max(0, len(es)-3):]
		}
		p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
			Windows: window.Global(), Trigger: window.CountTrigger(2), Trim: 3,
			Elements: &WindowElements[string, int64]{Values: serde.Int64, Fire: fire, Before: last3, Table: true},
		}, store.NewMemory())
		for _, k := range keys {
			ctx.out = nil
			for i := range int64(6) {
				ctx.streamTime = 0
				if err := ctx.process(p, k, i, 100+i); err != nil {
					t.Fatal(err)
				}
			}
			n := windowTestName(k) + "[-9223372036854775808,9223372036854775807)="
			want := []string{n + "0+1@101", n + "1+2+3@103", n + "3+4+5@105"}
			if !slices.Equal(ctx.out, want) {
				t.Fatalf("key %d bytes:\n got %v\nwant %v", len(k), ctx.out, want)
			}
		}
	})
}

// TestWindowSessionElementsMerge: in element mode, a bridging record
// leaves the elements of the absorbed session that starts where the merged
// one does under their keys, re-files the other's after them, and fires the
// merged session with all of them in that order; nothing is retracted (the
// results are a stream), and nothing is left once the session closes and the
// transaction flushes.
func TestWindowSessionElementsMerge(t *testing.T) {
	keys := windowTestKeys()
	fire := func(k string, b window.Bounds, es []Element[int64]) []any {
		var vs []string
		for _, e := range es {
			vs = append(vs, fmt.Sprintf("%d@%d", e.Value, e.Timestamp))
		}
		return []any{strings.Join(vs, "+")}
	}
	p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
		Windows: window.InactivityGap(10 * time.Millisecond), Trigger: window.EveryRecord(),
		Elements: &WindowElements[string, int64]{Values: serde.Int64, Fire: fire},
	}, store.NewMemory())
	for _, k := range keys {
		ctx.out = nil
		for _, r := range []struct{ v, ts int64 }{{1, 0}, {2, 20}, {3, 10}} {
			if err := ctx.process(p, k, r.v, r.ts); err != nil {
				t.Fatal(err)
			}
		}
		n := windowTestName(k)
		want := []string{n + "[0,1)=1@0@0", n + "[20,21)=2@20@20", n + "[0,21)=1@0+2@20+3@10@20"}
		if !slices.Equal(ctx.out, want) {
			t.Fatalf("key %d bytes:\n got %v\nwant %v", len(k), ctx.out, want)
		}
	}
	if err := p.OnWatermark(30); err != nil {
		t.Fatal(err)
	}
	// At the flush (Spill, exec.Holder) the expiry entries due go too.
	if err := p.Spill(); err != nil {
		t.Fatal(err)
	}
	if left := rangeDump(t, ctx.st, nil, nil); len(left) != 0 {
		t.Fatalf("closed sessions left %d entries, first %s", len(left), left[0])
	}
}

// TestWindowProcessingTimeTimers: a processing-time trigger fires when the
// clock passed in reaches the window's timer, not before.
func TestWindowProcessingTimeTimers(t *testing.T) {
	p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
		Windows: window.Tumbling(100 * time.Millisecond), Trigger: window.EarlyEveryInterval(50 * time.Millisecond),
	}, store.NewMemory())
	ctx.now = 1000
	for _, k := range windowTestKeys()[:3] {
		if err := ctx.process(p, k, 1, 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.OnProcessingTime(1049); err != nil || len(ctx.out) != 0 {
		t.Fatalf("before the timer: %v %v", ctx.out, err)
	}
	if err := p.OnProcessingTime(1050); err != nil || len(ctx.out) != 3 {
		t.Fatalf("at the timer: %v %v", ctx.out, err)
	}
}

// TestWindowAbortReplays: on Pebble, a transaction that fires windows is
// aborted (its stage dropped, OnAbort called) and replayed: the replay
// forwards what the first attempt did and leaves the store as a run that
// never aborted. Without OnAbort the replay misses the firings: the
// aborted attempt had raised the due-time bound past them.
func TestWindowAbortReplays(t *testing.T) {
	keys := windowTestKeys()
	cfg := WindowConfig[string, int64, int64]{
		Windows: window.Hopping(100*time.Millisecond, 50*time.Millisecond), Lateness: 20, Trigger: window.OnWatermark(),
	}
	// The first transaction makes the windows; the second adds to them
	// (which does not lower the due-time bound: no window is new) and
	// fires and closes some.
	first := func(ctx *windowTestCtx, p *Window[string, int64, int64]) {
		for _, k := range keys {
			for _, ts := range []int64{40, 120} {
				if err := ctx.process(p, k, 1, ts); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	second := func(ctx *windowTestCtx, p *Window[string, int64, int64]) {
		ctx.wm = 30
		for _, k := range keys {
			if err := ctx.process(p, k, 2, 130); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.OnWatermark(160); err != nil {
			t.Fatal(err)
		}
	}
	open := func() store.Engine {
		e, err := store.OpenPebble(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	commit := func(p *Window[string, int64, int64], st *store.Staged) {
		if err := p.Spill(); err != nil {
			t.Fatal(err)
		}
		if err := st.Commit(store.NoCheckpoint); err != nil {
			t.Fatal(err)
		}
	}

	// The run that never aborts: [-50,50), [0,100) and [50,150) fire,
	// the first two close.
	p, ref := windowTestNew(t, cfg, open())
	first(ref, p)
	commit(p, ref.st)
	ref.out = nil
	second(ref, p)
	commit(p, ref.st)
	if len(ref.out) != 3*len(keys) {
		t.Fatalf("reference run fired %d windows, want %d", len(ref.out), 3*len(keys))
	}

	for _, onAbort := range []bool{true, false} {
		p, ctx := windowTestNew(t, cfg, open())
		first(ctx, p)
		commit(p, ctx.st)
		second(ctx, p)
		ctx.st.Abort()
		p.Drop()
		if onAbort {
			p.OnAbort()
		}
		ctx.out, ctx.wm = nil, window.NoWatermark
		second(ctx, p)
		commit(p, ctx.st)
		same := slices.Equal(ctx.out, ref.out) && slices.Equal(rangeDump(t, ctx.st, nil, nil), rangeDump(t, ref.st, nil, nil))
		if onAbort && !same {
			t.Fatalf("replay after the abort forwarded %d results (want %d) or left a different store", len(ctx.out), len(ref.out))
		}
		if !onAbort && same {
			t.Fatal("negative control: the replay without OnAbort matched; the test no longer sees the stale bound")
		}
	}
}

// TestWindowIndexes: DueIndex lists the due keys of one index in time
// order, up to and including now (also at the extremes of int64), and
// FirstIndex finds the earliest.
func TestWindowIndexes(t *testing.T) {
	st := store.NewStaged("w", store.NewMemory())
	data := layout.WindowKey(nil, []byte(testkeys.Len(130, 1)), 0)
	for _, at := range []int64{-1 << 63, -1, 0, 5, 1<<63 - 1} {
		if err := st.Put(layout.IndexKey(layout.WindowFire, at, data), layout.IndexValue); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Put(layout.IndexKey(layout.WindowExpire, 3, data), layout.IndexValue); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		now  int64
		want []int64
	}{
		{-1 << 63, []int64{-1 << 63}},
		{-2, []int64{-1 << 63}},
		{4, []int64{-1 << 63, -1, 0}},
		{5, []int64{-1 << 63, -1, 0, 5}},
		{1<<63 - 1, []int64{-1 << 63, -1, 0, 5, 1<<63 - 1}},
	} {
		keys, err := DueIndex(st, layout.WindowFire, math.MinInt64, c.now)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, k := range keys {
			if !bytes.Equal(layout.WindowKeyFromIndex(k), data) {
				t.Fatalf("index key %x does not lead back to its window", k)
			}
			got = append(got, layout.ReadTime(k[1:9]))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("DueIndex(%d) = %v, want %v", c.now, got, c.want)
		}
	}
	if first, err := FirstIndex(st, layout.WindowExpire, math.MinInt64); err != nil || first != 3 {
		t.Errorf("FirstIndex = %d %v, want 3", first, err)
	}
	if first, err := FirstIndex(st, layout.WindowProc, math.MinInt64); err != nil || first != 1<<63-1 {
		t.Errorf("FirstIndex of an empty index = %d %v, want MaxInt64", first, err)
	}
}
