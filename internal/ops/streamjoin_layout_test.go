package ops

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/store"
)

// TestStreamJoinReadsOlderLayouts: a join store written before segments
// (d records, and an inner side's x entries), or under another window
// (segments of another width, an outer side's x entries due at other
// times), is put in the current layout when the join first reads it. A run that stops halfway, has its stores
// rewritten so, and goes on with new sides (a restart; its first
// transaction aborted and run again) emits what a run without the stop
// emits, and leaves nothing in its stores.
//
// The records of the second half join those of the first, and one is the
// second of its key and timestamp: a record left in the old layout goes
// unjoined, or is overwritten by its sequence number's reuse.
func TestStreamJoinReadsOlderLayouts(t *testing.T) {
	for _, outer := range []bool{false, true} {
		for _, rewrite := range []string{"before-segments", "other-width"} {
			t.Run(fmt.Sprintf("outer=%v/%s", outer, rewrite), func(t *testing.T) {
				never := func(int) bool { return false }
				c0, l0, r0 := newJoinRunOf(t, outer)
				first, second := layoutSteps(c0, l0, r0)
				want, _ := c0.runTxns(t, append(first, second...), 3, never, l0, r0)

				c, l, r := newJoinRunOf(t, outer)
				first, _ = layoutSteps(c, l, r)
				c.runTxns(t, first, 3, never, l, r)
				moved := 0
				for _, name := range []string{"j-left", "j-right"} {
					moved += rewriteJoinStore(t, c.stores[name], rewrite, outer)
				}
				if moved == 0 {
					t.Fatal("no record was rewritten: the test tests nothing")
				}
				l, r = joinSidesOf(outer)
				if err := errorsJoin(l.Init(c), r.Init(c)); err != nil {
					t.Fatal(err)
				}
				_, second = layoutSteps(c, l, r)
				got, _ := c.runTxns(t, second, 3, func(i int) bool { return i == 0 }, l, r)
				if !slices.Equal(got, want) {
					t.Fatalf("%d results after the rewrite, want %d:\n%q\nwant\n%q", len(got), len(want), got, want)
				}
				for _, name := range []string{"j-left", "j-right"} {
					if keys := c.storeKeys(t, name); len(keys) != 0 {
						t.Fatalf("store %s keeps %d keys after the watermark, e.g. %s", name, len(keys), keys[0])
					}
				}
			})
		}
	}
}

// layoutSteps are TestStreamJoinReadsOlderLayouts' two halves: for every
// key, at timestamps spread over several segments of joinSides' width,
// first a left record and a right one too far to join it; then a right
// record that joins it, a second left record of its timestamp, and a left
// record that joins only the right one; then a watermark that removes
// them all.
func layoutSteps(c *joinCtx, left, right *StreamJoinSide[string, string, string, string]) (first, second []func() error) {
	rec := func(p *StreamJoinSide[string, string, string, string], k, v string, ts int64) func() error {
		return func() error { return p.Process(exec.Record{Key: k, Value: v, Timestamp: ts}) }
	}
	for i, k := range testkeys.All() {
		ts := int64(100 + i%7*13)
		first = append(first, rec(left, k, "l1", ts), rec(right, k, "far", ts+50))
		second = append(second, rec(right, k, "r1", ts+5), rec(left, k, "l2", ts), rec(left, k, "l3", ts+15))
	}
	second = append(second, func() error {
		c.wm = 1000
		return errorsJoin(left.OnWatermark(c.wm), right.OnWatermark(c.wm))
	})
	return first, second
}

// rewriteJoinStore commits st's records in an older layout: before
// segments (d records; an inner side's x entries, which only an outer
// side has now), or those of a longer window (segments 7 wide, an outer
// side's x entries due later). It returns how many it moved.
func rewriteJoinStore(t *testing.T, st *store.Staged, rewrite string, outer bool) int {
	t.Helper()
	type kv struct{ k, v []byte }
	var recs []kv
	if err := st.Range([]byte{layout.JoinRecord}, []byte{layout.JoinRecord + 1}, func(k, v []byte) error {
		recs = append(recs, kv{slices.Clone(k), slices.Clone(v)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var nk []byte
		switch rewrite {
		case "before-segments":
			nk = append([]byte{layout.WindowData}, r.k[9:]...)
			if !outer {
				ik := layout.JoinIndexKey(layout.JoinTime(r.k)+20, r.k)
				if err := st.Put(ik, layout.IndexValue); err != nil {
					t.Fatal(err)
				}
			}
		default:
			nk = append(layout.AppendTime([]byte{layout.JoinRecord}, layout.JoinSegment(layout.JoinTime(r.k), 7)), r.k[9:]...)
			if outer {
				// Due after the run's last watermark, as under a
				// longer window: left so, the record would go with
				// its segment, never emitted.
				ts := layout.JoinTime(r.k)
				if err := st.Delete(layout.JoinIndexKey(ts+20, r.k)); err != nil {
					t.Fatal(err)
				}
				if err := st.Put(layout.JoinIndexKey(ts+5000, r.k), layout.IndexValue); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := st.Delete(r.k); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(nk, r.v); err != nil {
			t.Fatal(err)
		}
	}
	st.Flush()
	if err := st.Commit(store.NoCheckpoint); err != nil {
		t.Fatal(err)
	}
	return len(recs)
}
