package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/txn"
)

func TestClosedWindows(t *testing.T) {
	rec := func(p int32, off int64, key string, ts int64) *kgo.Record {
		return &kgo.Record{Key: []byte(key), Partition: p, Offset: off, Timestamp: time.UnixMilli(ts)}
	}
	recs := []*kgo.Record{
		// Partition 0 in offset order (given out of order): wm ends at
		// 130_000-5_001, which closes [0,60000) and [60000,120000).
		rec(0, 1, "a", 59_999),
		rec(0, 0, "a", 10_000),
		rec(0, 2, "b", 70_000), // wm 64_999: [0,60000) closes
		rec(0, 3, "a", 1_000),  // late
		rec(0, 4, "a", 66_000),
		rec(0, 5, "a", 130_000),
		// Partition 1 has a watermark of its own: 64_000-5_001 = 58_999
		// closes nothing, where partition 0's would close [0,60000).
		rec(1, 0, "c", 5_000),
		rec(1, 1, "c", 64_000),
	}
	got, late, err := closedWindows(recs, time.Minute, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[windowKey]int64{{"a", 0}: 2, {"a", 60_000}: 1, {"b", 60_000}: 1}
	if late != 1 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("closed %v, %d late; want %v, 1 late", got, late, want)
	}
	if _, _, err := closedWindows([]*kgo.Record{rec(0, -1, "a", 0)}, time.Minute, time.Second); err == nil {
		t.Error("a record without an offset was accepted")
	}
}

func TestTimedKeyedKeepsCountInput(t *testing.T) {
	a, _ := keyed(1000, rand.New(rand.NewPCG(1, 2)))
	b, _ := timedKeyed(1000, rand.New(rand.NewPCG(1, 2)))
	for i := range a {
		if string(a[i].Key) != string(b[i].Key) || string(a[i].Value) != string(b[i].Value) || !a[i].Timestamp.IsZero() {
			t.Fatalf("record %d: count's %q=%q at %v, windowed's %q=%q", i, a[i].Key, a[i].Value, a[i].Timestamp, b[i].Key, b[i].Value)
		}
	}
}

// TestWindowedScenario runs the scenario small, and checks that its
// verification would catch an output that does not match the input.
func TestWindowedScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job on an embedded broker")
	}
	sc, _ := scenarioNamed("windowed")
	verify := sc.verify
	sc.verify = func(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error) {
		note, err := verify(ctx, addrs, g, input)
		if err != nil {
			return note, err
		}
		// The same output against inputs it does not come from.
		tampered := func(name string, change func(*kgo.Record)) {
			recs := make([]*kgo.Record, len(input))
			for i, r := range input {
				c := *r
				recs[i] = &c
			}
			change(recs[len(recs)/3])
			if _, err := verify(ctx, addrs, g, recs); err == nil {
				t.Errorf("%s: verified", name)
			}
		}
		tampered("a record moved to another key", func(r *kgo.Record) { r.Key = []byte("elsewhere") })
		tampered("a record moved to the next window", func(r *kgo.Record) { r.Timestamp = r.Timestamp.Add(time.Minute) })
		return note, nil
	}
	// A bound, not a timing check: under the race detector on a loaded
	// 2-core machine the two runs took more than 2 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cfg := Config{Records: 130_000, Partitions: 4, CommitInterval: 50 * time.Millisecond}
	for _, g := range []txn.Guarantee{txn.ExactlyOnce, txn.AtLeastOnce} {
		res, err := runOne(ctx, cfg, sc, g)
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		t.Logf("%s: %.0f records/s; %s", g, res.PerSecond, res.Note)
	}
}
