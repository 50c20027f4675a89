package ops

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

func tableStore() KVStore[string, string] {
	return KVStore[string, string]{Name: "table", Key: serde.String, Value: serde.String}
}

// TestTableSource reads a topic as a table with keys of every length:
// upserts and deletes, a delete of an absent key changing nothing; folded,
// one change per key per flush. An aborted transaction replayed gives the
// same.
func TestTableSource(t *testing.T) {
	keys := testkeys.All()
	for _, fold := range []bool{false, true} {
		for _, abort := range []bool{false, true} {
			t.Run(fmt.Sprintf("fold=%v/abort=%v", fold, abort), func(t *testing.T) {
				c := newTableCtx(t, fold, "table")
				p := NewTableSource(tableStore())
				if err := p.Init(c); err != nil {
					t.Fatal(err)
				}
				pipe := func(k string, v any, ts int64) {
					if err := p.Process(exec.Record{Key: k, Value: v, Timestamp: ts}); err != nil {
						t.Fatal(err)
					}
				}
				flush := func() []string {
					if fold {
						c.unfold(t, "table", p)
					}
					return c.take()
				}
				for _, k := range keys {
					pipe(k, "a", 1)
				}
				var out []string
				out = append(out, flush()...)
				c.commit(t, 1)
				second := func() {
					for i, k := range keys {
						switch i % 3 {
						case 0:
							pipe(k, "b", 2)
							pipe(k, "c", 3)
						case 1:
							pipe(k, exec.Tombstone, 4)
							pipe(k, exec.Tombstone, 5) // absent by now: nothing
						}
					}
					pipe("never written", exec.Tombstone, 6)
				}
				if abort {
					second()
					flush()
					c.abort()
				}
				second()
				out = append(out, flush()...)
				c.commit(t, 2)

				var want []string
				for _, k := range keys {
					want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{New: "a"}, Timestamp: 1}))
				}
				for i, k := range keys {
					switch {
					case i%3 == 0 && fold:
						want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{Old: "a", New: "c"}, Timestamp: 3}))
					case i%3 == 0:
						want = append(want,
							fmtRecord(exec.Record{Key: k, Value: exec.Change{Old: "a", New: "b"}, Timestamp: 2}),
							fmtRecord(exec.Record{Key: k, Value: exec.Change{Old: "b", New: "c"}, Timestamp: 3}))
					case i%3 == 1:
						want = append(want, fmtRecord(exec.Record{Key: k, Value: exec.Change{Old: "a"}, Timestamp: 4}))
					}
				}
				if !slices.Equal(out, want) {
					t.Fatalf("got %d changes, want %d:\n%s\nwant\n%s", len(out), len(want), sorted(out), sorted(want))
				}
				kv := tableStore().Open(c)
				for i, k := range keys {
					v, ok, err := kv.Get(k)
					want, wantOK := map[int]string{0: "c", 1: "", 2: "a"}[i%3], i%3 != 1
					if err != nil || ok != wantOK || v != want {
						t.Fatalf("key of %d bytes: %q, %v, %v; want %q, %v", len(k), v, ok, err, want, wantOK)
					}
				}
			})
		}
	}
}

