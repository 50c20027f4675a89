package ops

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// joinSides returns the two sides of an outer join of strings in a
// window of 10ms before and after, no grace, as topology builds them.
func joinSides() (left *StreamJoinSide[string, string, string, string], right *StreamJoinSide[string, string, string, string]) {
	return joinSidesOf(true)
}

// joinSidesOf is joinSides, outer or inner.
func joinSidesOf(outer bool) (left *StreamJoinSide[string, string, string, string], right *StreamJoinSide[string, string, string, string]) {
	const before, after, grace = 10, 10, 0
	join := func(k, l string, lok bool, r string, rok bool) string {
		return fmt.Sprintf("%v:%s+%v:%s", lok, l, rok, r)
	}
	left = NewStreamJoinSide(StreamJoinConfig[string, string, string, string]{OwnStore: "j-left", OtherStore: "j-right",
		Key: serde.String, OwnValue: serde.String, OtherValue: serde.String,
		Lo: -after, Hi: before, LateAfter: after + grace, CloseAfter: before + after + grace, Outer: outer, OtherOuter: outer,
		Join: func(k, own, other string, ok bool) string { return join(k, own, true, other, ok) }})
	right = NewStreamJoinSide(StreamJoinConfig[string, string, string, string]{OwnStore: "j-right", OtherStore: "j-left",
		Key: serde.String, OwnValue: serde.String, OtherValue: serde.String,
		Lo: -before, Hi: after, LateAfter: before + grace, CloseAfter: before + after + grace, Outer: outer, OtherOuter: outer,
		Join: func(k, own, other string, ok bool) string { return join(k, other, ok, own, true) }})
	return left, right
}

// streamJoinSteps are, for every key, two left records of one timestamp,
// a right record that joins both, and one too far to join anything; then a
// watermark that removes them all, and a late record.
func streamJoinSteps(c *joinCtx, left, right *StreamJoinSide[string, string, string, string]) []func() error {
	rec := func(p *StreamJoinSide[string, string, string, string], k, v string, ts int64) func() error {
		return func() error { return p.Process(exec.Record{Key: k, Value: v, Timestamp: ts}) }
	}
	var steps []func() error
	for i, k := range testkeys.All() {
		ts := int64(100 + i%7)
		steps = append(steps,
			rec(left, k, "l1", ts), rec(left, k, "l2", ts),
			rec(right, k, "r1", ts+5), rec(right, k, "far", ts+50),
			// A delete has nothing to join, and is not kept.
			func() error { return left.Process(exec.Record{Key: k, Value: exec.Tombstone, Timestamp: ts}) },
		)
	}
	steps = append(steps, func() error {
		c.wm = 1000
		return errorsJoin(left.OnWatermark(c.wm), right.OnWatermark(c.wm))
	}, rec(left, "late", "l", 990))
	return steps
}

// joinKeyAt is the key of joinSides' record seq of k at ts.
func joinKeyAt(k string, ts, seq int64) []byte {
	return layout.JoinKey([]byte(k), layout.JoinSegment(ts, joinSegment(20)), ts, seq)
}

