package task

import (
	"fmt"
	"math/rand/v2"
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

// BenchmarkFusedTumblingCountManyKeys is the windowed scenario of `sluice
// bench` as one of its 8 tasks sees it: keys drawn from 12,500, event times
// 8 ms apart less a random 0–5 s, the watermark 5 s behind, a commit every
// 3,000 records. Most records open a window and most windows close with one
// or two records, so the cost is a window's life: its read, its writes, its
// expiry entry, its close and its result.
func BenchmarkFusedTumblingCountManyKeys(b *testing.B) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.Bytes, topology.Watermarks(window.BoundedOutOfOrderness(5*time.Second)))
	ws := topology.WindowedBy(topology.GroupByKey(in), window.Tumbling(time.Minute), topology.EmitFinal())
	topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
	d := &discard{}
	tk := startTask(b, plan(b, tp), 0, Config{AppID: "b", Send: d.send})
	r := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 100)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		rec := &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "%08d", r.IntN(12_500)), Value: val,
			Timestamp: time.UnixMilli(1_735_689_600_000 + int64(i)*8 - r.Int64N(5_001))}
		if err := tk.Process(rec); err != nil {
			b.Fatal(err)
		}
		if i++; i%3_000 == 0 {
			if err := tk.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := tk.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
