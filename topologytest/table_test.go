package topologytest_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// TestTableAggregationRetracts counts users per region from a table of
// users whose region changes and who get deleted: every change retracts the
// user from the old region, so the counts always equal a direct count of
// the current table (the oracle), after every record.
func TestTableAggregationRetracts(t *testing.T) {
	tp := topology.New()
	users := topology.TableFrom(tp, "users", topology.Materialized("users", serde.String, serde.String))
	active := topology.FilterTable(users, func(_, region string) bool { return region != "nowhere" })
	byRegion := topology.GroupTableBy(active, func(user, region string) (string, string) { return region, user },
		topology.Grouped("users-by-region", serde.String, serde.String))
	topology.To(topology.ToStream(topology.CountTable(byRegion, topology.Materialized("region-counts", serde.String, serde.Int64))),
		"region-counts", serde.String, serde.Int64)
	topology.To(topology.ToStream(topology.MapTableValues(users, func(_, r string) int64 { return int64(len(r)) })),
		"region-lengths", serde.String, serde.Int64)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "users", serde.String, serde.String)
	out := topologytest.NewOutputTopic(d, "region-counts", serde.String, serde.Int64)
	lengths := topologytest.NewOutputTopic(d, "region-lengths", serde.String, serde.Int64)
	rng := rand.New(rand.NewPCG(3, 4))
	regions := []string{"north", "south", "east", "west", "nowhere"}
	current := map[string]string{} // the oracle's table
	counts := map[string]int64{}   // what the output topic says
	moves := 0
	for i := range 3000 {
		user := fmt.Sprintf("u%d", rng.IntN(60))
		if rng.IntN(5) == 0 {
			if err := in.PipeBytes([]byte(user), nil, int64(i)); err != nil { // delete
				t.Fatal(err)
			}
			delete(current, user)
		} else {
			region := regions[rng.IntN(len(regions))]
			if old, ok := current[user]; ok && old != region {
				moves++
			}
			if err := in.Pipe(user, region, int64(i)); err != nil {
				t.Fatal(err)
			}
			current[user] = region
		}
		if err := topologytest.UpdateMap(out, counts); err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{}
		for r := range counts {
			want[r] = 0
		}
		for _, r := range current {
			if r != "nowhere" {
				want[r]++
			}
		}
		if !maps.Equal(counts, want) {
			t.Fatalf("after record %d: counts %v, want %v", i, counts, want)
		}
	}
	if moves < 100 {
		t.Fatalf("only %d moves between regions: the input does not exercise retraction", moves)
	}
	// The mapped table's stream: its final state is the table's, deletes
	// included.
	m, err := topologytest.ToMap(lengths)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for u, r := range current {
		want[u] = int64(len(r))
	}
	if !maps.Equal(m, want) {
		t.Errorf("mapped table %v, want %v", m, want)
	}
}
