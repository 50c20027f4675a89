package processor_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// TestMetamorphicStreamThreads runs a windowed count behind a repartition
// topic (three partitions, so three writers per reader) through real
// instances with 1, 2 and 3 stream threads, a commit interval of 5 ms or
// the default, with and without fold.updates: the final windows must be
// the ones the test driver computes with three partitions. Threads and
// commits change only how the writers' records interleave in the
// repartition topic, which must not change what is late or what a window
// counts (invariant 5). topologytest's metamorphic tests vary the rest.
func TestMetamorphicStreamThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three instances")
	}
	addrs := testBrokers(t)
	ctx := context.Background()
	build := func(in, out string, emitted *atomic.Int64) *topology.Topology {
		tp := topology.New()
		s := topology.From(tp, in, serde.String, serde.String, topology.Watermarks(window.BoundedOutOfOrderness(10*time.Millisecond)))
		ws := topology.WindowedBy(topology.GroupBy(s, func(_, v string) string { return v }, topology.Grouped("by-group", serde.String, serde.String)),
			window.Tumbling(50*time.Millisecond), topology.AllowedLateness(15*time.Millisecond), topology.EmitFinal())
		counts := topology.MapValues(topology.ToStream(topology.CountWindows(ws, topology.Materialized("counts", serde.String, serde.Int64))),
			func(n int64) int64 { emitted.Add(1); return n })
		topology.To(counts, out, topology.WindowedSerde(serde.String), serde.Int64Text)
		return tp
	}
	// Keys of many lengths spread over the partitions; groups as values;
	// timestamps out of order beyond the 10 ms bound, so some records are
	// late; and a last record far ahead per key, so that every partition's
	// watermark closes every window.
	rng := rand.New(rand.NewPCG(4, 4))
	var keys []string
	for n := range 40 {
		keys = append(keys, fmt.Sprintf("%0*d", n+1, n))
	}
	type rec struct {
		key, value string
		ts         int64
	}
	var recs []rec
	for i := range 400 {
		recs = append(recs, rec{keys[rng.IntN(len(keys))], fmt.Sprintf("g%d", rng.IntN(5)), 1000 + int64(i)*3 - rng.Int64N(40)})
	}
	for _, k := range keys {
		recs = append(recs, rec{k, "end", 100_000})
	}

	// The driver's answer, with as many partitions as the topics have.
	driver := func(partitions int) map[string]string {
		var none atomic.Int64
		d, err := topologytest.New(build("in", "out", &none), topologytest.Partitions(partitions))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
		for _, r := range recs {
			if err := pipe.Pipe(r.key, r.value, r.ts); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		rs, err := topologytest.NewOutputTopic(d, "out", serde.Bytes, serde.String).ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range rs {
			m[string(r.Key)] = r.Value
		}
		return m
	}
	wantMap := driver(3)
	if len(wantMap) < 50 {
		t.Fatalf("weak input: %d windows", len(wantMap))
	}
	// Negative control: watermarks are per input partition, so one
	// partition decides differently; the comparison must see it.
	if maps.Equal(driver(1), wantMap) {
		t.Fatal("one partition gave the same windows as three: the comparison below could not tell runs apart")
	}

	for _, v := range []struct {
		threads int
		commit  time.Duration
		fold    bool
	}{{1, 0, false}, {3, 5 * time.Millisecond, false}, {2, 5 * time.Millisecond, true}} {
		t.Run(fmt.Sprintf("threads=%d,commit=%v,fold=%t", v.threads, v.commit, v.fold), func(t *testing.T) {
			in, out := uniq(t, "meta-in"), uniq(t, "meta-out")
			cl := setup(t, addrs, 3, in, out)
			for _, r := range recs {
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(r.key), Value: []byte(r.value), Timestamp: time.UnixMilli(r.ts)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			var emitted atomic.Int64
			opts := []processor.Opt{processor.ApplicationID(uniq(t, "meta")), processor.Brokers(addrs...), processor.StateDir(t.TempDir()),
				processor.StreamThreads(v.threads), processor.FoldUpdates(v.fold)}
			if v.commit > 0 {
				opts = append(opts, processor.CommitInterval(v.commit))
			}
			app, err := processor.New(build(in, out, &emitted), opts...)
			if err != nil {
				t.Fatal(err)
			}
			// Emitted counts results as they are made (an aborted
			// transaction's again), so it reaches the driver's count
			// no later than the results are all out.
			if err := runUntil(app, func(*processor.App) bool { return emitted.Load() >= int64(len(wantMap)) }); err != nil {
				t.Fatal(err)
			}
			rs, err := readback.ReadCommitted(ctx, addrs, out)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range rs {
				got[string(r.Key)] = string(r.Value)
			}
			if !maps.Equal(got, wantMap) {
				var diff []string
				for k, w := range wantMap {
					if got[k] != w {
						diff = append(diff, fmt.Sprintf("%q: got %q, want %q", k, got[k], w))
					}
				}
				for k, g := range got {
					if _, ok := wantMap[k]; !ok {
						diff = append(diff, fmt.Sprintf("%q: got %q, want none", k, g))
					}
				}
				slices.Sort(diff)
				t.Errorf("%d windows, want %d; first differences: %v", len(got), len(wantMap), diff[:min(len(diff), 10)])
			}
		})
	}
}