func errorsJoin(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func newJoinRun(t *testing.T) (*joinCtx, *StreamJoinSide[string, string, string, string], *StreamJoinSide[string, string, string, string]) {
	return newJoinRunOf(t, true)
}

// newJoinRunOf is newJoinRun, outer or inner, its stages made with opts.
func newJoinRunOf(t *testing.T, outer bool, opts ...store.StagedOption) (*joinCtx, *StreamJoinSide[string, string, string, string], *StreamJoinSide[string, string, string, string]) {
	c := newJoinCtxWith(t, opts, "j-left", "j-right")
	left, right := joinSidesOf(outer)
	if err := errorsJoin(left.Init(c), right.Init(c)); err != nil {
		t.Fatal(err)
	}
	return c, left, right
}

// TestStreamJoinSideEveryKey drives both sides of an outer join directly
// over Pebble with keys of every encoded length and UUIDs: each key joins
// its two left records with its right one, in arrival order, emits the far
// right record unjoined once the watermark passes it, and leaves nothing
// behind in the stores.
func TestStreamJoinSideEveryKey(t *testing.T) {
	c, left, right := newJoinRun(t)
	out, _ := c.runTxns(t, streamJoinSteps(c, left, right), 5, func(int) bool { return false }, left, right)
	var want []string
	for i, k := range testkeys.All() {
		ts := int64(100 + i%7)
		want = append(want, fmt.Sprintf("%s=true:l1+true:r1@%d", k, ts+5), fmt.Sprintf("%s=true:l2+true:r1@%d", k, ts+5))
	}
	// The unjoined far records, removed in (time, key) order: by their
	// index keys.
	type far struct {
		ik  string
		out string
	}
	var fars []far
	for i, k := range testkeys.All() {
		ts := int64(100+i%7) + 50
		fars = append(fars, far{string(layout.JoinIndexKey(ts+20, joinKeyAt(k, ts, 0))), fmt.Sprintf("%s=false:+true:far@%d", k, ts)})
	}
	slices.SortFunc(fars, func(a, b far) int { return strings.Compare(a.ik, b.ik) })
	for _, f := range fars {
		want = append(want, f.out)
	}
	if len(out) != len(want) {
		t.Fatalf("%d results, want %d", len(out), len(want))
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("result %d: %q, want %q", i, out[i], want[i])
		}
	}
	if c.late != 1 {
		t.Fatalf("%d late records, want 1", c.late)
	}
	for _, name := range []string{"j-left", "j-right"} {
		if keys := c.storeKeys(t, name); len(keys) != 0 {
			t.Fatalf("store %s keeps %d keys after the watermark, e.g. %s", name, len(keys), keys[0])
		}
		// What a side knows of its store's segments goes with them.
		jk, ok := c.stores[name].Attached(joinKeysOf{}).(*joinKeys)
		if !ok {
			t.Fatalf("store %s has no joinKeys", name)
		}
		if len(jk.segs) != 0 {
			t.Fatalf("store %s: joinKeys holds %d segments after the watermark, want 0", name, len(jk.segs))
		}
	}
}

// TestStreamJoinSideKeysAndSeq checks the bytes a side writes: a key's
// records of one timestamp are numbered in arrival order from what is
// stored, and each has its removal in the x index.
func TestStreamJoinSideKeysAndSeq(t *testing.T) {
	for _, k := range []string{"", "a", testkeys.UUIDs(1)[0], testkeys.Len(130, 1)} {
		c, left, right := newJoinRun(t)
		steps := []func() error{
			func() error { return left.Process(exec.Record{Key: k, Value: "a", Timestamp: 7}) },
			func() error { return left.Process(exec.Record{Key: k, Value: "b", Timestamp: 7}) },
			func() error { return right.Process(exec.Record{Key: k, Value: "c", Timestamp: 9}) },
			// The key at a second time, then at its first again.
			func() error { return left.Process(exec.Record{Key: k, Value: "x", Timestamp: 8}) },
			func() error { return left.Process(exec.Record{Key: k, Value: "d", Timestamp: 7}) },
		}
		c.runTxns(t, steps, 1, func(int) bool { return false }, left, right)
		st := c.stores["j-left"]
		for seq, v := range []string{"a", "b", "d"} {
			key := joinKeyAt(k, 7, int64(seq))
			b, ok, err := st.Get(key)
			if err != nil || !ok || string(b) != "\x01"+v {
				t.Fatalf("key of %d bytes: record %d is %q %v %v, want joined %q", len(k), seq, b, ok, err, v)
			}
			if _, ok, _ := st.Get(layout.JoinIndexKey(27, key)); !ok {
				t.Fatalf("key of %d bytes: record %d has no removal at 27", len(k), seq)
			}
			kb, ts, err := layout.ParseJoinKey(key)
			if err != nil || string(kb) != k || ts != 7 || layout.JoinSeq(key) != int64(seq) {
				t.Fatalf("key of %d bytes: parsed %q %d %v", len(k), kb, ts, err)
			}
		}
	}
}

// TestStreamJoinSideAbortReplay aborts every other transaction once and
// replays it: the outputs and the changelogs equal a run without aborts,
// for transactions of several sizes.
func TestStreamJoinSideAbortReplay(t *testing.T) {
	for _, per := range []int{1, 3, 7} {
		c0, l0, r0 := newJoinRun(t)
		wantOut, wantLog := c0.runTxns(t, streamJoinSteps(c0, l0, r0), per, func(int) bool { return false }, l0, r0)
		c, left, right := newJoinRun(t)
		out, log := c.runTxns(t, streamJoinSteps(c, left, right), per, func(i int) bool { return i%2 == 0 }, left, right)
		if !slices.Equal(out, wantOut) {
			t.Fatalf("%d steps a transaction: %d results after aborts, want %d", per, len(out), len(wantOut))
		}
		if !slices.Equal(log, wantLog) {
			t.Fatalf("%d steps a transaction: changelogs differ after aborts", per)
		}
	}
}

