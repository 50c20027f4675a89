package sqlsinktest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/topology"
)

// RunApp runs an application writing to the adapter's database through
// sluice's runtime, in both modes: rows the database refuses become one
// dead letter each with the database's message (or stop the instance,
// under the policy fail), the rest exactly once; the app's sessions
// terminated every 200ms while it runs, and a restart of the server
// mid-run, leave every row exactly once and nothing prepared.
func RunApp(t *testing.T, h *Harness) {
	for _, mode := range []string{"two_phase", "offsets"} {
		t.Run("Rejected/"+mode, func(t *testing.T) { h.testAppRejected(t, mode, topology.SendToDeadLetterQueue) })
		t.Run("RejectedStop/"+mode, func(t *testing.T) { h.testAppRejected(t, mode, topology.Fail) })
		t.Run("KilledSessions/"+mode, func(t *testing.T) { h.testAppFault(t, mode, "kill") })
		t.Run("Restart/"+mode, func(t *testing.T) { h.testAppFault(t, mode, "restart") })
	}
}

// badBill: some bills the table refuses, of both kinds (too long, check).
func badBill(i int) string {
	switch {
	case i%41 == 3:
		return "too long"
	case i%43 == 10, i == 0:
		return "check"
	}
	return ""
}

type appRun struct {
	h       *Harness
	t       *testing.T
	addrs   []string
	app, in string
	table   string
	n       int
	s       Sink
	a       *processor.App
	done    chan error
	cancel  context.CancelFunc
}

// startApp starts an instance writing the input to a new bills table.
func (h *Harness) startApp(t *testing.T, mode string, policy topology.Action, n int) *appRun {
	r := &appRun{h: h, t: t, addrs: testbroker.Addrs(t), app: testbroker.Unique(t, "dbapp"), in: testbroker.Unique(t, "dbapp-in"),
		table: unique("app_bills"), n: n, done: make(chan error, 1)}
	ctx := ctxFor(t)
	if err := broker.CreateTopic(ctx, r.addrs, r.in, 3, nil); err != nil {
		t.Fatal(err)
	}
	r.s = h.open(t, ctx, h.billsTable(r.table))
	tp := topology.New()
	bills := topology.From(tp, r.in, serde.String, serde.JSON[*Bill]())
	opt := topology.SinkOnError(topology.Always(policy))
	if mode == "two_phase" {
		topology.ToParticipant[string, *Bill](bills, "db", r.s, opt)
	} else {
		topology.ToIdempotent[string, *Bill](bills, "db", r.s, serde.String, serde.JSON[*Bill](), opt)
	}
	a, err := processor.New(tp, processor.ApplicationID(r.app), processor.Brokers(r.addrs...),
		processor.StateDir(t.TempDir()), processor.CommitInterval(50*time.Millisecond),
		processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	r.a = a
	rctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	r.cancel = cancel
	go func() { r.done <- a.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// feed produces the n bills, every pace.
func (r *appRun) feed(pace time.Duration) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addrs...), kgo.DefaultProduceTopic(r.in))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	for i := range r.n {
		b := &Bill{Account: fmt.Sprintf("acct-%d", i%7), Cents: int64(i)}
		switch badBill(i) {
		case "too long":
			b.Account = strings.Repeat("a", 17)
		case "check":
			b.Cents = -1
		}
		v, _ := serde.JSON[*Bill]().Encode(b)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprintf("bill-%06d", i)), Value: v}, nil)
		if pace > 0 {
			time.Sleep(pace)
		}
	}
	if err := cl.Flush(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *appRun) good() int {
	n := 0
	for i := range r.n {
		if badBill(i) == "" {
			n++
		}
	}
	return n
}

// waitRows waits until the table holds want rows, or the instance stops.
func (r *appRun) waitRows(want int) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-r.done:
			r.done <- err
			return fmt.Errorf("instance stopped: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
		if rows, _ := r.h.count(r.t, context.Background(), r.table); rows >= want {
			time.Sleep(300 * time.Millisecond) // anything more would show
			return nil
		}
	}
	return errors.New("timed out waiting for the rows")
}

// stop stops the instance cleanly.
func (r *appRun) stop() {
	r.cancel()
	if err := <-r.done; err != nil {
		r.t.Fatal(err)
	}
	r.done <- nil
}