// TestTableMapAndToStream maps both sides of changes, drops a change that
// maps to nothing on either side, and turns changes into upserts and
// tombstones, on the erased path and in a typed chain.
func TestTableMapAndToStream(t *testing.T) {
	c := newTableCtx(t, false)
	long := testkeys.Len(130, 1)
	// Keep values of even length, doubled.
	m := TableMap(func(_ string, v string) (string, bool) { return v + v, len(v)%2 == 0 })
	for _, ch := range []exec.Change{{New: "ab"}, {Old: "ab", New: "abc"}, {Old: "abc", New: "a"}, {Old: "a"}, {Old: "abcd"}} {
		if err := m(c, exec.Record{Key: long, Value: ch, Timestamp: 7}); err != nil {
			t.Fatal(err)
		}
	}
	got := c.take()
	want := []string{
		fmtRecord(exec.Record{Key: long, Value: exec.Change{New: "abab"}, Timestamp: 7}),
		fmtRecord(exec.Record{Key: long, Value: exec.Change{Old: "abab"}, Timestamp: 7}),
		fmtRecord(exec.Record{Key: long, Value: exec.Change{Old: "abcdabcd"}, Timestamp: 7}),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("TableMap forwarded\n%s\nwant\n%s", sorted(got), sorted(want))
	}

	for _, r := range []exec.Record{
		{Key: "", Value: exec.Change{New: "x"}},
		{Key: "", Value: exec.Change{Old: "x", New: "y"}},
		{Key: "", Value: exec.Change{Old: "y"}},
		{Key: "", Value: exec.Change{}},
	} {
		if err := ToStream(c, r); err != nil {
			t.Fatal(err)
		}
	}
	got = c.take()
	want = []string{"=x@0", "=y@0", "=tombstone@0"}
	if !slices.Equal(got, want) {
		t.Fatalf("ToStream forwarded %q, want %q", got, want)
	}
	if err := ToStream(c, exec.Record{Key: "", Value: "not a change"}); err == nil {
		t.Fatal("ToStream took a value that is not a change")
	}

	// Typed: upserts go on typed, a delete through the node's Processor.
	n := &exec.Node{Name: "TOSTREAM"}
	typed := ToStreamTyped[string, string](n)
	var f exec.Frame
	var emitted []string
	p := NewFn(ToStream)()
	if err := p.Init(c); err != nil {
		t.Fatal(err)
	}
	entry := typed.Link(&f, p, func(k, v string) error { emitted = append(emitted, k+"="+v); return nil }).(func(string, exec.ChangeOf[string]) error)
	for _, ch := range []exec.ChangeOf[string]{{New: "x", HasNew: true}, {Old: "x", HasOld: true}, {}} {
		if err := entry(long, ch); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(emitted, []string{long + "=x"}) || !slices.Equal(c.take(), []string{fmtRecord(exec.Record{Key: long, Value: exec.Tombstone})}) || f.Node != n {
		t.Fatalf("typed ToStream emitted %q", emitted)
	}
}

// TestTableGroupByAndAggregate re-groups rows keyed by every length into
// groups keyed by every length: a row that stays in its group (the keys
// encode equal) sends one operation with both values, one that moves a
// subtraction and an addition; the table aggregation applies them, so
// each group's count is the number of its rows, through an abort too.
func TestTableGroupByAndAggregate(t *testing.T) {
	keys := testkeys.All()
	// A row's group is its value's group key: the value is the index of
	// the group key in keys.
	group := TableGroupBy("g", serde.String, func(_ string, v int64) (string, int64) { return keys[v], v })
	sendFor := func(ch exec.Change) []string {
		c := newTableCtx(t, false)
		if err := group(c, exec.Record{Key: "row", Value: ch, Timestamp: 3}); err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, r := range c.out {
			op := r.Value.(TableOp[int64])
			ops = append(ops, fmt.Sprintf("%d:%v%d/%v%d", len(r.Key.(string)), op.Sub, op.Old, op.Add, op.New))
		}
		return ops
	}
	if got := sendFor(exec.Change{Old: int64(5), New: int64(5)}); !slices.Equal(got, []string{"5:true5/true5"}) {
		t.Fatalf("a row staying in its group sent %q", got)
	}
	if got := sendFor(exec.Change{Old: int64(5), New: int64(6)}); !slices.Equal(got, []string{"5:true5/false0", "6:false0/true6"}) {
		t.Fatalf("a row moving sent %q", got)
	}
	if got := sendFor(exec.Change{New: int64(0)}); !slices.Equal(got, []string{"0:false0/true0"}) {
		t.Fatalf("an insert sent %q", got)
	}
	if got := sendFor(exec.Change{Old: int64(140)}); !slices.Equal(got, []string{"140:true140/false0"}) {
		t.Fatalf("a delete sent %q", got)
	}

	// The whole path: group changes, encode them as the repartition topic
	// does, aggregate the decoded operations.
	for _, fold := range []bool{false, true} {
		t.Run(fmt.Sprintf("fold=%v", fold), func(t *testing.T) {
			c := newTableCtx(t, fold, "counts")
			agg := NewUpdate(KVStore[string, int64]{Name: "counts", Key: serde.String, Value: serde.Int64},
				TableAggregate(func() int64 { return 0 },
					func(_ string, _ int64, n int64) int64 { return n + 1 },
					func(_ string, _ int64, n int64) int64 { return n - 1 }))
			if err := agg.Init(c); err != nil {
				t.Fatal(err)
			}
			opSerde := TableOpSerde[int64]{serde.Int64}
			gc := newTableCtx(t, false)
			rows := map[string]int64{} // row → group index
			apply := func(row string, ch exec.Change) {
				if err := group(gc, exec.Record{Key: row, Value: ch, Timestamp: 1}); err != nil {
					t.Fatal(err)
				}
				for _, r := range gc.out {
					b, err := opSerde.Encode(r.Value.(TableOp[int64]))
					if err != nil {
						t.Fatal(err)
					}
					op, err := opSerde.Decode(b)
					if err != nil {
						t.Fatal(err)
					}
					if err := agg.Process(exec.Record{Key: r.Key, Value: op, Timestamp: r.Timestamp}); err != nil {
						t.Fatal(err)
					}
				}
				gc.out = nil
			}
			step := func(round int) {
				for i, row := range keys {
					g := int64((i*7 + round) % len(keys))
					if round%2 == 1 && i%2 == 0 {
						g = rows[row] // stays
					}
					ch := exec.Change{New: g}
					if old, ok := rows[row]; ok {
						ch.Old = old
					}
					apply(row, ch)
					rows[row] = g
				}
				if fold {
					c.unfold(t, "counts", agg)
				}
				c.take()
			}
			step(0)
			c.commit(t, 1)
			saved := maps.Clone(rows)
			step(1)
			c.abort()
			rows = saved
			step(1)
			c.commit(t, 2)
			want := map[string]int64{}
			for _, g := range rows {
				want[keys[g]]++
			}
			kv := KVStore[string, int64]{Name: "counts", Key: serde.String, Value: serde.Int64}.Open(c)
			for _, g := range keys {
				n, _, err := kv.Get(g)
				if err != nil || n != want[g] {
					t.Fatalf("group of %d bytes counts %d rows, %v; want %d", len(g), n, err, want[g])
				}
			}
		})
	}
}
