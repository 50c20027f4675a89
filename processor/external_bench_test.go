package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink/sinkfile"
	"github.com/sluice-streams/sluice/topology"
)

// BenchmarkExternalSinks runs one instance over b.N records already in a
// 3-partition topic, through a Kafka topic (the baseline), a two-phase sink
// and an offsets-mode sink on disk (sinkfile: an fsync per prepared
// transaction, per write), until the output holds them all; it reports
// records/s.
func BenchmarkExternalSinks(b *testing.B) {
	for _, mode := range []string{"kafka", "twophase", "offsets"} {
		b.Run(mode, func(b *testing.B) {
			addrs := testbroker.Addrs(b)
			in, out := fmt.Sprintf("bench-in-%d", time.Now().UnixNano()), fmt.Sprintf("bench-out-%d", time.Now().UnixNano())
			for _, tp := range []string{in, out} {
				if err := broker.CreateTopic(context.Background(), addrs, tp, 3, nil); err != nil {
					b.Fatal(err)
				}
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in))
			if err != nil {
				b.Fatal(err)
			}
			defer cl.Close()
			for i := range b.N {
				cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint(i % 1000)), Value: []byte(fmt.Sprintf("%d|payload", i))}, nil)
			}
			if err := cl.Flush(context.Background()); err != nil {
				b.Fatal(err)
			}
			app := fmt.Sprintf("bench-%s-%d", mode, time.Now().UnixNano())
			dir := b.TempDir()
			tp := topology.New()
			s := topology.From(tp, in, serde.String, serde.Bytes)
			var held func() int
			switch mode {
			case "kafka":
				topology.To(s, out, serde.String, serde.Bytes)
			case "twophase":
				p, _ := sinkfile.NewParticipant(dir, serde.String, serde.Bytes)
				topology.ToParticipant(s, "db", p)
				held = func() int { r, _ := p.Committed(); return len(r) }
			case "offsets":
				st, _ := sinkfile.NewStore(dir, serde.String, serde.Bytes)
				topology.ToIdempotent(s, "db", st, serde.String, serde.Bytes)
				held = func() int { r, _ := st.Records("db", app+"-db-sink"); return len(r) }
			}
			a, err := processor.New(tp, processor.ApplicationID(app), processor.Brokers(addrs...), processor.StateDir(b.TempDir()))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			err = runUntil(a, func(a *processor.App) bool {
				if a.Stats().Processed.Load() < int64(b.N) {
					return false
				}
				return held == nil || held() >= b.N
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}