// TestStreamJoinSideBoundedKeys runs streamJoinSteps with each store's
// read cache bound, and so its joinKeys', too small for what the steps
// store: joinKeys gives segments up as their entries pass the bound, and
// stays within it, and the outputs and changelogs are those of a run with
// room for every entry, with aborts and without.
func TestStreamJoinSideBoundedKeys(t *testing.T) {
	never := func(int) bool { return false }
	c0, l0, r0 := newJoinRun(t)
	wantOut, wantLog := c0.runTxns(t, streamJoinSteps(c0, l0, r0), 3, never, l0, r0)
	for _, limit := range []int{0, 2_000, 1 << 20} {
		for _, abort := range []func(int) bool{never, func(i int) bool { return i%2 == 0 }} {
			c, left, right := newJoinRunOf(t, true, store.WithReadCache(limit))
			gaveUp := false
			steps := streamJoinSteps(c, left, right)
			for i, step := range steps {
				steps[i] = func() error {
					if err := step(); err != nil {
						return err
					}
					for _, name := range []string{"j-left", "j-right"} {
						jk, ok := c.stores[name].Attached(joinKeysOf{}).(*joinKeys)
						if !ok {
							continue // (after an abort, until the next record)
						}
						if jk.Bytes() > limit {
							return fmt.Errorf("store %s: joinKeys holds %d bytes, over its bound %d", name, jk.Bytes(), limit)
						}
						for _, sk := range jk.segs {
							gaveUp = gaveUp || sk.full
						}
					}
					return nil
				}
			}
			out, log := c.runTxns(t, steps, 3, abort, left, right)
			if !slices.Equal(out, wantOut) {
				t.Fatalf("bound %d: %d results, want %d\n got  %q\n want %q", limit, len(out), len(wantOut), out, wantOut)
			}
			if !slices.Equal(log, wantLog) {
				t.Fatalf("bound %d: the changelogs differ from a run with room for every entry", limit)
			}
			if gaveUp != (limit < 1<<20) {
				t.Fatalf("bound %d: a segment given up: %v", limit, gaveUp)
			}
		}
	}
}

// TestJoinKeysGivesUpASegment: an entry that would take joinKeys past its
// bound gives its segment up, which then may hold any key at any time and
// counts nothing; other segments are still known key by key, and a
// segment's bytes leave with it.
func TestJoinKeysGivesUpASegment(t *testing.T) {
	const seg = 100
	s0, s1 := layout.JoinSegment(10, seg), layout.JoinSegment(150, seg)
	jk := newJoinKeys(seg, 3*keyBytes+2*pairBytes)
	add := func(k string, ts int64) bool { return jk.add([]byte(k), ts) }
	for i, k := range []string{"a", "b"} {
		if add(k, int64(10+i)) {
			t.Fatalf("%s: first record said stored before", k)
		}
	}
	if add("b", 12) { // b's second time: two pairs
		t.Fatal("b at a second time said stored before")
	}
	if !add("a", 10) {
		t.Fatal("a record of a key and time noted: not said stored before")
	}
	if jk.Bytes() != 2*keyBytes+2*pairBytes {
		t.Fatalf("Bytes = %d, want %d", jk.Bytes(), 2*keyBytes+2*pairBytes)
	}
	if add("c", 13) || jk.Bytes() != 3*keyBytes+2*pairBytes {
		t.Fatalf("c: Bytes = %d, want %d", jk.Bytes(), 3*keyBytes+2*pairBytes)
	}
	if held, ok := jk.held([]byte("d"), s0); ok {
		t.Fatalf("d held at %v before it was added", held)
	}
	// A fourth key does not fit: the segment is given up.
	if !add("d", 20) {
		t.Fatal("a record of a segment given up: not said stored before")
	}
	if jk.Bytes() != 0 {
		t.Fatalf("Bytes after the segment was given up = %d, want 0", jk.Bytes())
	}
	for _, k := range []string{"a", "d", "never added"} {
		if held, ok := jk.held([]byte(k), s0); !ok || held.lo != math.MinInt64 || held.hi != math.MaxInt64 {
			t.Fatalf("%s in a segment given up: held %v %v, want any time", k, held, ok)
		}
	}
	if !add("e", 30) {
		t.Fatal("a new key of a segment given up: not said stored before")
	}
	// The next segment is known key by key again.
	if add("a", 150) {
		t.Fatal("first record of the next segment said stored before")
	}
	if held, ok := jk.held([]byte("a"), s1); !ok || held != (heldTimes{150, 150}) {
		t.Fatalf("a in the next segment: held %v %v, want 150..150", held, ok)
	}
	if _, ok := jk.held([]byte("b"), s1); ok {
		t.Fatal("b held in the next segment, where it has no record")
	}
	jk.sweep(400, 150)
	if len(jk.segs) != 0 || jk.Bytes() != 0 {
		t.Fatalf("after the sweep: %d segments, %d bytes; want none", len(jk.segs), jk.Bytes())
	}
}

