package processor_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestCountWindowsAcrossRestarts sums tumbling and sliding count windows
// per key while the instance is stopped and its local state deleted
// between records: a window's records and counts come back from the
// changelog, and each window fires once, with every record in it.
func TestCountWindowsAcrossRestarts(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, tumblingOut, slidingOut := uniq(t, "cw-in"), uniq(t, "cw-tumbling"), uniq(t, "cw-sliding")
	cl := setup(t, addrs, 2, in, tumblingOut, slidingOut)
	appID, dir := uniq(t, "cw"), t.TempDir()
	build := func() *topology.Topology {
		tp := topology.New()
		s := topology.From(tp, in, serde.String, serde.Int64)
		sum := func(a, b int64) int64 { return a + b }
		for _, c := range []struct {
			name, out string
			w         window.Count
		}{{"tumbling", tumblingOut, window.TumblingCount(3)}, {"sliding", slidingOut, window.SlidingCount(3, 2)}} {
			tb := topology.ReduceWindows(topology.WindowedBy(topology.GroupByKey(s), c.w), sum,
				topology.Materialized(c.name, serde.String, serde.Int64))
			topology.To(topology.Map(topology.ToStream(tb), func(w topology.Windowed[string], n int64) (string, string) {
				return w.Key, fmt.Sprint(n)
			}), c.out, serde.String, serde.String)
		}
		return tp
	}
	// Keys a and b, values 1..7 each; restarts with wiped state in the
	// middle of windows: after 2 (a tumbling window holds 2 of 3) and
	// after 4 (a sliding window keeps 3 and 4 for the next firing).
	for _, vs := range [][]int64{{1, 2}, {3, 4}, {5, 6, 7}} {
		for _, v := range vs {
			for _, k := range []string{"a", "b"} {
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: binaryInt64(v), Timestamp: time.UnixMilli(1000 - v)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
		runThenWipe(t, build(), appID, addrs, dir, int64(2*len(vs)))
	}
	read := func(topic string) map[string][]string {
		rs, err := readback.ReadCommitted(ctx, addrs, topic)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][]string{}
		for _, r := range rs {
			m[string(r.Key)] = append(m[string(r.Key)], string(r.Value))
		}
		return m
	}
	// Tumbling by 3: 1+2+3, 4+5+6 (7 waits). Sliding 3 every 2: 1+2,
	// 2+3+4, 4+5+6.
	for topic, want := range map[string][]string{tumblingOut: {"6", "15"}, slidingOut: {"3", "9", "15"}} {
		for k, got := range read(topic) {
			if !slices.Equal(got, want) {
				t.Errorf("%s key %s: %v, want %v", topic, k, got, want)
			}
		}
		if len(read(topic)) != 2 {
			t.Errorf("%s: keys %v, want a and b", topic, read(topic))
		}
	}
}

func binaryInt64(v int64) []byte {
	b, _ := serde.Int64.Encode(v)
	return b
}

// TestLateRecordsAreCounted checks that a record too late for its window is
// counted in the instance's Late counter (sluice_late_records_total), and
// goes to LateRecords.
func TestLateRecordsAreCounted(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out, late := uniq(t, "late-in"), uniq(t, "late-out"), uniq(t, "late-late")
	cl := setup(t, addrs, 1, in, out, late)
	tp := topology.New()
	ws := topology.WindowedBy(topology.GroupByKey(topology.From(tp, in, serde.String, serde.String)), window.Tumbling(time.Second))
	topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))), out, topology.WindowedSerde(serde.String), serde.Int64)
	topology.To(topology.LateRecords(ws), late, serde.String, serde.String)
	for _, ts := range []int64{1000, 5000, 100, 5001} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(fmt.Sprint(ts)), Timestamp: time.UnixMilli(ts)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	app, err := processor.New(tp, processor.ApplicationID(uniq(t, "late")), processor.Brokers(addrs...), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(app, func(a *processor.App) bool { return a.Stats().Processed.Load() >= 4 }); err != nil {
		t.Fatal(err)
	}
	if n := app.Stats().Late.Load(); n != 1 {
		t.Errorf("Late = %d, want 1", n)
	}
	rs, err := readback.ReadCommitted(ctx, addrs, late)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || string(rs[0].Value) != "100" {
		t.Errorf("late records %v, want the one at 100", rs)
	}
}
