package testapp

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
)

// Partitions is the partition count of the topics WordCount creates.
const Partitions = 2

// Instance is one running instance of an example.
type Instance struct {
	App   *processor.App
	Input string // the input topic: <app id>-lines

	ctx  context.Context
	prod *kgo.Client
	stop context.CancelFunc
	done chan error
	once sync.Once
	err  error
}

// WordCount creates wordcount's topics (Partitions each) for appID and
// runs one instance advertising endpoint, committing every 50 ms, until
// Stop or the test's end.
func WordCount(tb testing.TB, ctx context.Context, addrs []string, appID, endpoint string) *Instance {
	tb.Helper()
	in, out := appID+"-lines", appID+"-counts"
	for _, topic := range []string{in, out, in + "-dlq"} {
		if err := broker.CreateTopic(ctx, addrs, topic, Partitions, nil); err != nil {
			tb.Fatal(err)
		}
	}
	app, err := processor.New(examples.WordCount(in, out, in+"-dlq"), processor.ApplicationID(appID), processor.Brokers(addrs...),
		processor.StateDir(tb.TempDir()), processor.CommitInterval(50*time.Millisecond), processor.AdvertisedEndpoint(endpoint),
		processor.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		tb.Fatal(err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		tb.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	i := &Instance{App: app, Input: in, ctx: ctx, prod: prod, stop: stop, done: make(chan error, 1)}
	go func() { i.done <- app.Run(runCtx) }()
	tb.Cleanup(func() {
		_ = i.Stop()
		prod.Close()
	})
	return i
}

// Stop stops the instance and returns what Run returned; later calls
// return the same.
func (i *Instance) Stop() error {
	i.once.Do(func() {
		i.stop()
		i.err = <-i.done
	})
	return i.err
}

// Produce writes lines to partition p of the input, without a transaction
// (so the partition's end offset grows by exactly len(lines)).
func (i *Instance) Produce(tb testing.TB, p int32, lines ...string) {
	tb.Helper()
	recs := make([]*kgo.Record, len(lines))
	for j, l := range lines {
		recs[j] = &kgo.Record{Topic: i.Input, Partition: p, Value: []byte(l)}
	}
	if err := i.prod.ProduceSync(i.ctx, recs...).FirstErr(); err != nil {
		tb.Fatal(err)
	}
}
