package processor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// boundedTopology counts records per user (the value) in tumbling 1s
// windows behind a repartition topic, emitting each window once, when it
// closes: in a streaming run the last windows never close.
func boundedTopology(in, out string) *topology.Topology {
	tp := topology.New()
	// Bytes keys: the input's keys are not all UTF-8.
	s := topology.From(tp, in, serde.Bytes, serde.String)
	g := topology.GroupBy(s, func(_ []byte, v string) string { return v }, topology.Grouped("by-user", serde.String, serde.String))
	ws := topology.WindowedBy(g, window.Tumbling(time.Second), topology.EmitFinal())
	c := topology.CountWindows(ws, topology.Materialized("counts", serde.String, serde.Int64))
	topology.To(topology.Map(topology.ToStream(c), func(w topology.Windowed[string], n int64) (string, string) {
		return fmt.Sprintf("%s@%d", w.Key, w.Window.Start), fmt.Sprint(n)
	}), out, serde.String, serde.String)
	return tp
}

// produceBounded writes n records over both partitions, keys of every
// shape, timestamps i*97ms, users u0..u4; it returns the expected counts
// of the records with timestamps before until (all with until 0).
func produceBounded(t *testing.T, cl *kgo.Client, n int, until int64) map[string]string {
	t.Helper()
	counts := map[string]int{}
	for i := range n {
		ts := int64(i) * 97
		user := fmt.Sprintf("u%d", i%5)
		key := []byte(fmt.Sprintf("%08x-4a1b-9c2d-%012x", i, i*7919))
		switch i % 4 {
		case 0:
			key = []byte{} // empty, not nil: a nil key is dropped by GroupBy, as in Kafka Streams
		case 1:
			key = []byte{0xff, byte(i)}
		}
		r := &kgo.Record{Key: key, Value: []byte(user), Timestamp: time.UnixMilli(ts)}
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
		if until == 0 || ts < until {
			counts[fmt.Sprintf("%s@%d", user, ts/1000*1000)]++
		}
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for k, c := range counts {
		want[k] = fmt.Sprint(c)
	}
	return want
}

func readFinal(t *testing.T, addrs []string, topic string) (map[string]string, int) {
	t.Helper()
	rs, err := readback.ReadCommitted(context.Background(), addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range rs {
		m[string(r.Key)] = string(r.Value)
	}
	return m, len(rs)
}

func runBounded(t *testing.T, addrs []string, tp *topology.Topology, appID, dir string, opts ...processor.Opt) (*processor.App, error) {
	t.Helper()
	app, err := processor.New(tp, append([]processor.Opt{processor.ApplicationID(appID), processor.Brokers(addrs...),
		processor.StateDir(dir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = app.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("bounded run did not end within a minute (Run: %v)", err)
	}
	return app, err
}

// TestBoundedFiresEveryWindowAndExits: a bounded run over a finite input
// closes every window, the last ones included, exactly once each, and
// Run returns by itself with a summary. Negative control: a streaming run
// over the same input, stopped once it processed everything, emitted fewer
// windows (the last ones wait for a watermark that never comes).
func TestBoundedFiresEveryWindowAndExits(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "bnd-in"), uniq(t, "bnd-out")
	cl := setup(t, addrs, 2, in, out)
	want := produceBounded(t, cl, 200, 0)

	app, err := runBounded(t, addrs, boundedTopology(in, out), uniq(t, "bnd"), t.TempDir(), processor.Bounded())
	if err != nil {
		t.Fatal(err)
	}
	s := app.Bounded()
	if !s.Finished || s.Records < 200 {
		t.Fatalf("summary %+v, want finished with 200 records", s)
	}
	got, n := readFinal(t, addrs, out)
	if !maps.Equal(got, want) || n != len(want) {
		t.Fatalf("bounded: %d records, %v\nwant each window once: %v", n, got, want)
	}

	// Negative control: streaming over the same input.
	out2 := uniq(t, "bnd-out-stream")
	setup(t, addrs, 2, out2)
	sapp, err := processor.New(boundedTopology(in, out2), processor.ApplicationID(uniq(t, "bnd-stream")),
		processor.Brokers(addrs...), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(sapp, func(a *processor.App) bool { return a.Stats().Processed.Load() >= 200 }); err != nil {
		t.Fatal(err)
	}
	streamed, _ := readFinal(t, addrs, out2)
	if maps.Equal(streamed, want) {
		t.Fatal("negative control: a streaming run closed every window too; the test cannot tell bounded from streaming")
	}
	for k, v := range streamed {
		if want[k] != v {
			t.Errorf("streaming closed window %s with %s, bounded %s", k, v, want[k])
		}
	}
}

// TestBoundedUntilCutsAtTime: --until stops each partition at the first
// record at or after the time; records after it are neither counted nor
// their windows fired. Negative control: the counts differ from the whole
// input's.
func TestBoundedUntilCutsAtTime(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "bndu-in"), uniq(t, "bndu-out")
	cl := setup(t, addrs, 2, in, out)
	const until = 9500
	all := produceBounded(t, cl, 200, 0)
	want := map[string]string{}
	{
		// What produceBounded counts with a cut (same records).
		counts := map[string]int{}
		for i := range 200 {
			if ts := int64(i) * 97; ts < until {
				counts[fmt.Sprintf("u%d@%d", i%5, ts/1000*1000)]++
			}
		}
		for k, c := range counts {
			want[k] = fmt.Sprint(c)
		}
	}
	app, err := runBounded(t, addrs, boundedTopology(in, out), uniq(t, "bndu"), t.TempDir(), processor.BoundedUntil(time.UnixMilli(until)))
	if err != nil {
		t.Fatal(err)
	}
	if s := app.Bounded(); !s.Finished || s.Records < (until+96)/97 {
		t.Fatalf("summary %+v, want %d records", s, (until+96)/97)
	}
	got, _ := readFinal(t, addrs, out)
	if !maps.Equal(got, want) {
		t.Fatalf("until: %v\nwant %v", got, want)
	}
	if maps.Equal(got, all) {
		t.Fatal("negative control: the cut run equals the whole input's")
	}
}

// TestBoundedEmptyInput: with nothing to read, a bounded run ends at once
// and writes nothing.
func TestBoundedEmptyInput(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "bnde-in"), uniq(t, "bnde-out")
	setup(t, addrs, 2, in, out)
	app, err := runBounded(t, addrs, boundedTopology(in, out), uniq(t, "bnde"), t.TempDir(), processor.Bounded())
	if err != nil {
		t.Fatal(err)
	}
	if s := app.Bounded(); !s.Finished {
		t.Fatalf("summary %+v", s)
	}
	if got, n := readFinal(t, addrs, out); n != 0 {
		t.Fatalf("empty input wrote %v", got)
	}
}

// TestBoundedTwoInstances: two instances of one bounded application share
// the tasks; both return by themselves, and together they wrote every
// window once (the same checker as the single instance's, whose negative
// control is the streaming run there).
func TestBoundedTwoInstances(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "bnd2-in"), uniq(t, "bnd2-out")
	cl := setup(t, addrs, 4, in, out)
	want := produceBounded(t, cl, 2000, 0)
	appID := uniq(t, "bnd2")
	errs := make(chan error, 2)
	apps := make([]*processor.App, 2)
	for i := range apps {
		app, err := processor.New(boundedTopology(in, out), processor.ApplicationID(appID), processor.Brokers(addrs...),
			processor.StateDir(t.TempDir()), processor.Bounded())
		if err != nil {
			t.Fatal(err)
		}
		apps[i] = app
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, app := range apps {
		go func() { errs <- app.Run(ctx) }()
	}
	for range apps {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the instances did not end within 90s")
	}
	var records int64
	for i, app := range apps {
		s := app.Bounded()
		if !s.Finished {
			t.Errorf("instance %d: %+v, not finished", i, s)
		}
		records += s.Records
		t.Logf("instance %d: %+v", i, s)
	}
	got, n := readFinal(t, addrs, out)
	if !maps.Equal(got, want) || n != len(want) {
		t.Fatalf("two instances: %d records, %d keys, want each of %d windows once\ngot %v\nwant %v", n, len(got), len(want), got, want)
	}
}

// TestBoundedChild is the child process of TestBoundedSIGKILLThenRerun:
// one bounded instance, killed with SIGKILL once it committed BND_KILL_AT
// records (0: never).
func TestBoundedChild(t *testing.T) {
	if os.Getenv("BND_CHILD") != "1" {
		t.Skip("child process of TestBoundedSIGKILLThenRerun")
	}
	killAt, _ := strconv.ParseInt(os.Getenv("BND_KILL_AT"), 10, 64)
	app, err := processor.New(boundedTopology(os.Getenv("BND_IN"), os.Getenv("BND_OUT")),
		processor.ApplicationID(os.Getenv("BND_APP")), processor.Brokers(os.Getenv("BND_BROKERS")),
		processor.StateDir(os.Getenv("BND_STATE")), processor.Bounded())
	if err != nil {
		t.Fatal(err)
	}
	if killAt > 0 {
		go func() {
			for app.Stats().Processed.Load() < killAt {
				time.Sleep(time.Millisecond)
			}
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := app.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if s := app.Bounded(); !s.Finished {
		t.Fatalf("not finished: %+v", s)
	}
}

// TestBoundedSIGKILLThenRerun: a bounded run killed mid-way and run again
// (same application id and state directory) ends with exactly the results
// of an uninterrupted run: each window once, with its full count. Negative
// control: the killed run alone had not written them all (the kill was
// mid-run).
func TestBoundedSIGKILLThenRerun(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "bndk-in"), uniq(t, "bndk-out")
	cl := setup(t, addrs, 2, in, out)
	want := produceBounded(t, cl, 3000, 0)
	env := append(os.Environ(), "BND_CHILD=1", "BND_IN="+in, "BND_OUT="+out, "BND_APP="+uniq(t, "bndk"),
		"BND_BROKERS="+strings.Join(addrs, ","), "BND_STATE="+t.TempDir())
	run := func(killAt int) error {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBoundedChild$", "-test.v")
		cmd.Env = append(slices.Clone(env), fmt.Sprintf("BND_KILL_AT=%d", killAt))
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("child: %v\n%s", err, tail(buf.String(), 3000))
			}
			return err
		case <-time.After(120 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("child did not end within 120s:\n%s", tail(buf.String(), 3000))
		}
		return nil
	}
	err := run(500)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("first run: %v, want killed by SIGKILL", err)
	}
	if got, n := readFinal(t, addrs, out); maps.Equal(got, want) && n == len(want) {
		t.Fatal("negative control: the killed run had already written every window; the kill was not mid-run")
	}
	if err := run(0); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	got, n := readFinal(t, addrs, out)
	if !maps.Equal(got, want) || n != len(want) {
		t.Fatalf("after kill and rerun: %d records, %d keys, want each of %d windows once", n, len(got), len(want))
	}
}

// TestBoundedTransactionalInput: an input written in transactions ends in
// markers (and here an aborted transaction), not in a record the consumer
// returns; the run still finds its end (the probe) and counts only the
// committed records. Negative control: the aborted records would change
// the counts if they were read.
func TestBoundedTransactionalInput(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "bndt-in"), uniq(t, "bndt-out")
	setup(t, addrs, 2, in, out)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in), kgo.TransactionalID(uniq(t, "bndt-txn")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	counts := map[string]int{}
	withAborted := map[string]int{}
	for txn, commit := range []bool{true, true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			ts := int64(txn*40+i) * 97
			user := fmt.Sprintf("u%d", i%3)
			k := fmt.Sprintf("%s@%d", user, ts/1000*1000)
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(user), Timestamp: time.UnixMilli(ts)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			withAborted[k]++
			if commit {
				counts[k]++
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	want, all := map[string]string{}, map[string]string{}
	for k, c := range counts {
		want[k] = fmt.Sprint(c)
	}
	for k, c := range withAborted {
		all[k] = fmt.Sprint(c)
	}
	if maps.Equal(want, all) {
		t.Fatal("negative control: the aborted records change no count")
	}
	if _, err := runBounded(t, addrs, boundedTopology(in, out), uniq(t, "bndt"), t.TempDir(), processor.Bounded()); err != nil {
		t.Fatal(err)
	}
	got, n := readFinal(t, addrs, out)
	if !maps.Equal(got, want) || n != len(want) {
		t.Fatalf("transactional input: %d records %v\nwant %v", n, got, want)
	}
}

// TestBoundedEnrichEqualsStreaming: enrich (a global table join and a
// windowed stream–stream left join behind a repartition) run bounded over
// orders, payments and customers gives every order exactly as a streaming
// run gives it once far-future records closed every join window (the
// enrich oracle's flush, examples/enrich_test.go). Negative control: the
// streaming run without those records has not emitted every order.
func TestBoundedEnrichEqualsStreaming(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	p := uniq(t, "bnden") + "-"
	topics := []string{p + "orders", p + "customers", p + "payments", p + "enriched", p + "revenue", p + "dlq"}
	setup(t, addrs, 3, topics...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(topic, key string, v any, ts int64) {
		b, _ := json.Marshal(v)
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: b, Timestamp: time.UnixMilli(ts)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for c := range 6 {
		produce(p+"customers", fmt.Sprintf("c%d", c), examples.Customer{Name: fmt.Sprintf("name-%d", c), Tier: []string{"gold", "silver"}[c%2]}, 1000)
	}
	const minute = 60_000
	now, orders := int64(1_000_000), 0
	for i := range 300 {
		now += int64(i%7) * 3000
		id := fmt.Sprintf("o%d", i)
		produce(p+"orders", id, examples.Order{OrderID: id, CustomerID: fmt.Sprintf("c%d", i%8), AmountCents: int64(100 + i), TS: now}, now)
		orders++
		if i%3 != 0 {
			// Paid within the join window (payments in time order
			// per order, late by under a minute and a half).
			produce(p+"payments", id, examples.Payment{OrderID: id, AmountCents: int64(100 + i), TS: now + int64(i%90)*1000}, now+int64(i%90)*1000)
		}
	}
	enriched := func(topic string) map[string]string {
		rs, err := readback.ReadCommitted(ctx, addrs, topic)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range rs {
			if strings.HasPrefix(string(r.Key), "end") {
				continue
			}
			if _, dup := m[string(r.Key)]; dup {
				t.Errorf("%s: order %s emitted twice", topic, r.Key)
			}
			m[string(r.Key)] = string(r.Value)
		}
		return m
	}
	tp := func(enrichedTopic string) *topology.Topology {
		return examples.Enrich(p+"orders", p+"customers", p+"payments", enrichedTopic, p+"revenue", p+"dlq")
	}
	if _, err := runBounded(t, addrs, tp(p+"enriched"), p+"app-b", t.TempDir(), processor.Bounded(),
		processor.DeadLetterTopic(p+"dlq")); err != nil {
		t.Fatal(err)
	}
	bounded := enriched(p + "enriched")
	if len(bounded) != orders {
		t.Fatalf("bounded: %d orders of %d", len(bounded), orders)
	}

	// Streaming: first without the closing records (negative control),
	// then with them, until every order is out.
	setup(t, addrs, 3, p+"enriched-s")
	sapp, err := processor.New(tp(p+"enriched-s"), processor.ApplicationID(p+"app-s"), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.DeadLetterTopic(p+"dlq"))
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- sapp.Run(sctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && sapp.Stats().Processed.Load() < int64(orders) {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if n := len(enriched(p + "enriched-s")); n == orders {
		t.Fatal("negative control: streaming emitted every order without the closing records")
	}
	// Closing records on every partition (keys end0..end19 cover the
	// three), as the oracle's single-partition driver needs one.
	end := now + 60*minute
	for i := range 20 {
		k := fmt.Sprintf("end%d", i)
		produce(p+"orders", k, examples.Order{OrderID: k, CustomerID: "nobody", TS: end}, end)
		produce(p+"payments", k, examples.Payment{OrderID: k, TS: end}, end)
	}
	var streamed map[string]string
	for wait := time.Now().Add(60 * time.Second); time.Now().Before(wait) && sctx.Err() == nil; {
		if streamed = enriched(p + "enriched-s"); len(streamed) >= orders {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(bounded, streamed) {
		for k, v := range bounded {
			if streamed[k] != v {
				t.Errorf("order %s: bounded %s, streaming %s", k, v, streamed[k])
			}
		}
		t.Fatalf("bounded (%d orders) differs from streaming (%d)", len(bounded), len(streamed))
	}
}
