package topologytest_test

import (
	"fmt"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// sumByGroup sums a table of "group:amount" rows per group.
func sumByGroup(tp *topology.Topology) topology.Table[string, int64] {
	rows := topology.TableFrom(tp, "rows", topology.Materialized("rows", serde.String, serde.String))
	grouped := topology.GroupTableBy(rows, func(_ string, v string) (string, int64) {
		var g string
		var n int64
		fmt.Sscanf(v, "%s %d", &g, &n)
		return g, n
	}, topology.Grouped("rows-by-group", serde.String, serde.Int64))
	return topology.ReduceTable(grouped, func(a, b int64) int64 { return a + b }, func(a, b int64) int64 { return a - b },
		topology.Materialized("sums", serde.String, serde.Int64))
}

// TestGroupTableByUpdatesInPlace updates rows that stay in their group: the
// group's aggregate must change once per update, never showing the row
// missing (Kafka Streams' KIP-904); rows that move leave one group and
// join the other. Group names and row keys have every length.
func TestGroupTableByUpdatesInPlace(t *testing.T) {
	tp := topology.New()
	topology.To(topology.ToStream(sumByGroup(tp)), "sums", serde.String, serde.Int64)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "rows", serde.String, serde.String)
	out := topologytest.NewOutputTopic(d, "sums", serde.String, serde.Int64)
	keys := testkeys.All()
	// Group names hold no spaces (the row format splits on one).
	group := func(i int) string { return "g" + fmt.Sprint(i%7) }
	read := func() []topology.Record[string, int64] {
		t.Helper()
		rs, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	sums := map[string]int64{}
	for i, k := range keys {
		if err := in.Pipe(k, fmt.Sprintf("%s 100", group(i)), int64(i)); err != nil {
			t.Fatal(err)
		}
		sums[group(i)] += 100
		read()
	}
	for i, k := range keys {
		// In place: one update of the group, to its final sum.
		if err := in.Pipe(k, fmt.Sprintf("%s 150", group(i)), int64(i)); err != nil {
			t.Fatal(err)
		}
		sums[group(i)] += 50
		rs := read()
		if len(rs) != 1 || rs[0].Key != group(i) || rs[0].Value != sums[group(i)] {
			t.Fatalf("row of %d bytes updated within %s: %v, want one update to %d", len(k), group(i), rs, sums[group(i)])
		}
	}
	for i, k := range keys {
		// A move: the old group loses the row, the new one gains it.
		if err := in.Pipe(k, fmt.Sprintf("%s 150", group(i+1)), int64(i)); err != nil {
			t.Fatal(err)
		}
		sums[group(i)] -= 150
		sums[group(i+1)] += 150
		got := map[string]int64{}
		for _, r := range read() {
			got[r.Key] = r.Value
		}
		if len(got) != 2 || got[group(i)] != sums[group(i)] || got[group(i+1)] != sums[group(i+1)] {
			t.Fatalf("row of %d bytes moved from %s to %s: %v, want %d and %d", len(k), group(i), group(i+1), got, sums[group(i)], sums[group(i+1)])
		}
	}
}
