package processor

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
)

// TestClientLogAtDebugLevel: at debug level the Kafka client's own lines
// reach the instance's log, marked client=kafka; at info level none do.
func TestClientLogAtDebugLevel(t *testing.T) {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
		c := &config{brokers: b.Addrs(), logger: log}
		// A group member: franz-go logs its join at info level.
		assigned := make(chan struct{}, 1)
		cl, err := kgo.NewClient(c.kgoOpts(kgo.ConsumerGroup("g-"+level.String()), kgo.ConsumeTopics("t"),
			kgo.AllowAutoTopicCreation(),
			kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
				select {
				case assigned <- struct{}{}:
				default:
				}
			}))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		go func() {
			for ctx.Err() == nil && !cl.PollFetches(ctx).IsClientClosed() {
			}
		}()
		select {
		case <-assigned:
		case <-ctx.Done():
			t.Fatal("the group member got no assignment in 20s")
		}
		cancel()
		cl.Close()
		got := strings.Count(buf.String(), "client=kafka")
		if level == slog.LevelDebug && got == 0 {
			t.Errorf("debug level: no client line in the log:\n%s", buf.String())
		}
		if level == slog.LevelInfo && got != 0 {
			t.Errorf("info level: %d client lines in the log:\n%s", got, buf.String())
		}
	}
}
