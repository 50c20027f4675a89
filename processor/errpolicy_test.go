package processor_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// endTxnFails makes the broker answer the first committing EndTxn with
// code, once; the others are answered as always.
func endTxnFails(b *broker.Broker, code int16) *atomic.Bool {
	var done atomic.Bool
	c := b.Cluster()
	c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		if !r.Commit || done.Load() {
			if !done.Load() {
				c.KeepControl()
			}
			return nil, nil, false
		}
		done.Store(true)
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = code
		return resp, nil, true
	})
	return &done
}

// TestRunErrorPolicy: a session that fails with an error nobody expected
// stops the instance at once (the policy before retried it, up to ten
// sessions, and here the retry would have hidden it); one whose producer
// was fenced by another incarnation is rebuilt and the instance goes on,
// every input copied exactly once.
func TestRunErrorPolicy(t *testing.T) {
	if len(testbroker.External()) > 0 {
		t.Skip("answers the embedded broker's EndTxn")
	}
	start := func(t *testing.T) (*broker.Broker, *processor.App, *kgo.Client, string, string) {
		b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		in, out := uniq(t, "policy-in"), uniq(t, "policy-out")
		cl := setup(t, b.Addrs(), 2, in, out)
		top := topology.New()
		topology.To(topology.From(top, in, serde.String, serde.String), out, serde.String, serde.String)
		app, err := processor.New(top, processor.ApplicationID(uniq(t, "policy")), processor.Brokers(b.Addrs()...),
			processor.StateDir(t.TempDir()), processor.CommitInterval(50*time.Millisecond), processor.Logger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		return b, app, cl, in, out
	}
	produce := func(t *testing.T, cl *kgo.Client, n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte{byte(i)}, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("unexpected error is fatal", func(t *testing.T) {
		b, app, cl, _, _ := start(t)
		produce(t, cl, 10)
		injected := endTxnFails(b, kerr.InvalidRequest.Code)
		err := runUntil(app, func(a *processor.App) bool { return a.Stats().Processed.Load() >= 10 })
		if !injected.Load() {
			t.Fatal("no commit reached the broker")
		}
		if !errors.Is(err, kerr.InvalidRequest) {
			t.Fatalf("Run returned %v, want the unexpected InvalidRequest", err)
		}
		if n := app.Stats().Commits.Load(); n != 0 {
			t.Errorf("%d commits after the unexpected error: the session was rebuilt", n)
		}
	})

	t.Run("fenced producer is retried", func(t *testing.T) {
		b, app, cl, _, out := start(t)
		produce(t, cl, 10)
		injected := endTxnFails(b, kerr.ProducerFenced.Code)
		more := false
		err := runUntil(app, func(a *processor.App) bool {
			if !more && a.Stats().Processed.Load() >= 10 && injected.Load() {
				produce(t, cl, 10)
				more = true
			}
			return a.Stats().Processed.Load() >= 20
		})
		if err != nil {
			t.Fatalf("Run after a fenced producer: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rs, err := readback.ReadCommitted(ctx, b.Addrs(), out)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 20 {
			t.Errorf("%d records copied, want 20", len(rs))
		}
	})
}
