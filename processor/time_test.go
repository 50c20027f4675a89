package processor_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestRepartitionWatermarkSurvivesRestart runs the groupBy-then-window
// shape, whose upstream sub-topology has no windowed store, over two
// partitions of which only one gets records, so the downstream task's own
// watermark (the minimum over both writers) stays unknown and lateness is
// judged by the upstream's, carried in sluice.wm. After a restart with
// the local state deleted, a record far behind the upstream's watermark
// must still be late, as in an uninterrupted run (invariant 5): the
// upstream's watermark comes back from its time store's changelog.
func TestRepartitionWatermarkSurvivesRestart(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out, late := uniq(t, "rwm-in"), uniq(t, "rwm-out"), uniq(t, "rwm-late")
	cl := setup(t, addrs, 2, in, out, late)
	appID, dir := uniq(t, "rwm"), t.TempDir()
	build := func() *topology.Topology {
		tp := topology.New()
		s := topology.From(tp, in, serde.String, serde.String)
		ws := topology.WindowedBy(topology.GroupBy(s, func(_, v string) string { return v }, topology.Grouped("by-value", serde.String, serde.String)),
			window.Tumbling(100*time.Millisecond))
		topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("counts", serde.String, serde.Int64))), out, topology.WindowedSerde(serde.String), serde.Int64)
		topology.To(topology.LateRecords(ws), late, serde.String, serde.String)
		return tp
	}
	produce := func(ts int64) {
		// One key: one partition, one upstream writer.
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(fmt.Sprint(ts)), Timestamp: time.UnixMilli(ts)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	run := func(wait func(*processor.App) bool) *processor.App {
		t.Helper()
		app, err := processor.New(build(), processor.ApplicationID(appID), processor.Brokers(addrs...), processor.StateDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntil(app, wait); err != nil {
			t.Fatal(err)
		}
		return app
	}
	for ts := int64(1000); ts < 1010; ts++ {
		produce(ts)
	}
	run(func(a *processor.App) bool { return a.Stats().Processed.Load() >= 10 })
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	produce(500) // window [500, 600) closed long before the upstream's watermark 1008
	// The upstream record, its repartition record and the watermark
	// records the reopened upstream announces to both partitions.
	app := run(func(a *processor.App) bool { return a.Stats().Late.Load() >= 1 || a.Stats().Processed.Load() >= 4 })
	if n := app.Stats().Late.Load(); n != 1 {
		t.Errorf("after the restart, %d records late, want 1 (the one at 500)", n)
	}
	rs, err := readback.ReadCommitted(ctx, addrs, late)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || string(rs[0].Value) != "500" {
		t.Errorf("late records %v, want the one at 500", rs)
	}
}
