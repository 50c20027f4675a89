package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples/nexmark"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
)

// TestGenNexmarkThenRunQuery: `sluice gen nexmark` writes exactly the
// seed's events (each in its topic, keyed by its id or its auction's, bids
// in the partition of their auction), creating the topics; then `sluice run
// nexmark-q7 --bounded` over them writes what the oracle computes.
// Negative control: the records of another seed differ.
func TestGenNexmarkThenRunQuery(t *testing.T) {
	addrs := testbroker.Addrs(t)
	b := strings.Join(addrs, ",")
	p := testbroker.Unique(t, "gnx-") + "-"
	ctx := testCtx(t)
	topics := nexmark.Topics{Person: p + "person", Auction: p + "auction", Bid: p + "bid"}
	const events = "6000"
	out, err := runSluice(ctx, "gen", "nexmark", "--events", events, "--seed", "5", "--rate", "200", "--partitions", "2",
		"--person-topic", topics.Person, "--auction-topic", topics.Auction, "--bid-topic", topics.Bid, "--brokers", b)
	if err != nil {
		t.Fatalf("gen nexmark: %v\n%s", err, out)
	}
	if !strings.Contains(out, "gen: done: 6000 events (persons 120, auctions 360, bids 5520)") {
		t.Errorf("no summary in:\n%s", out)
	}
	want, err := nexmark.Generate(nexmark.Config{Seed: 5, Rate: 200, Events: 6000})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := nexmark.Generate(nexmark.Config{Seed: 6, Rate: 200, Events: 6000})
	got := map[string][]*kgo.Record{}
	for _, topic := range []string{topics.Person, topics.Auction, topics.Bid} {
		rs, err := readback.ReadCommitted(ctx, addrs, topic)
		if err != nil {
			t.Fatal(err)
		}
		got[topic] = rs
	}
	// Per topic and partition, in the seed's order.
	check := func(evs []nexmark.Event) int {
		wantBy := map[string]map[int32][]nexmark.Event{}
		partOf := map[string]int32{} // key → partition, per topic
		for _, rs := range got {
			for _, r := range rs {
				partOf[r.Topic+"/"+string(r.Key)] = r.Partition
			}
		}
		for _, e := range evs {
			topic := e.Topic(topics)
			if wantBy[topic] == nil {
				wantBy[topic] = map[int32][]nexmark.Event{}
			}
			part := partOf[topic+"/"+string(e.Key())]
			wantBy[topic][part] = append(wantBy[topic][part], e)
		}
		bad := 0
		for topic, rs := range got {
			seen := map[int32]int{}
			for _, r := range rs {
				i := seen[r.Partition]
				seen[r.Partition]++
				ws := wantBy[topic][r.Partition]
				if i >= len(ws) || !bytes.Equal(ws[i].Value(), r.Value) || !bytes.Equal(ws[i].Key(), r.Key) {
					bad++
				}
			}
			for part, ws := range wantBy[topic] {
				if seen[part] != len(ws) {
					bad++
				}
			}
		}
		return bad
	}
	if bad := check(want); bad != 0 {
		t.Fatalf("%d records differ from the seed's events", bad)
	}
	if bad := check(other); bad == 0 {
		t.Fatal("negative control: another seed's events matched")
	}
	// Bids share the partition of their auction.
	auctionPart := map[string]int32{}
	for _, r := range got[topics.Auction] {
		auctionPart[string(r.Key)] = r.Partition
	}
	for _, r := range got[topics.Bid] {
		if part, ok := auctionPart[string(r.Key)]; ok && part != r.Partition {
			t.Fatalf("bid for auction %s in partition %d, its auction in %d", r.Key, r.Partition, part)
		}
	}
	td, err := kadm.NewClient(mustClient(t, addrs)).ListTopics(ctx, topics.Bid)
	if err != nil || len(td[topics.Bid].Partitions) != 2 {
		t.Fatalf("bid topic: %v partitions, %v", len(td[topics.Bid].Partitions), err)
	}

	out, err = runSluice(ctx, "run", "nexmark-q7", "--brokers", b, "--app-id", p+"q7", "--state-dir", t.TempDir(), "--log-level", "warn",
		"--person", topics.Person, "--auction", topics.Auction, "--bid", topics.Bid, "--output", p+"q7-out",
		"--create-topics", "--partitions", "2", "--bounded")
	if err != nil {
		t.Fatalf("run nexmark-q7 --bounded: %v\n%s", err, out)
	}
	exp, err := nexmark.Oracle("q7", want)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := readback.ReadCommitted(ctx, addrs, p+"q7-out")
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]nexmark.Record, len(rs))
	for i, r := range rs {
		recs[i] = nexmark.Record{Key: string(r.Key), Value: r.Value}
	}
	if err := nexmark.Check(exp, recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) < 3 {
		t.Fatalf("%d q7 results: the input crosses too few windows", len(recs))
	}
}

// TestGenNexmarkRefusesUnequalPartitions: topics that exist with different
// partition counts would break the bid-auction co-partitioning.
func TestGenNexmarkRefusesUnequalPartitions(t *testing.T) {
	addrs := testbroker.Addrs(t)
	p := testbroker.Unique(t, "gnx-") + "-"
	ctx := testCtx(t)
	if err := broker.CreateTopic(ctx, addrs, p+"bid", 4, nil); err != nil {
		t.Fatal(err)
	}
	out, err := runSluice(ctx, "gen", "nexmark", "--events", "10", "--partitions", "2",
		"--person-topic", p+"person", "--auction-topic", p+"auction", "--bid-topic", p+"bid", "--brokers", strings.Join(addrs, ","))
	if err == nil || !strings.Contains(err.Error(), "partition counts differ") {
		t.Fatalf("gen with unequal partitions: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--events", "0"}, {"--events", "5", "--rate", "0"}, {"--events", "5", "--partitions", "0"}} {
		if _, err := runSluice(context.Background(), append([]string{"gen", "nexmark", "--brokers", "127.0.0.1:1"}, args...)...); err == nil {
			t.Errorf("gen nexmark %v: no error", args)
		}
	}
}

func mustClient(t *testing.T, addrs []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