// TestJoinKeysBytesEstimate measures the heap that joinKeys' maps take
// against what it counts (keyBytes and pairBytes an entry), for segments
// of several sizes, of keys stored at one time and at two: the bound it
// keeps is of real memory, which the count does not fall short of by more
// than a tenth, nor pass by more than twice, as the maps grow by doubling.
func TestJoinKeysBytesEstimate(t *testing.T) {
	live := func() float64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc)
	}
	live() // (what earlier tests left is collected before the first measure)
	for _, times := range []int{1, 2} {
		for _, n := range []int{20_000, 30_000, 50_000, 100_000, 200_000} {
			jk := newJoinKeys(1<<30, math.MaxInt)
			var kb []byte
			for i := range n {
				kb = fmt.Appendf(kb[:0], "%08d", i)
				for j := range times {
					jk.add(kb, int64(i+j))
				}
			}
			counted := jk.Bytes()
			with := live()
			runtime.KeepAlive(jk)
			jk = nil
			ratio := (with - live()) / float64(counted)
			t.Logf("%d keys at %d times: %.2f of the %d bytes counted on the heap", n, times, ratio, counted)
			if ratio < 0.5 || ratio > 1.1 {
				t.Errorf("%d keys at %d times: the heap holds %.2f times what joinKeys counts", n, times, ratio)
			}
		}
	}
}

// TestJoinKeysSaysWhatMayBeStored: add says a key and time may be stored
// exactly when it noted them before, for a key at one time and at many,
// and notes pairs only for keys at two times or more; held bounds every
// time noted. In segments wide enough that times are kept in units of
// several milliseconds, every record notes its pair, and the bounds still
// hold.
func TestJoinKeysSaysWhatMayBeStored(t *testing.T) {
	for _, seg := range []int64{1000, 1 << 40} {
		jk := newJoinKeys(seg, math.MaxInt)
		if wide := seg > math.MaxUint32; wide != (jk.shift > 0) {
			t.Fatalf("segments %d ms wide: times in units of %d ms", seg, 1<<jk.shift)
		}
		seen := map[string]bool{}
		times := map[string][]int64{}
		base := int64(-1 << 20) // (times below 0, and within one segment of either width)
		for i, at := range []int64{10, 10, 12, 10, 12, 11, 11, 9, 13, 9, 10, 300, 300} {
			for _, k := range []string{"a", "b", testkeys.UUIDs(1)[0]} {
				ts := base + at
				if k == "b" {
					ts = base + 10 // b stays at one time
				}
				id := fmt.Sprint(k, "@", ts)
				if got := jk.add([]byte(k), ts); got != seen[id] {
					t.Fatalf("segments %d ms wide, step %d: %s: add says stored before %v, want %v", seg, i, id, got, seen[id])
				}
				seen[id] = true
				times[k] = append(times[k], ts)
			}
		}
		// The bounds hold every time noted, and are at most one unit
		// wider on either side: exact in milliseconds.
		segStart, unit := layout.JoinSegment(base, seg), int64(1)<<jk.shift
		for k, ts := range times {
			held, ok := jk.held([]byte(k), segStart)
			lo, hi := slices.Min(ts), slices.Max(ts)
			if !ok || held.lo > lo || held.hi < hi || held.lo <= lo-unit || held.hi >= hi+unit {
				t.Fatalf("segments %d ms wide: %s held at %v %v, want around %d..%d within %d ms", seg, k, held, ok, lo, hi, unit)
			}
		}
		sk := jk.segs[segStart]
		wantPairs := 2 * 6 // a's and the UUID's six times; b, at one time, needs none
		if jk.shift > 0 {
			wantPairs++ // b's one
		}
		if len(sk.pairs) != wantPairs {
			t.Fatalf("segments %d ms wide: %d pairs, want %d", seg, len(sk.pairs), wantPairs)
		}
		if want := 3*keyBytes + wantPairs*pairBytes; jk.Bytes() != want {
			t.Fatalf("segments %d ms wide: Bytes = %d, want %d", seg, jk.Bytes(), want)
		}
	}
}
