package ops

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

const slidingD, slidingLateness = 10, 5

func newSlidingRun(t *testing.T, emit SlidingEmit) (*joinCtx, *Sliding[string, string, string]) {
	c := newJoinCtx(t, "s")
	// Results go to the one child as changes; the oracle writes a window's
	// "key[start,end)=aggregate@timestamp".
	c.children = []string{"out"}
	c.fwdTo = func(_ string, r exec.Record) error {
		c.out = append(c.out, fmt.Sprintf("%v=%v@%d", r.Key, r.Value.(exec.Change).New, r.Timestamp))
		return nil
	}
	p := NewSliding(SlidingConfig[string, string, string]{Store: "s", Key: serde.String, Value: serde.String,
		D: slidingD, Lateness: slidingLateness, Emit: emit, Agg: serde.String,
		Fn: func(k, v, agg string, has bool) string { return agg + v },
		// "key[start,end)", as the oracle writes a window.
		Windowed: func(k string, b window.Bounds) any { return fmt.Sprintf("%s[%d,%d)", k, b.Start, b.End) }})
	if err := p.Init(c); err != nil {
		t.Fatal(err)
	}
	return c, p
}

// slidingRecs are one key's records, in timestamp order: two of one
// timestamp, one at the edge of the first's window, one past it.
var slidingRecs = []struct {
	ts int64
	v  string
}{{100, "a"}, {103, "b"}, {103, "c"}, {110, "d"}, {125, "e"}}

// slidingOracle is the final aggregate of every window of slidingRecs
// shifted by off (Kafka Streams' windows: each record's left window
// [ts-d, ts], and the right window [q+1, q+1+d] of a record at q with a
// record in (q, q+d]), each aggregating its records in arrival order.
func slidingOracle(k string, off int64) []string {
	starts := map[int64]bool{}
	for _, r := range slidingRecs {
		starts[r.ts+off-slidingD] = true
		for _, q := range slidingRecs {
			if q.ts > r.ts && q.ts <= r.ts+slidingD {
				starts[r.ts+off+1] = true
			}
		}
	}
	var out []string
	for s := range starts {
		agg := ""
		for _, r := range slidingRecs {
			if ts := r.ts + off; ts >= s && ts <= s+slidingD {
				agg += r.v
			}
		}
		out = append(out, fmt.Sprintf("%s[%d,%d)=%s@%d", k, s, s+slidingD+1, agg, s+slidingD))
	}
	return out
}

// slidingOff shifts the records of key i: keys come in groups of four
// whose windows overlap in time, each group 20ms after the one before.
func slidingOff(i int) int64 { return int64(i/4*20 + i%3) }

// slidingSteps sends every key its records, each key's shifted by
// slidingOff, with the watermark advancing between keys, firing and
// closing earlier keys' windows (but never so far that a record is late), then a watermark past everything and a late
// record.
func slidingSteps(c *joinCtx, p *Sliding[string, string, string]) []func() error {
	var steps []func() error
	for i, k := range testkeys.All() {
		off := slidingOff(i)
		for _, r := range slidingRecs {
			steps = append(steps, func() error { return p.Process(exec.Record{Key: k, Value: r.v, Timestamp: r.ts + off}) })
		}
		if i%10 == 9 {
			// Fires and closes the windows of keys some groups back.
			wm := int64(i/4*20) + 80
			steps = append(steps, func() error { c.wm = wm; return p.OnWatermark(c.wm) })
		}
	}
	return append(steps,
		func() error { c.wm = 10000; return p.OnWatermark(c.wm) },
		func() error { return p.Process(exec.Record{Key: "late", Value: "z", Timestamp: 9995}) })
}

// TestSlidingEveryKey drives sliding windows with EmitFinal directly over
// Pebble, with keys of every encoded length and UUIDs: every window of the
// oracle is emitted once with its final aggregate, a late record is
// counted, and the store is empty once the watermark passed everything.
func TestSlidingEveryKey(t *testing.T) {
	c, p := newSlidingRun(t, SlidingFinal)
	out, _ := c.runTxns(t, slidingSteps(c, p), 4, func(int) bool { return false }, p)
	var want []string
	for i, k := range testkeys.All() {
		want = append(want, slidingOracle(k, slidingOff(i))...)
	}
	slices.Sort(out)
	slices.Sort(want)
	if !slices.Equal(out, want) {
		t.Fatalf("%d windows, want %d:\n%q\nwant %q", len(out), len(want), out[:min(len(out), 8)], want[:8])
	}
	if c.late != 1 {
		t.Fatalf("%d late records, want 1", c.late)
	}
	if keys := c.storeKeys(t, "s"); len(keys) != 0 {
		t.Fatalf("the store keeps %d keys, e.g. %s", len(keys), keys[0])
	}
}

