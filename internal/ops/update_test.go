package ops

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

func countStore() KVStore[string, int64] {
	return KVStore[string, int64]{Name: "counts", Key: serde.String, Value: serde.Int64}
}

// countFn counts a key's records.
func countFn(_ string, _ string, old int64, ok bool) int64 {
	if !ok {
		return 1
	}
	return old + 1
}

// updateRun counts keys of every length: one record each at ts 1, commit;
// two each at ts 2 (processed, aborted and processed again when abort),
// commit. It returns what went out of the committed transactions, in
// order, and the counts committed.
func updateRun(t *testing.T, fold, abort bool) (out []string, counts map[string]int64) {
	t.Helper()
	c := newTableCtx(t, fold, "counts")
	p := NewUpdate(countStore(), countFn)
	if err := p.Init(c); err != nil {
		t.Fatal(err)
	}
	keys := testkeys.All()
	process := func(ts int64, times int) {
		for range times {
			for _, k := range keys {
				if err := p.Process(exec.Record{Key: k, Value: "v", Timestamp: ts}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// A stream delete changes no aggregate.
		if err := p.Process(exec.Record{Key: keys[0], Value: exec.Tombstone, Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
		if fold {
			c.unfold(t, "counts", p)
		}
	}
	process(1, 1)
	out = append(out, c.take()...)
	c.commit(t, 1)
	if abort {
		process(2, 2)
		if len(c.take()) == 0 {
			t.Fatal("the aborted transaction forwarded nothing")
		}
		c.abort()
	}
	process(2, 2)
	out = append(out, c.take()...)
	c.commit(t, 2)
	counts = map[string]int64{}
	kv := countStore().Open(c)
	for _, k := range keys {
		n, _, err := kv.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		counts[k] = n
	}
	return out, counts
}

// TestUpdateFoldedAndUnfolded drives the aggregation runtime without the
// DSL over keys of every length: unfolded, every record forwards its
// change; folded, each key forwards one change per flush, from the value
// it last forwarded. An aborted transaction replayed gives the same.
func TestUpdateFoldedAndUnfolded(t *testing.T) {
	keys := testkeys.All()
	for _, fold := range []bool{false, true} {
		var want []string
		for _, k := range keys {
			want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{New: int64(1)}, Timestamp: 1}))
		}
		for range 2 {
			for _, k := range keys {
				switch {
				case !fold && len(want) < 2*len(keys):
					want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{Old: int64(1), New: int64(2)}, Timestamp: 2}))
				case !fold:
					want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{Old: int64(2), New: int64(3)}, Timestamp: 2}))
				case len(want) < 2*len(keys):
					want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{Old: int64(1), New: int64(3)}, Timestamp: 2}))
				}
			}
		}
		for _, abort := range []bool{false, true} {
			t.Run(fmt.Sprintf("fold=%v/abort=%v", fold, abort), func(t *testing.T) {
				out, counts := updateRun(t, fold, abort)
				if !slices.Equal(out, want) {
					t.Fatalf("forwarded %d changes, want %d:\n%s\nwant\n%s", len(out), len(want), sorted(out), sorted(want))
				}
				for _, k := range keys {
					if counts[k] != 3 {
						t.Fatalf("key of %d bytes counted %d, want 3", len(k), counts[k])
					}
				}
			})
		}
	}
}

// TestUpdateTyped links the aggregation into a typed chain, as the task
// does: records in typed, changes out typed, held updates too at the
// flush, with the record context of their last write.
func TestUpdateTyped(t *testing.T) {
	for _, fold := range []bool{false, true} {
		t.Run(fmt.Sprintf("fold=%v", fold), func(t *testing.T) {
			c := newTableCtx(t, fold, "counts")
			n := &exec.Node{Name: "COUNT"}
			n.Typed = UpdateTyped[string, string, int64](n)
			p := NewUpdate(countStore(), countFn)
			if err := p.Init(c); err != nil {
				t.Fatal(err)
			}
			var f exec.Frame
			var got []string
			next := func(k string, ch exec.ChangeOf[int64]) error {
				got = append(got, fmtRecord(exec.Record{Key: k, Value: ch.Erase(), Timestamp: f.Timestamp, Headers: f.Headers}))
				if len(f.Headers) != 1 || f.Headers[0].Key != "h" {
					t.Fatalf("headers %v", f.Headers)
				}
				return nil
			}
			entry, ok := n.Typed.Link(&f, p, next).(func(string, string) error)
			if !ok {
				t.Fatal("no typed entry")
			}
			keys := testkeys.All()
			for ts := int64(1); ts <= 2; ts++ {
				for _, k := range keys {
					f.Timestamp, f.Headers = ts, []exec.Header{{Key: "h", Value: []byte(k)}}
					if err := entry(k, "v"); err != nil {
						t.Fatal(err)
					}
					if f.Node != n || f.Class != exec.Processing {
						t.Fatalf("frame at %v %v", f.Node, f.Class)
					}
				}
			}
			f.Timestamp, f.Headers = 99, nil
			if fold {
				if len(got) != 0 {
					t.Fatalf("folding forwarded %d changes before the flush", len(got))
				}
				c.unfold(t, "counts", p)
			}
			if len(c.out) != 0 {
				t.Fatalf("%d changes took the erased path", len(c.out))
			}
			var want []string
			for ts := int64(1); ts <= 2; ts++ {
				for _, k := range keys {
					switch {
					case fold && ts == 1:
						continue
					case fold:
						want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{New: int64(2)}, Timestamp: 2}))
					case ts == 1:
						want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{New: int64(1)}, Timestamp: 1}))
					default:
						want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{Old: int64(1), New: int64(2)}, Timestamp: 2}))
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("typed chain got\n%s\nwant\n%s", sorted(got), sorted(want))
			}
		})
	}
}
