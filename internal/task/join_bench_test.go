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

// BenchmarkFusedStreamJoin is the stream-join scenario of `sluice bench` as
// one of its 8 tasks sees it: an inner join of two inputs in a 1-minute
// window, records alternating between them, keys drawn from 12,500, event
// times 8 ms apart less a random 0–5 s, the watermark 5 s behind, with a
// commit every 3,000 records (a job keeping up) or every 30,000 (a
// backlog's transactions). Each record is stored, ranges the other side's
// records of its key, and is removed two minutes of event time later.
// The stores are on Pebble, or in memory (topology.InMemory, as
// stream-join-memory's).
func BenchmarkFusedStreamJoin(b *testing.B) {
	for _, every := range []int{3_000, 30_000} {
		for _, inMemory := range []bool{false, true} {
			name := fmt.Sprintf("commit-every-%d", every)
			var stores []topology.StoreOption
			if inMemory {
				name, stores = name+"-in-memory", []topology.StoreOption{topology.InMemory()}
			}
			b.Run(name, func(b *testing.B) {
				tp := topology.New()
				wm := topology.Watermarks(window.BoundedOutOfOrderness(5 * time.Second))
				l := topology.From(tp, "in", serde.String, serde.Bytes, wm)
				r := topology.From(tp, "in2", serde.String, serde.Bytes, wm)
				j := topology.JoinStreams(l, r, topology.JoinWindows(time.Minute), func(_ string, a, b []byte) []byte { return a },
					topology.StreamJoined[string, []byte, []byte]{Name: "j", Key: serde.String, Left: serde.Bytes, Right: serde.Bytes, Stores: stores})
				topology.To(j, "out", serde.String, serde.Bytes)
				d := &discard{}
				tk := startTask(b, plan(b, tp), 0, Config{AppID: "b", Send: d.send})
				rng := rand.New(rand.NewPCG(1, 2))
				val := make([]byte, 100)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					topic := "in"
					if i%2 == 1 {
						topic = "in2"
					}
					rec := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "%08d", rng.IntN(12_500)), Value: val,
						Timestamp: time.UnixMilli(1_735_689_600_000 + int64(i)*8 - rng.Int64N(5_001))}
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
			})
		}
	}
}
