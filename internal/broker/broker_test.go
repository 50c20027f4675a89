package broker

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func start(t *testing.T, cfg Config) *Broker {
	t.Helper()
	b, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

func produce(t *testing.T, ctx context.Context, addrs []string, topic, key, value string) {
	t.Helper()
	// Auto-creation is the client's request as well as the broker's
	// policy; asking for it here lets the auto-creation test share this.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func consumeOne(t *testing.T, ctx context.Context, addrs []string, topic string) *kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addrs...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("consume %s/%d: %v", topic, p, err)
		})
		if recs := fs.Records(); len(recs) > 0 {
			return recs[0]
		}
	}
}

func TestProduceConsume(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b := start(t, Config{Partitions: 3})

	addrs := b.Addrs()
	if len(addrs) != 1 {
		t.Fatalf("Addrs() = %v, want one address", addrs)
	}
	host, _, err := net.SplitHostPort(addrs[0])
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("Addrs() = %v, want 127.0.0.1:port", addrs)
	}

	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	if err := CreateTopic(ctx, addrs, "words", 2, compact); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	// Ensuring a topic on every start must not fail the second time.
	if err := CreateTopic(ctx, addrs, "words", 2, compact); err != nil {
		t.Fatalf("CreateTopic again: %v", err)
	}

	produce(t, ctx, addrs, "words", "k", "v")
	r := consumeOne(t, ctx, addrs, "words")
	if string(r.Key) != "k" || string(r.Value) != "v" {
		t.Fatalf("consumed %q=%q, want k=v", r.Key, r.Value)
	}

	adm := newAdmin(t, addrs)
	details, err := adm.ListTopics(ctx, "words")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details["words"].Partitions); n != 2 {
		t.Errorf("words has %d partitions, want 2", n)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "words")
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On("words", nil)
	if err != nil {
		t.Fatal(err)
	}
	var policy string
	for _, kv := range c.Configs {
		if kv.Key == "cleanup.policy" {
			policy = kv.MaybeValue()
		}
	}
	if policy != "compact" {
		t.Errorf("cleanup.policy = %q, want compact", policy)
	}
}

func TestAutoCreatedTopicsUseConfiguredPartitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	b := start(t, Config{Partitions: 3})
	produce(t, ctx, b.Addrs(), "auto", "k", "v")
	details, err := newAdmin(t, b.Addrs()).ListTopics(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details["auto"].Partitions); n != 3 {
		t.Errorf("auto-created topic has %d partitions, want 3", n)
	}
}

func TestPersistence(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()

	b := start(t, Config{DataDir: dir})
	if err := CreateTopic(ctx, b.Addrs(), "kept", 1, nil); err != nil {
		t.Fatal(err)
	}
	produce(t, ctx, b.Addrs(), "kept", "k", "survives restart")
	b.Close()
	b.Close() // idempotent

	b = start(t, Config{DataDir: dir})
	r := consumeOne(t, ctx, b.Addrs(), "kept")
	if string(r.Value) != "survives restart" {
		t.Fatalf("after restart consumed %q, want %q", r.Value, "survives restart")
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Listen: "nohostport"},
		{Listen: "127.0.0.1:http"},
		{Listen: "127.0.0.1:70000"},
		{Partitions: -1},
	} {
		if b, err := Start(cfg); err == nil {
			b.Close()
			t.Errorf("Start(%+v) succeeded, want error", cfg)
		} else if !strings.HasPrefix(err.Error(), "broker: ") {
			t.Errorf("Start(%+v) error %q lacks the package prefix", cfg, err)
		}
	}
}

func TestEmptyHostMeansLoopback(t *testing.T) {
	b := start(t, Config{Listen: ":0"})
	host, _, _ := net.SplitHostPort(b.Addrs()[0])
	if host != "127.0.0.1" {
		t.Fatalf("listening on %s, want loopback", b.Addrs()[0])
	}
}

func TestSlogLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slogLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	l.Logf(kfake.LogLevelInfo, "dropped %d", 1)
	l.Logf(kfake.LogLevelWarn, "kept %d", 2)
	l.Logf(kfake.LogLevelNone, "never")
	out := buf.String()
	if strings.Contains(out, "dropped") || strings.Contains(out, "never") {
		t.Errorf("logged lines below the level: %s", out)
	}
	if !strings.Contains(out, `msg="kept 2"`) || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "component=kfake") {
		t.Errorf("missing the warning: %s", out)
	}
}

func newAdmin(t *testing.T, addrs []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}
