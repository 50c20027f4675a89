package ops

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

// TestStreamTableJoinEveryKeyLength joins stream records keyed by every
// length with a table holding every other key, inner and left: a key not
// in the table joins nothing (inner) or the zero value (left); table
// changes and stream deletes trigger nothing.
func TestStreamTableJoinEveryKeyLength(t *testing.T) {
	keys := testkeys.All()
	for _, left := range []bool{false, true} {
		t.Run(fmt.Sprintf("left=%v", left), func(t *testing.T) {
			c := newTableCtx(t, false, "table")
			tb := tableStore().Open(c)
			for i, k := range keys {
				if i%2 == 0 {
					if err := tb.Put(k, fmt.Sprint(i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			c.commit(t, 1)
			p := NewStreamTableJoin(tableStore(), func(_ string, v string, vt string, ok bool) (string, bool) {
				return v + "+" + vt, ok || left
			})
			if err := p.Init(c); err != nil {
				t.Fatal(err)
			}
			var want []string
			for i, k := range keys {
				for _, r := range []exec.Record{
					{Key: k, Value: "s", Timestamp: int64(i)},
					{Key: k, Value: exec.Change{New: "x"}},
					{Key: k, Value: exec.Tombstone},
				} {
					if err := p.Process(r); err != nil {
						t.Fatal(err)
					}
				}
				switch {
				case i%2 == 0:
					want = append(want, fmtRecord(exec.Record{Key: k, Value: "s+" + fmt.Sprint(i), Timestamp: int64(i)}))
				case left:
					want = append(want, fmtRecord(exec.Record{Key: k, Value: "s+", Timestamp: int64(i)}))
				}
			}
			if got := c.take(); !slices.Equal(got, want) {
				t.Fatalf("joined %d, want %d:\n%s\nwant\n%s", len(got), len(want), sorted(got), sorted(want))
			}
			if c.ignored != len(keys) {
				t.Errorf("%d deletes counted as ignored, want %d (the table's changes are not deletes)", c.ignored, len(keys))
			}
		})
	}
}

// TestTableJoinSideReadsWhatTheOtherForwarded joins one table's changes
// with the other table's store while the other folds: its held update has
// not gone out, so the join uses the value it last forwarded, and the old
// side of the joined change is the row last emitted. After the other's
// flush, its new value is what is forwarded. Keys of every length, an
// abort in between.
func TestTableJoinSideReadsWhatTheOtherForwarded(t *testing.T) {
	keys := testkeys.All()
	c := newTableCtx(t, true, "left", "right")
	right := NewTableSource(KVStore[string, string]{Name: "right", Key: serde.String, Value: serde.String})
	if err := right.Init(c); err != nil {
		t.Fatal(err)
	}
	// The left side's changes joined with the right's store: inner.
	side := NewTableJoinSide(KVStore[string, string]{Name: "right", Key: serde.String, Value: serde.String},
		func(_ string, own int64, ownOK bool, other string, otherOK bool) (string, bool) {
			return fmt.Sprintf("%d+%s", own, other), ownOK && otherOK
		})
	if err := side.Init(c); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := right.Process(exec.Record{Key: k, Value: "r1"}); err != nil {
			t.Fatal(err)
		}
	}
	c.unfold(t, "right", right)
	c.take()
	c.commit(t, 1)

	run := func() []string {
		for i, k := range keys {
			// The right side changes, held until the flush.
			if err := right.Process(exec.Record{Key: k, Value: "r2"}); err != nil {
				t.Fatal(err)
			}
			ch := exec.Change{New: int64(i)}
			if i%2 == 1 {
				ch.Old = int64(-i)
			}
			if err := side.Process(exec.Record{Key: k, Value: ch, Timestamp: 5}); err != nil {
				t.Fatal(err)
			}
		}
		return c.take()
	}
	run()
	c.unfold(t, "right", right) // the aborted transaction flushed too
	c.take()
	c.abort()
	got := run()
	var want []string
	for i, k := range keys {
		ch := exec.Change{New: fmt.Sprintf("%d+r1", i)}
		if i%2 == 1 {
			ch.Old = fmt.Sprintf("%d+r1", -i)
		}
		want = append(want, fmtRecord(exec.Record{Key: k, Value: ch, Timestamp: 5}))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("joined\n%s\nwant\n%s", sorted(got), sorted(want))
	}
	c.unfold(t, "right", right)
	c.take()
	// Now the right side forwarded r2.
	if err := side.Process(exec.Record{Key: keys[3], Value: exec.Change{Old: int64(3), New: int64(4)}, Timestamp: 6}); err != nil {
		t.Fatal(err)
	}
	if got, want := c.take(), []string{fmtRecord(exec.Record{Key: keys[3], Value: exec.Change{Old: "3+r2", New: "4+r2"}, Timestamp: 6})}; !slices.Equal(got, want) {
		t.Fatalf("after the flush: %q, want %q", got, want)
	}
	// A delete on this side retracts the row; a row absent on both sides
	// sends nothing.
	if err := side.Process(exec.Record{Key: keys[0], Value: exec.Change{Old: int64(4)}, Timestamp: 7}); err != nil {
		t.Fatal(err)
	}
	if err := side.Process(exec.Record{Key: "absent", Value: exec.Change{New: int64(1)}, Timestamp: 8}); err != nil {
		t.Fatal(err)
	}
	if got, want := c.take(), []string{fmtRecord(exec.Record{Key: keys[0], Value: exec.Change{Old: "4+r2"}, Timestamp: 7})}; !slices.Equal(got, want) {
		t.Fatalf("delete: %q, want %q", got, want)
	}
}
