package topologytest_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// TestCommitEveryFoldsUpdates counts keys with the transaction open for
// three records: folded, one update per key comes out at the commit;
// unfolded, every update comes out as it happens.
func TestCommitEveryFoldsUpdates(t *testing.T) {
	for _, fold := range []bool{true, false} {
		t.Run(fmt.Sprintf("fold=%v", fold), func(t *testing.T) {
			tp := topology.New()
			s := topology.From(tp, "in", serde.String, serde.String)
			c := topology.Count(topology.GroupByKey(s), topology.Materialized("c", serde.String, serde.Int64))
			topology.To(topology.ToStream(c), "out", serde.String, serde.Int64)
			opts := []topologytest.Option{topologytest.CommitEvery(3)}
			if fold {
				opts = append(opts, topologytest.FoldUpdates())
			}
			d, err := topologytest.New(tp, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			in := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
			out := topologytest.NewOutputTopic(d, "out", serde.String, serde.Int64)
			read := func() string {
				rs, err := out.ReadRecords()
				if err != nil {
					t.Fatal(err)
				}
				var s string
				for _, r := range rs {
					s += fmt.Sprintf("%s=%d ", r.Key, r.Value)
				}
				return s
			}
			for _, k := range []string{"a", "a"} {
				if err := in.Pipe(k, "x", 1); err != nil {
					t.Fatal(err)
				}
			}
			want := map[bool][2]string{true: {"", "a=3 b=1 "}, false: {"a=1 a=2 ", "a=3 b=1 "}}[fold]
			if got := read(); got != want[0] {
				t.Fatalf("before the commit: %q, want %q", got, want[0])
			}
			if err := in.Pipe("a", "x", 1); err != nil { // the third: commits
				t.Fatal(err)
			}
			if err := in.Pipe("b", "x", 1); err != nil {
				t.Fatal(err)
			}
			if err := d.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := read(); got != want[1] {
				t.Fatalf("after the commits: %q, want %q", got, want[1])
			}
		})
	}
}

// TestCommitEveryAbortDropsTheTransaction: a step that fails aborts the
// whole open transaction, so what its earlier steps output goes with it,
// as a read_committed reader never sees an aborted transaction's records;
// what committed before stays.
func TestCommitEveryAbortDropsTheTransaction(t *testing.T) {
	tp, st := errorTopology()
	d, err := topologytest.New(tp, topologytest.CommitEvery(3))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64Text)
	out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
	for i := range 3 { // one committed transaction
		if err := in.Pipe("k", int64(i+1), 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := in.Pipe("k", 4, 2); err != nil {
		t.Fatal(err)
	}
	if err := in.Pipe("k", 13, 3); err == nil { // fails: the transaction aborts
		t.Fatal("Pipe of 13 returned no error under the default policy")
	}
	rs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Value)
	}
	if want := []string{"1", "2", "3"}; !slices.Equal(got, want) {
		t.Errorf("outputs %v, want %v: the aborted transaction's output of 4 must be gone", got, want)
	}
	kv, _ := topologytest.KeyValueStore(d, st)
	if n, _, _ := kv.Get("k"); n != 3 {
		t.Errorf("store count %d, want 3 (the committed records only)", n)
	}
}
