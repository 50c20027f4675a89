package topologytest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// twoInputRecord is a record of one of the two input topics of a task.
type twoInputRecord struct {
	topic string
	key   string
	ts    int64
}

// twoInputs makes records of orders and payments, each topic's own
// timestamps out of order by up to 60 ms against a watermark bound of
// 10 ms, so some records are late by their own topic's watermark; keys of
// every encoded length up to 131 bytes and a UUID.
func twoInputs(seed uint64) (orders, payments []twoInputRecord) {
	rng := rand.New(rand.NewPCG(seed, 7))
	keys := []string{"6f1c2a4e-8b3d-4c5f-9a7e-0d1b2c3d4e5f"}
	for n := 0; n <= 131; n += 13 {
		keys = append(keys, strings.Repeat("k", n))
	}
	for i := range 120 {
		k := keys[rng.IntN(len(keys))]
		orders = append(orders, twoInputRecord{"orders", k, 1000 + int64(i)*10 - rng.Int64N(60)})
		payments = append(payments, twoInputRecord{"payments", k, 1000 + int64(i)*10 + rng.Int64N(40) - rng.Int64N(60)})
	}
	return orders, payments
}

// interleave merges a and b in a random order that keeps each one's own.
func interleave(rng *rand.Rand, a, b []twoInputRecord) []twoInputRecord {
	out := make([]twoInputRecord, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || len(a) > 0 && rng.IntN(2) == 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// leftJoinOrdersPayments is enrich's shape: a left stream-stream join of
// two user topics read by one task.
func leftJoinOrdersPayments() *topology.Topology {
	tp := topology.New()
	bound := topology.Watermarks(window.BoundedOutOfOrderness(10 * time.Millisecond))
	orders := topology.From(tp, "orders", serde.String, serde.String, bound)
	payments := topology.From(tp, "payments", serde.String, serde.String, bound)
	joined := topology.LeftJoinStreams(orders, payments,
		topology.JoinWindowsBetween(0, 50*time.Millisecond).WithGrace(20*time.Millisecond),
		func(_ string, o string, p string, ok bool) string {
			if !ok {
				return o + "+unpaid"
			}
			return o + "+" + p
		},
		topology.StreamJoined[string, string, string]{Name: "op", Key: serde.String, Left: serde.String, Right: serde.String})
	topology.To(joined, "out", serde.String, serde.String)
	return tp
}

// runInterleaved pipes recs in their order and returns every output
// record as "key=value@ts", sorted: the join's results as a multiset.
func runInterleaved(t *testing.T, top *topology.Topology, recs []twoInputRecord) []string {
	t.Helper()
	d, err := topologytest.New(top)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := map[string]*topologytest.InputTopic[string, string]{
		"orders":   topologytest.NewInputTopic(d, "orders", serde.String, serde.String),
		"payments": topologytest.NewInputTopic(d, "payments", serde.String, serde.String),
	}
	out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
	for _, r := range recs {
		if err := in[r.topic].Pipe(r.key, fmt.Sprintf("%s@%d", r.topic[:1], r.ts), r.ts); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprintf("%s=%s@%d", r.Key, r.Value, r.Timestamp))
	}
	slices.Sort(got)
	return got
}

// TestTwoInputLatenessIndependentOfInterleaving: a task that reads two
// user topics (a stream-stream join, as in enrich) decides which records
// are late, and so what it joins, the same way however the two topics'
// records interleave, each topic in its own order: how far one topic was
// fetched must not change the fate of the other's records (invariant 5).
func TestTwoInputLatenessIndependentOfInterleaving(t *testing.T) {
	for seed := range uint64(4) {
		orders, payments := twoInputs(seed)
		rng := rand.New(rand.NewPCG(seed, 11))
		want := runInterleaved(t, leftJoinOrdersPayments(), append(slices.Clone(orders), payments...))
		for i := range 4 {
			recs := interleave(rng, orders, payments)
			if i == 0 {
				recs = append(slices.Clone(payments), orders...)
			}
			got := runInterleaved(t, leftJoinOrdersPayments(), recs)
			if d := diffSorted(want, got); d != "" {
				t.Fatalf("seed %d, interleaving %d: the join's results depend on how its inputs interleave:\n%s", seed, i, d)
			}
		}
	}
}

// diffSorted describes how two sorted lists differ, "" if they do not.
func diffSorted(want, got []string) string {
	var b strings.Builder
	i, j := 0, 0
	for (i < len(want) || j < len(got)) && b.Len() < 2000 {
		switch {
		case j >= len(got) || i < len(want) && want[i] < got[j]:
			fmt.Fprintf(&b, "  missing %s\n", want[i])
			i++
		case i >= len(want) || got[j] < want[i]:
			fmt.Fprintf(&b, "  extra   %s\n", got[j])
			j++
		default:
			i++
			j++
		}
	}
	return b.String()
}