// TestSlidingEmits: by default a window emits once the watermark reaches
// End-1 and then on every late change; with EmitEveryUpdate on every
// change. Either way the last result of each window is the oracle's.
func TestSlidingEmits(t *testing.T) {
	for _, emit := range []SlidingEmit{SlidingOnWatermark, SlidingEveryUpdate} {
		c, p := newSlidingRun(t, emit)
		out, _ := c.runTxns(t, slidingSteps(c, p), 3, func(int) bool { return false }, p)
		last := map[string]string{}
		for _, o := range out {
			i := slices.Index([]byte(o), '=')
			last[o[:i]] = o
		}
		var got, want []string
		for _, o := range last {
			got = append(got, o)
		}
		for i, k := range testkeys.All() {
			want = append(want, slidingOracle(k, slidingOff(i))...)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("emit %d: last results of %d windows, want %d", emit, len(got), len(want))
		}
		if emit == SlidingOnWatermark && len(out) != len(want) {
			t.Fatalf("on the watermark: %d results for %d windows, none late", len(out), len(want))
		}
		if emit == SlidingEveryUpdate && len(out) <= len(want) {
			t.Fatalf("every update: only %d results for %d windows", len(out), len(want))
		}
	}
}

// TestSlidingRecordKeys checks the kept records' bytes: numbered in
// arrival order within a timestamp, each with its expiry in the y index.
func TestSlidingRecordKeys(t *testing.T) {
	for _, k := range []string{"", "a", testkeys.UUIDs(1)[0], testkeys.Len(130, 4)} {
		c, p := newSlidingRun(t, SlidingFinal)
		var steps []func() error
		for _, r := range slidingRecs[:3] {
			steps = append(steps, func() error { return p.Process(exec.Record{Key: k, Value: r.v, Timestamp: r.ts}) })
		}
		c.runTxns(t, steps, 1, func(int) bool { return false }, p)
		st := c.stores["s"]
		for _, r := range []struct {
			ts, seq int64
			v       string
		}{{100, 0, "a"}, {103, 0, "b"}, {103, 1, "c"}} {
			rk := layout.SlidingRecordKey([]byte(k), r.ts, r.seq)
			if v, ok, err := st.Get(rk); err != nil || !ok || string(v) != r.v {
				t.Fatalf("key of %d bytes: record %d/%d is %q %v %v, want %q", len(k), r.ts, r.seq, v, ok, err, r.v)
			}
			ik := layout.IndexKey(layout.SlidingRecordExpire, r.ts+slidingD+slidingLateness, rk)
			if _, ok, _ := st.Get(ik); !ok {
				t.Fatalf("key of %d bytes: record %d/%d has no expiry", len(k), r.ts, r.seq)
			}
			if got := layout.SlidingRecordKeyFromIndex(ik); string(got) != string(rk) {
				t.Fatalf("key of %d bytes: index %x gives back %x, want %x", len(k), ik, got, rk)
			}
		}
		// The left window of the record at 103 holds all three records.
		w, ok, err := p.codec.Get(layout.WindowKey(nil, []byte(k), 93))
		if err != nil || !ok || w.Agg != "abc" || w.Count != 3 {
			t.Fatalf("key of %d bytes: window [93,104) is %+v %v %v", len(k), w, ok, err)
		}
	}
}

// TestSlidingAbortReplay aborts every other transaction once and replays
// it: outputs and changelogs equal a run without aborts, under each emit
// option.
func TestSlidingAbortReplay(t *testing.T) {
	for _, emit := range []SlidingEmit{SlidingOnWatermark, SlidingFinal, SlidingEveryUpdate} {
		for _, per := range []int{1, 3, 7} {
			c0, p0 := newSlidingRun(t, emit)
			wantOut, wantLog := c0.runTxns(t, slidingSteps(c0, p0), per, func(int) bool { return false }, p0)
			c, p := newSlidingRun(t, emit)
			out, log := c.runTxns(t, slidingSteps(c, p), per, func(i int) bool { return i%2 == 0 }, p)
			if !slices.Equal(out, wantOut) {
				t.Fatalf("emit %d, %d steps a transaction: %d results after aborts, want %d", emit, per, len(out), len(wantOut))
			}
			if !slices.Equal(log, wantLog) {
				t.Fatalf("emit %d, %d steps a transaction: changelogs differ after aborts", emit, per)
			}
		}
	}
}