// checkRows: the good bills each exactly once (no unique constraint: a
// duplicate shows), none of the refused ones, nothing left prepared.
func (r *appRun) checkRows() {
	ctx := ctxFor(r.t)
	rows, distinct := r.h.count(r.t, ctx, r.table)
	if rows != r.good() || distinct != rows {
		r.t.Fatalf("%d rows, %d distinct; want the %d good bills each once", rows, distinct, r.good())
	}
	var bad int
	if err := r.h.Reader.QueryRowContext(ctx, "SELECT count(*) FROM "+r.table+" WHERE cents < 0 OR account LIKE 'aaaa%'").Scan(&bad); err != nil || bad != 0 {
		r.t.Fatalf("%d refused bills stored (%v)", bad, err)
	}
	// The app's prefix (processor's xidPrefix): other apps share the
	// database.
	sum := sha256.Sum256([]byte(r.app + "\x00db"))
	if ids := r.h.prepared(r.t, ctx, r.s, hex.EncodeToString(sum[:])[:12]+"-"); len(ids) != 0 {
		r.t.Fatalf("left prepared: %v", ids)
	}
}

func (r *appRun) deadLetters() []*kgo.Record {
	ctx := ctxFor(r.t)
	recs, err := readback.ReadCommitted(ctx, r.addrs, r.app+"-dlq")
	if err != nil {
		r.t.Fatal(err)
	}
	return recs
}

func (h *Harness) testAppRejected(t *testing.T, mode string, policy topology.Action) {
	r := h.startApp(t, mode, policy, 300)
	r.feed(0)
	if policy == topology.Fail {
		select {
		case err := <-r.done:
			r.done <- nil
			var rej sink.Rejected
			if !errors.As(err, &rej) {
				t.Fatalf("Run returned %v, want the database's refusal", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("the instance did not stop")
		}
		var bad int
		if err := h.Reader.QueryRowContext(ctxFor(t), "SELECT count(*) FROM "+r.table+" WHERE cents < 0 OR account LIKE 'aaaa%'").Scan(&bad); err != nil || bad != 0 {
			t.Fatalf("%d refused bills stored (%v)", bad, err)
		}
		if d := r.deadLetters(); len(d) != 0 {
			t.Fatalf("%d dead letters under the policy fail", len(d))
		}
		return
	}
	if err := r.waitRows(r.good()); err != nil {
		t.Fatal(err)
	}
	r.stop()
	r.checkRows()
	got := map[string]int{}
	for _, d := range r.deadLetters() {
		msg := ""
		for _, hd := range d.Headers {
			if hd.Key == "sluice.error.message" {
				msg = string(hd.Value)
			}
		}
		if !strings.Contains(msg, "rejected record") || !strings.Contains(msg, r.table) {
			t.Fatalf("dead letter %s: message %q lacks the database's", d.Key, msg)
		}
		got[string(d.Key)]++
	}
	for i := range r.n {
		k, want := fmt.Sprintf("bill-%06d", i), 0
		if badBill(i) != "" {
			want = 1
		}
		if got[k] != want {
			t.Fatalf("bill %s: %d dead letters, want %d", k, got[k], want)
		}
	}
}

// testAppFault runs the app while its sessions are terminated every 200ms
// (kill), or while the server restarts once (restart).
func (h *Harness) testAppFault(t *testing.T, mode, fault string) {
	r := h.startApp(t, mode, topology.SendToDeadLetterQueue, 600)
	fed := make(chan struct{})
	go func() { defer close(fed); r.feed(5 * time.Millisecond) }()
	ctx := ctxFor(t)
	start := time.Now()
	var faults int
	switch fault {
	case "kill":
		for time.Since(start) < 3*time.Second {
			time.Sleep(200 * time.Millisecond)
			if n, err := h.Kill(ctx); err == nil {
				faults += n
			}
		}
	case "restart":
		time.Sleep(time.Second)
		if err := h.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		faults = 1
	}
	<-fed
	if err := r.waitRows(r.good()); err != nil {
		t.Fatal(err)
	}
	aborts := r.a.Stats().AbortsByCause()[processor.AbortSink]
	r.stop()
	r.checkRows()
	t.Logf("%s: %d sessions ended or restarts; %d transactions aborted by the sink in %v", fault, faults, aborts, time.Since(start).Round(time.Millisecond))
	// Each fault fails the prepares in flight, and the failures back off
	// from 100ms: 15 kills (or a restart of a few seconds) abort a few
	// dozen transactions at most; a tight loop would abort every commit
	// interval (50ms) while the database is away.
	if limit := int64(40); aborts > limit {
		t.Fatalf("%d transactions aborted by the sink, want at most %d", aborts, limit)
	}
}
