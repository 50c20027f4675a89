package topologytest_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// TestStreamTableJoinsEveryKeyLength joins a stream with a table holding a
// row for every other key of every length: each stream record must find
// its row, or none.
func TestStreamTableJoinsEveryKeyLength(t *testing.T) {
	keys := testkeys.All()
	for _, left := range []bool{false, true} {
		t.Run(fmt.Sprintf("left=%v", left), func(t *testing.T) {
			tp := topology.New()
			s := topology.From(tp, "s", serde.String, serde.String)
			tb := topology.TableFrom(tp, "t", topology.Materialized("t", serde.String, serde.String))
			var out topology.Stream[string, string]
			if left {
				out = topology.LeftJoinTable(s, tb, func(_ string, v, row string, ok bool) string {
					if !ok {
						row = "-"
					}
					return v + "+" + row
				})
			} else {
				out = topology.JoinTable(s, tb, func(_ string, v, row string) string { return v + "+" + row })
			}
			topology.To(out, "out", serde.String, serde.String)
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			sin := topologytest.NewInputTopic(d, "s", serde.String, serde.String)
			tin := topologytest.NewInputTopic(d, "t", serde.String, serde.String)
			o := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
			for i, k := range keys {
				if i%2 == 0 {
					if err := tin.Pipe(k, fmt.Sprintf("row%d", i), int64(i)); err != nil {
						t.Fatal(err)
					}
				}
			}
			want := map[string]string{}
			for i, k := range keys {
				if err := sin.Pipe(k, fmt.Sprintf("v%d", i), int64(i)); err != nil {
					t.Fatal(err)
				}
				switch {
				case i%2 == 0:
					want[k] = fmt.Sprintf("v%d+row%d", i, i)
				case left:
					want[k] = fmt.Sprintf("v%d+-", i)
				}
			}
			got, err := topologytest.ToMap(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if got[k] != want[k] {
					t.Errorf("key of %d bytes: %q, want %q", len(k), got[k], want[k])
				}
			}
		})
	}
}

// TestForeignKeyJoinsEveryKeyLength joins rows keyed by keys of every
// length with rows of another table whose keys, the foreign keys, have
// every length too; rows move between foreign keys and both sides change
// and are deleted. After every update the joined table must equal the
// oracle's. Over 8 partitions with reordered internal topics too: a left
// row's responses must reach its partition whatever its key, the empty
// key (which hashes like any other) included.
func TestForeignKeyJoinsEveryKeyLength(t *testing.T) {
	keys := testkeys.All()
	for _, c := range []struct {
		left  bool
		parts int
	}{{false, 1}, {true, 1}, {false, 8}, {true, 8}} {
		left := c.left
		t.Run(fmt.Sprintf("left=%v/partitions=%d", left, c.parts), func(t *testing.T) {
			tp := topology.New()
			rows := topology.TableFrom(tp, "rows", topology.Materialized("rows", serde.String, serde.String)) // value: a foreign key
			others := topology.TableFrom(tp, "others", topology.Materialized("others", serde.String, serde.String))
			fk := func(v string) string { return v }
			j := topology.ForeignKeyJoined[string]{Name: "fk", Result: serde.String}
			var joined topology.Table[string, string]
			if left {
				joined = topology.LeftJoinTablesByForeignKey(rows, others, fk, func(_, o string, ok bool) string {
					if !ok {
						o = "-"
					}
					return o
				}, j)
			} else {
				joined = topology.JoinTablesByForeignKey(rows, others, fk, func(_, o string) string { return o }, j)
			}
			topology.To(topology.ToStream(joined), "out", serde.String, serde.String)
			d, err := topologytest.New(tp, topologytest.Partitions(c.parts), topologytest.ShuffleInternal(uint64(c.parts)))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			rin := topologytest.NewInputTopic(d, "rows", serde.String, serde.String)
			oin := topologytest.NewInputTopic(d, "others", serde.String, serde.String)
			out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
			rowsT, othersT, view := map[string]string{}, map[string]string{}, map[string]string{}
			rng := rand.New(rand.NewPCG(41, 42))
			// Every key first gets a partner of another length, present.
			for i, k := range keys {
				f := keys[(i*37+11)%len(keys)]
				if err := oin.Pipe(f, fmt.Sprintf("o%d", i), int64(i)); err != nil {
					t.Fatal(err)
				}
				othersT[f] = fmt.Sprintf("o%d", i)
				if err := rin.Pipe(k, f, int64(i)); err != nil {
					t.Fatal(err)
				}
				rowsT[k] = f
			}
			check := func(i int) {
				t.Helper()
				if err := d.Commit(); err != nil {
					t.Fatal(err)
				}
				if err := topologytest.UpdateMap(out, view); err != nil {
					t.Fatal(err)
				}
				want := map[string]string{}
				for k, f := range rowsT {
					if o, ok := othersT[f]; ok {
						want[k] = o
					} else if left {
						want[k] = "-"
					}
				}
				if !maps.Equal(view, want) {
					for k, w := range want {
						if view[k] != w {
							t.Fatalf("after %d updates: row of %d bytes (foreign key of %d) joined %q, want %q", i, len(k), len(rowsT[k]), view[k], w)
						}
					}
					t.Fatalf("after %d updates: %d rows, want %d", i, len(view), len(want))
				}
			}
			check(0)
			for i := range 800 {
				k, f := keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]
				var err error
				switch rng.IntN(6) {
				case 0, 1:
					err = rin.Pipe(k, f, int64(i))
					rowsT[k] = f
				case 2, 3:
					err = oin.Pipe(f, fmt.Sprintf("n%d", i), int64(i))
					othersT[f] = fmt.Sprintf("n%d", i)
				case 4:
					err = rin.PipeBytes([]byte(k), nil, int64(i))
					delete(rowsT, k)
				default:
					err = oin.PipeBytes([]byte(f), nil, int64(i))
					delete(othersT, f)
				}
				if err != nil {
					t.Fatal(err)
				}
				check(i + 1)
			}
		})
	}
}

