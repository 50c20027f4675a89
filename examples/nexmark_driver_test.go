package examples_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/examples/nexmark"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topologytest"
)

// nexmarkWindowed are the queries whose results wait for the watermark.
var nexmarkWindowed = map[string]bool{"q5": true, "q7": true, "q8": true, "q11": true}

// TestNexmarkDriverAdversarial runs every query in the broker-free driver
// the hard ways a deployment may: three partitions per sub-topology, the
// three input topics interleaved at random (each in its own order, so a
// bid often comes before its auction and an auction before its seller),
// internal topics delivered in a random legal order with commits every 7
// records (even seeds), or transactions aborted at random and replayed
// (odd seeds). The output must still be the oracle's.
// Windowed queries get a sentinel record an hour later on every input
// partition, so every window of the real events closes (the sentinels'
// own windows never do).
func TestNexmarkDriverAdversarial(t *testing.T) {
	evs, err := nexmark.Generate(nexmark.Config{Seed: 11, Rate: 100, Events: 3000})
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range nexmark.Queries {
		for seed := range uint64(2) {
			if raceEnabled && seed != uint64(i%2) {
				continue // one of the two ways per query: the race detector is slow
			}
			t.Run(fmt.Sprintf("%s/%d", q, seed), func(t *testing.T) {
				want, err := nexmark.Oracle(q, evs)
				if err != nil {
					t.Fatal(err)
				}
				if len(want.Records) == 0 {
					t.Fatal("the oracle expects no output: the input does not exercise the query")
				}
				got := runNexmarkDriver(t, q, evs, seed)
				if err := nexmark.Check(want, got); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// interleave merges the events' three topics at random, keeping each
// topic's order.
func interleave(evs []nexmark.Event, rng *rand.Rand) []nexmark.Event {
	var byKind [3][]nexmark.Event
	for _, e := range evs {
		byKind[e.Kind()] = append(byKind[e.Kind()], e)
	}
	out := make([]nexmark.Event, 0, len(evs))
	for len(out) < len(evs) {
		k := rng.IntN(3)
		if len(byKind[k]) == 0 {
			continue
		}
		// Runs of up to 200, so one topic gets well ahead of another.
		n := min(1+rng.IntN(200), len(byKind[k]))
		out = append(out, byKind[k][:n]...)
		byKind[k] = byKind[k][n:]
	}
	return out
}

func runNexmarkDriver(t *testing.T, q string, evs []nexmark.Event, seed uint64) []nexmark.Record {
	t.Helper()
	tp := examples.NexmarkTopics{Topics: nexmark.DefaultTopics, Output: "out"}
	tpl, ok := examples.NexmarkQuery(q, tp)
	if !ok {
		t.Fatalf("no query %s", q)
	}
	// AbortTransactions chooses the transactions itself, so it goes
	// without ShuffleInternal and CommitEvery: even seeds shuffle the
	// internal topics and commit every 7 records, odd ones abort.
	opts := []topologytest.Option{topologytest.Partitions(3), topologytest.ShuffleInternal(seed), topologytest.CommitEvery(7)}
	if seed%2 == 1 {
		opts = []topologytest.Option{topologytest.Partitions(3), topologytest.AbortTransactions(seed)}
	}
	d, err := topologytest.New(tpl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ins := map[string]*topologytest.InputTopic[[]byte, []byte]{}
	in := func(topic string) *topologytest.InputTopic[[]byte, []byte] {
		if ins[topic] == nil {
			ins[topic] = topologytest.NewInputTopic(d, topic, serde.Bytes, serde.Bytes)
		}
		return ins[topic]
	}
	reads := map[string]bool{}
	for _, nq := range []string{"person", "auction", "bid"} {
		e, _ := examples.Get("nexmark-" + q)
		for _, i := range e.Inputs {
			reads[i] = reads[i] || i == nq
		}
	}
	topicOf := map[nexmark.Kind]string{nexmark.KindPerson: "person", nexmark.KindAuction: "auction", nexmark.KindBid: "bid"}
	rng := rand.New(rand.NewPCG(seed, 77))
	var last int64
	for _, e := range interleave(evs, rng) {
		if !reads[topicOf[e.Kind()]] {
			continue
		}
		if err := in(e.Topic(tp.Topics)).PipeBytes(e.Key(), e.Value(), e.DateTime()); err != nil {
			t.Fatal(err)
		}
		last = max(last, e.DateTime())
	}
	if nexmarkWindowed[q] {
		end := last + 3_600_000
		sentinels := []nexmark.Event{
			{Person: &nexmark.Person{ID: 1, Name: "sentinel", DateTime: end}},
			{Auction: &nexmark.Auction{ID: 1, Seller: 1, DateTime: end, Expires: end}},
			{Bid: &nexmark.Bid{Auction: 1, Bidder: 1, DateTime: end}},
		}
		for _, s := range sentinels {
			if !reads[topicOf[s.Kind()]] {
				continue
			}
			// Enough keys that every partition of the topic gets one.
			for i := range 32 {
				if err := in(s.Topic(tp.Topics)).PipeBytes([]byte(fmt.Sprintf("sentinel-%d", i)), s.Value(), end); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// The last records since a commit, and internal records held back,
	// are delivered by a commit.
	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	out := topologytest.NewOutputTopic(d, "out", serde.String, serde.Bytes)
	rs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	got := make([]nexmark.Record, 0, len(rs))
	for _, r := range rs {
		rec := nexmark.Record{Key: r.Key}
		if !r.Tombstone {
			rec.Value = slices.Clone(r.Value)
			if !json.Valid(rec.Value) {
				t.Fatalf("output %q is not JSON: %q", r.Key, r.Value)
			}
		}
		got = append(got, rec)
	}
	return got
}

// TestNexmarkQ7WindowEndIsInclusive: q7's SQL takes the bids of a window
// with BETWEEN, both ends included, so a bid made exactly at a window's
// end is a highest bid of that window when it matches the window's
// maximum (which it does not count for). The generator rarely makes that
// case, so it is made here.
func TestNexmarkQ7WindowEndIsInclusive(t *testing.T) {
	base := int64(nexmark.DefaultBaseTime) // a multiple of 10 s
	bid := func(auction, price, ts int64) nexmark.Event {
		return nexmark.Event{Bid: &nexmark.Bid{Auction: auction, Bidder: 1, Price: price, DateTime: base + ts}}
	}
	evs := []nexmark.Event{
		bid(1000, 50, 3_000),  // the highest of [0 s, 10 s)
		bid(1001, 20, 9_999),  //
		bid(1002, 50, 10_000), // at the end of [0 s, 10 s) and its highest price; counts for [10 s, 20 s)
		bid(1003, 90, 15_000), // the highest of [10 s, 20 s)
		bid(1004, 90, 20_000), // at the end of [10 s, 20 s), tied with its highest; the only bid of [20 s, 30 s)
	}
	want, err := nexmark.Oracle("q7", evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Records) != 5 {
		t.Fatalf("the oracle has %d results, want 5 (1000, 1002 | 1003, 1004 | 1004)", len(want.Records))
	}
	for seed := range uint64(2) {
		if err := nexmark.Check(want, runNexmarkDriver(t, "q7", evs, seed)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNexmarkJoinRefusesMisKeyedRecords: q20's join is local because bids
// are keyed by their auction; a bid keyed otherwise stops the job with
// ErrNexmarkKey rather than waiting for ever in the wrong task. Keys that
// are not UTF-8 text fail to decode before that and go to the dead-letter
// topic (the default for decoding errors), none lost.
func TestNexmarkJoinRefusesMisKeyedRecords(t *testing.T) {
	d, err := topologytest.New(examples.NexmarkQ20(examples.NexmarkTopics{Topics: nexmark.DefaultTopics, Output: "out"}),
		topologytest.DeadLetterTopic("dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	bids := topologytest.NewInputTopic(d, nexmark.BidTopic, serde.Bytes, serde.Bytes)
	b := nexmark.Event{Bid: &nexmark.Bid{Auction: 1001, Bidder: 1000, Price: 5, DateTime: nexmark.DefaultBaseTime}}
	if err := bids.PipeBytes(b.Key(), b.Value(), b.DateTime()); err != nil {
		t.Fatalf("a bid keyed by its auction: %v", err)
	}
	keys := append([][]byte{nil, {}, []byte("1001 "), []byte("01001"), []byte("1000"), []byte("+1001")}, testkeys.Bytes()...)
	notText := 0
	for _, key := range keys {
		err := bids.PipeBytes(key, b.Value(), b.DateTime())
		if !utf8.Valid(key) {
			notText++
			if err != nil {
				t.Errorf("a bid keyed %q (not UTF-8): %v, want it dead-lettered", key, err)
			}
			continue
		}
		if !errors.Is(err, examples.ErrNexmarkKey) {
			t.Errorf("a bid for auction 1001 keyed %q: %v, want ErrNexmarkKey", key, err)
		}
	}
	dead, err := topologytest.NewOutputTopic(d, "dlq", serde.Bytes, serde.Bytes).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	if notText == 0 || len(dead) != notText {
		t.Fatalf("%d dead letters, want the %d bids keyed by non-UTF-8 bytes", len(dead), notText)
	}
}
