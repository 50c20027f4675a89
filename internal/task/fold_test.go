package task

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// foldTask counts keys of "in" to "out"; a second branch of the source
// panics on the value "bad", after the count has taken the record, so that
// the record's unit rolls back with its update held.
func foldTask(t *testing.T, fold bool, d *discard) *Task {
	t.Helper()
	top := topology.New()
	s := topology.From(top, "in", serde.String, serde.String)
	c := topology.Count(topology.GroupByKey(s), topology.Materialized("c", serde.String, serde.Int64))
	topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
	topology.To(topology.Filter(s, func(_, v string) bool {
		if v == "bad" {
			panic("bad record")
		}
		return false
	}), "never", serde.String, serde.String)
	return startTask(t, plan(t, top), 0, Config{AppID: "fold", Send: d.send, FoldUpdates: fold})
}

// outputs returns the key=value of every record sent to "out", and forgets
// what was sent.
func outputs(d *discard) []string {
	var got []string
	for _, r := range d.keep {
		if r.Topic == "out" {
			got = append(got, string(r.Key)+"="+string(r.Value))
		}
	}
	d.keep = d.keep[:0]
	return got
}

func TestFoldHoldsUpdatesUntilFlush(t *testing.T) {
	for _, fold := range []bool{true, false} {
		t.Run("fold="+strconv.FormatBool(fold), func(t *testing.T) {
			d := &discard{keep: []*kgo.Record{}}
			tk := foldTask(t, fold, d)
			off := int64(0)
			process := func(k, v string) error {
				off++
				return tk.Process(&kgo.Record{Topic: "in", Key: []byte(k), Value: []byte(v), Offset: off, Timestamp: time.UnixMilli(off)})
			}
			for _, kv := range [][2]string{{"a", "x"}, {"b", "x"}, {"a", "x"}, {"d", "bad"}, {"a", "x"}} {
				err := process(kv[0], kv[1])
				if (err != nil) != (kv[1] == "bad") {
					t.Fatalf("%v: error %v", kv, err)
				}
			}
			before := outputs(d)
			if err := tk.Flush(); err != nil {
				t.Fatal(err)
			}
			after := outputs(d)
			want := [2][]string{nil, {"a=3", "b=1"}} // the bad record's update is gone with its unit
			if !fold {
				want = [2][]string{{"a=1", "b=1", "a=2", "a=3"}, nil}
			}
			if !slices.Equal(before, want[0]) || !slices.Equal(after, want[1]) {
				t.Fatalf("outputs %v before the flush and %v at it, want %v and %v", before, after, want[0], want[1])
			}
			if err := tk.Commit(); err != nil {
				t.Fatal(err)
			}

			// An aborted period forwards nothing it held.
			if err := process("c", "x"); err != nil {
				t.Fatal(err)
			}
			tk.Abort()
			outputs(d)
			if err := process("a", "x"); err != nil {
				t.Fatal(err)
			}
			if err := tk.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := outputs(d); !slices.Equal(got, []string{"a=4"}) {
				t.Errorf("after an abort, the flush forwarded %v, want a=4 alone", got)
			}
		})
	}
}

// TestFoldTableSource folds a table read from a topic: a key added and
// deleted within one commit forwards nothing at the flush, a key updated
// twice forwards its last value; without folding every update goes.
func TestFoldTableSource(t *testing.T) {
	for _, fold := range []bool{true, false} {
		t.Run("fold="+strconv.FormatBool(fold), func(t *testing.T) {
			top := topology.New()
			tb := topology.TableFrom(top, "rows", topology.Materialized("rows", serde.String, serde.String))
			topology.To(topology.ToStream(tb), "out", serde.String, serde.String)
			d := &discard{keep: []*kgo.Record{}}
			tk := startTask(t, plan(t, top), 0, Config{AppID: "fold", Send: d.send, FoldUpdates: fold})
			for i, kv := range [][2]string{{"a", "1"}, {"b", "1"}, {"a", ""}, {"b", "2"}} {
				r := &kgo.Record{Topic: "rows", Key: []byte(kv[0]), Offset: int64(i), Timestamp: time.UnixMilli(int64(i))}
				if kv[1] != "" {
					r.Value = []byte(kv[1])
				}
				if err := tk.Process(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := tk.Flush(); err != nil {
				t.Fatal(err)
			}
			want := []string{"b=2"}
			if !fold {
				want = []string{"a=1", "b=1", "a=", "b=2"}
			}
			if got := outputs(d); !slices.Equal(got, want) {
				t.Errorf("outputs %v, want %v", got, want)
			}
		})
	}
}
