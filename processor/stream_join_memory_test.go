package processor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestInMemoryStreamJoinAcrossRestarts: a stream join whose stores are in
// memory (StreamJoined.Stores) keeps its window through a restart with its
// state directory deleted, from the changelogs alone. The left records
// come before the restart, the right ones after: every key, of every
// encoded length and UUIDs, joins once.
func TestInMemoryStreamJoinAcrossRestarts(t *testing.T) {
	keys := testkeys.All()
	addrs := testBrokers(t)
	ctx := context.Background()
	left, right, out := uniq(t, "jm-left"), uniq(t, "jm-right"), uniq(t, "jm-out")
	cl := setup(t, addrs, 2, left, right, out)
	appID, dir := uniq(t, "jm"), t.TempDir()
	build := func() *topology.Topology {
		tp := topology.New()
		l := topology.From(tp, left, serde.String, serde.String)
		r := topology.From(tp, right, serde.String, serde.String)
		j := topology.JoinStreams(l, r, topology.JoinWindows(time.Minute), func(_, a, b string) string { return a + "+" + b },
			topology.StreamJoined[string, string, string]{Name: "jm", Key: serde.String, Left: serde.String, Right: serde.String,
				Stores: []topology.StoreOption{topology.InMemory()}})
		topology.To(j, out, serde.String, serde.String)
		return tp
	}
	for _, phase := range []struct{ topic, value string }{{left, "l"}, {right, "r"}} {
		var recs []*kgo.Record
		for i, k := range keys {
			recs = append(recs, &kgo.Record{Topic: phase.topic, Key: []byte(k), Value: []byte(phase.value), Timestamp: time.UnixMilli(int64(1000 + i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		runThenWipe(t, build(), appID, addrs, dir, int64(len(keys)))
	}
	rs, err := readback.ReadCommitted(ctx, addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, r := range rs {
		got = append(got, string(r.Key)+"="+string(r.Value))
	}
	for _, k := range keys {
		want = append(want, k+"=l+r")
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%d joined, want %d: %q, want %q", len(got), len(want), got, want)
	}
}