// TestAggregationsAndStoresEveryKeyLength counts records per key, per key
// and tumbling window, and per key through a table aggregation, for keys
// of every length, then reads every key back from the stores (Get, Range,
// window Fetch) and from the output topics.
func TestAggregationsAndStoresEveryKeyLength(t *testing.T) {
	keys := testkeys.All()
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	counts := topology.Materialized("counts", serde.String, serde.Int64)
	c := topology.Count(topology.GroupByKey(in), counts)
	topology.To(topology.ToStream(c), "counts", serde.String, serde.Int64)
	wm := topology.Materialized("wcounts", serde.String, serde.Int64)
	topology.CountWindows(topology.WindowedBy(topology.GroupByKey(in), window.Tumbling(100*time.Millisecond)), wm)
	tb := topology.TableFrom(tp, "tb", topology.Materialized("tb", serde.String, serde.String))
	// Rows grouped by their own value, itself a key of every length.
	tc := topology.CountTable(topology.GroupTableBy(tb, func(_, v string) (string, string) { return v, v },
		topology.Grouped("tb-by-value", serde.String, serde.String)), topology.Materialized("tcounts", serde.String, serde.Int64))
	topology.To(topology.ToStream(tc), "tcounts", serde.String, serde.Int64)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pin := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	tin := topologytest.NewInputTopic(d, "tb", serde.String, serde.String)
	want := map[string]int64{}
	inWindow := map[string]int64{} // in the last window, [200, 300): the earlier ones closed and are gone
	for round := range 3 {
		for i, k := range keys {
			for range i%3 + round%2 {
				if err := pin.Pipe(k, "x", int64(round*100+i%50)); err != nil {
					t.Fatal(err)
				}
				want[k]++
				if round == 2 {
					inWindow[k]++
				}
			}
		}
	}
	wantT := map[string]int64{}
	rows := map[string]string{}
	for i, k := range keys {
		v := keys[(i*13+5)%len(keys)]
		if err := tin.Pipe(k, v, 300); err != nil {
			t.Fatal(err)
		}
		rows[k] = v
	}
	for i, k := range keys {
		if i%4 == 0 { // move a quarter of the rows
			v := keys[(i*7+1)%len(keys)]
			if err := tin.Pipe(k, v, 301); err != nil {
				t.Fatal(err)
			}
			rows[k] = v
		}
	}
	for _, v := range rows {
		wantT[v]++
	}

	got, err := topologytest.ToMap(topologytest.NewOutputTopic(d, "counts", serde.String, serde.Int64))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("counts topic: %d keys, want %d", len(got), len(want))
	}
	gotT, err := topologytest.ToMap(topologytest.NewOutputTopic(d, "tcounts", serde.String, serde.Int64))
	if err != nil {
		t.Fatal(err)
	}
	maps.DeleteFunc(gotT, func(_ string, n int64) bool { return n == 0 })
	if !maps.Equal(gotT, wantT) {
		t.Errorf("table counts topic: %d groups, want %d", len(gotT), len(wantT))
	}

	kv, err := topologytest.KeyValueStore(d, counts)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := topologytest.WindowStore(d, wm)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		n, ok, err := kv.Get(k)
		if err != nil || ok != (want[k] > 0) || n != want[k] {
			t.Errorf("Get of a key of %d bytes: %d, %v, %v; want %d", len(k), n, ok, err, want[k])
		}
		var sum int64
		if err := ws.Fetch(k, func(_ window.Bounds, n int64) error { sum += n; return nil }); err != nil {
			t.Fatal(err)
		}
		if sum != inWindow[k] {
			t.Errorf("window Fetch of a key of %d bytes: %d in all windows, want %d", len(k), sum, inWindow[k])
		}
		// A range of the one key holds it alone, whatever its length.
		var seen []string
		if err := kv.Range(&k, nil, func(k2 string, _ int64) error {
			if len(seen) < 1 {
				seen = append(seen, k2)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if want[k] > 0 && (len(seen) != 1 || seen[0] != k) {
			t.Errorf("Range from a key of %d bytes starts at %q", len(k), seen)
		}
	}
	ranged := map[string]int64{}
	if err := kv.Range(nil, nil, func(k string, n int64) error { ranged[k] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(ranged, want) {
		t.Errorf("Range over the store: %d keys, want %d", len(ranged), len(want))
	}
}

// TestForeignKeyJoinByteKeysReachTheirPartition joins rows keyed by raw
// bytes of every length, the empty key included, over 8 and 16
// partitions, with the right rows written before the left rows (answered
// when they subscribe) and after them (answered when the right row
// changes). Every row must be joined: a response whose key lost its
// bytes (an empty key turned nil) goes to no key's partition and is lost.
func TestForeignKeyJoinByteKeysReachTheirPartition(t *testing.T) {
	keys := testkeys.Bytes()
	fks := testkeys.Lengths()[1:6]
	for _, parts := range []int{8, 16} {
		for _, rightFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("partitions=%d/right-first=%v", parts, rightFirst), func(t *testing.T) {
				tp := topology.New()
				rows := topology.TableFrom(tp, "rows", topology.Materialized("rows", serde.Bytes, serde.String))
				others := topology.TableFrom(tp, "others", topology.Materialized("others", serde.String, serde.String))
				joined := topology.JoinTablesByForeignKey(rows, others, func(v string) string { return v },
					func(v, o string) string { return v + "=" + o }, topology.ForeignKeyJoined[string]{Name: "fk", Result: serde.String})
				topology.To(topology.ToStream(joined), "out", serde.Bytes, serde.String)
				d, err := topologytest.New(tp, topologytest.Partitions(parts))
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				rin := topologytest.NewInputTopic(d, "rows", serde.Bytes, serde.String)
				oin := topologytest.NewInputTopic(d, "others", serde.String, serde.String)
				out := topologytest.NewOutputTopic(d, "out", serde.Bytes, serde.String)
				pipeOthers := func() {
					for i, f := range fks {
						if err := oin.Pipe(f, fmt.Sprintf("o%d", i), int64(i)); err != nil {
							t.Fatal(err)
						}
					}
				}
				if rightFirst {
					pipeOthers()
				}
				want := map[string]string{}
				for i, k := range keys {
					f := fks[i%len(fks)]
					if err := rin.Pipe(k, f, int64(i)); err != nil {
						t.Fatal(err)
					}
					want[string(k)] = fmt.Sprintf("%s=o%d", f, i%len(fks))
				}
				if !rightFirst {
					pipeOthers()
				}
				if err := d.Commit(); err != nil {
					t.Fatal(err)
				}
				recs, err := out.ReadRecords()
				if err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for _, r := range recs {
					got[string(r.Key)] = r.Value
				}
				for _, k := range keys {
					if got[string(k)] != want[string(k)] {
						t.Errorf("row of %d bytes: joined %q, want %q", len(k), got[string(k)], want[string(k)])
					}
				}
			})
		}
	}
}
