package task

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// BenchmarkFusedTumblingCount is one record through a tumbling-window count
// (EmitFinal), with a commit every 1,000 records, beside BenchmarkFusedCount.
func BenchmarkFusedTumblingCount(b *testing.B) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	ws := topology.WindowedBy(topology.GroupByKey(in), window.Tumbling(time.Minute), topology.EmitFinal())
	topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))), "out", topology.WindowedSerde(serde.String), serde.Int64)
	d := &discard{}
	tk := startTask(b, plan(b, tp), 0, Config{AppID: "b", Send: d.send})
	b.ReportAllocs()
	for i := range b.N {
		r := &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(int64(i))}
		if err := tk.Process(r); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			tk.Flush()
			tk.Commit()
		}
	}
}
