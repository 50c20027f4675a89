package topologytest_test

import (
	"testing"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// TestFoldedTableJoinKeepsDelete: with fold.updates, both sides of a
// table–table join deleting a key within one commit must still delete the
// joined row. Found by the metamorphic checker (SLUICE_SOAK=1,
// table-table-join, seed 14): each side's held update is forwarded at the
// flush against the other side's store as it is by then, which already
// lacks the key, so the join saw neither an old nor a new row and
// forwarded nothing. Each side now joins with the other's value as last
// forwarded (store.Staged.Forwarded), which still has the key.
func TestFoldedTableJoinKeepsDelete(t *testing.T) {
	for _, fold := range []bool{false, true} {
		tp := topology.New()
		l := topology.TableFrom(tp, "left", topology.Materialized("left", serde.String, serde.String))
		r := topology.TableFrom(tp, "right", topology.Materialized("right", serde.String, serde.String))
		topology.To(topology.ToStream(topology.JoinTables(l, r, func(_ string, a, b string) string { return a + "|" + b })), "out", serde.String, serde.String)
		opts := []topologytest.Option{topologytest.CommitEvery(0)}
		if fold {
			opts = append(opts, topologytest.FoldUpdates())
		}
		d, err := topologytest.New(tp, opts...)
		if err != nil {
			t.Fatal(err)
		}
		left := topologytest.NewInputTopic(d, "left", serde.String, serde.String)
		right := topologytest.NewInputTopic(d, "right", serde.String, serde.String)
		out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(left.Pipe("k", "l1", 1))
		must(right.Pipe("k", "r1", 2))
		must(d.Commit())
		must(right.PipeBytes([]byte("k"), nil, 3))
		must(left.PipeBytes([]byte("k"), nil, 4))
		must(d.Commit())
		m, err := topologytest.ToMap(out)
		must(err)
		if v, ok := m["k"]; ok {
			t.Errorf("fold=%t: joined row k=%q survives the delete of both sides", fold, v)
		}
		d.Close()
	}
}
