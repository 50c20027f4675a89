package task

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
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
// 8 ms apart less a random 0–5 s, the watermark 5 s behind. Most records
// open a window and most windows close with one or two records, so the
// cost is a window's life. With a commit every 3,000 records (24 s of
// event time) a window outlives its transaction: its read, its writes, its
// expiry entry, its close and its result. With one every 60,000, as the
// bench's tasks often commit when the embedded broker serves one partition
// at a time, most windows open and close held in memory.
func BenchmarkFusedTumblingCountManyKeys(b *testing.B) {
	for _, every := range []int{3_000, 60_000} {
		b.Run(fmt.Sprintf("commit-every-%d", every), func(b *testing.B) {
			tp := topology.New()
			in := topology.From(tp, "in", serde.String, serde.Bytes, topology.Watermarks(window.BoundedOutOfOrderness(5*time.Second)))
			ws := topology.WindowedBy(topology.GroupByKey(in), window.Tumbling(time.Minute), topology.EmitFinal())
			topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
			d := &discard{}
			feedManyKeys(b, startTask(b, plan(b, tp), 0, Config{AppID: "b", Send: d.send}), every)
		})
	}
}

// feedManyKeys runs b's loop over tk with the windowed scenario's records
// as one of its 8 tasks sees them: keys drawn from 12,500, event times 8
// ms apart less a random 0–5 s, and a commit every every records.
func feedManyKeys(b *testing.B, tk *Task, every int) {
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
		if i++; i%every == 0 {
			if err := tk.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := tk.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkFusedHoppingCountManyKeys is BenchmarkFusedTumblingCountManyKeys
// with 1-minute windows that advance by hop: a record opens or updates a
// minute/hop windows, and every hop of event time closes the windows of one
// start. With a small hop a transaction closes many starts, each spilled
// start with a range delete of its own; the sub-benchmarks hold each
// layout to the other.
func BenchmarkFusedHoppingCountManyKeys(b *testing.B) {
	for _, hop := range []time.Duration{10 * time.Second, time.Second} {
		for _, byStart := range []bool{true, false} {
			name := fmt.Sprintf("hop=%s/byStart=%t", hop, byStart)
			b.Run(name, func(b *testing.B) {
				defer func(was bool) { ops.WindowsByStart = was }(ops.WindowsByStart)
				ops.WindowsByStart = byStart
				tp := topology.New()
				in := topology.From(tp, "in", serde.String, serde.Bytes, topology.Watermarks(window.BoundedOutOfOrderness(5*time.Second)))
				ws := topology.WindowedBy(topology.GroupByKey(in), window.Hopping(time.Minute, hop), topology.EmitFinal())
				topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
				d := &discard{}
				// What an instance of the default memory budget (256
				// MiB) with 8 such tasks gives a store: the shared block
				// cache, and a memtable of 4 MiB.
				cache := store.NewCache(128 << 20)
				defer cache.Close()
				feedManyKeys(b, startTask(b, plan(b, tp), 0, Config{AppID: "b", Send: d.send,
					Pebble: store.PebbleOptions{Cache: cache, MemTableSize: 4 << 20}}), 3_000)
			})
		}
	}
}
