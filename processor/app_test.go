package processor_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/txn"
)

// testBrokers starts an in-process broker, or uses SLUICE_TEST_BROKERS.
func testBrokers(t *testing.T) []string {
	t.Helper()
	return testbroker.Addrs(t)
}

// setup creates topics (the first is the input) and returns a client that
// produces to the input.
func setup(t *testing.T, addrs []string, partitions int32, topics ...string) *kgo.Client {
	t.Helper()
	for _, tp := range topics {
		if err := broker.CreateTopic(context.Background(), addrs, tp, partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topics[0]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func uniq(t *testing.T, s string) string {
	return fmt.Sprintf("%s-%d", s, time.Now().UnixNano()%1e9)
}

func TestWordCountEndToEnd(t *testing.T) {
	for _, g := range []txn.Guarantee{txn.ExactlyOnce, txn.AtLeastOnce, txn.AtMostOnce} {
		t.Run(g.String(), func(t *testing.T) { testWordCount(t, g) })
	}
}

// testWordCount runs wordcount without failures: under every guarantee the
// counts are then exact.
func testWordCount(t *testing.T, g txn.Guarantee) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out := uniq(t, "lines"), uniq(t, "counts")
	cl := setup(t, addrs, 3, in, out)
	want := map[string]int64{}
	var words int64
	for i := range 2000 {
		line := fmt.Sprintf("the Quick w%d fox w%d", i%7, i%13)
		for _, w := range examples.Words(line) {
			want[w]++
			words++
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(line)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	appID := uniq(t, "wc")
	app, err := processor.New(examples.WordCount(in, out, in+"-dlq"),
		processor.ApplicationID(appID), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.Guarantee(g),
		processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(rctx) }()
	deadline := time.Now().Add(60 * time.Second)
	// Every line is read once, every word once more from the repartition topic.
	for app.Stats().Processed.Load() < 2000+words && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	recs, err := readback.ReadCommitted(rctx, addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		n, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			t.Fatalf("bad count %q", r.Value)
		}
		if n != got[string(r.Key)]+1 {
			t.Errorf("word %q: update %d after %d", r.Key, n, got[string(r.Key)])
		}
		got[string(r.Key)] = n
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("word %q: got %d, want %d", w, got[w], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d words, want %d", len(got), len(want))
	}

	// The app made its internal topics: the changelog compacted, both
	// as wide as the input.
	adm := kadm.NewClient(cl)
	changelog, repartition := appID+"-counts-changelog", appID+"-counts-repartition"
	details, err := adm.ListTopics(ctx, changelog, repartition)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []string{changelog, repartition} {
		if n := len(details[tp].Partitions); n != 3 {
			t.Errorf("%s has %d partitions, want 3", tp, n)
		}
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, changelog)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := cfgs.On(changelog, nil)
	if err != nil {
		t.Fatal(err)
	}
	var compact bool
	for _, c := range policy.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil && *c.Value == "compact" {
			compact = true
		}
	}
	if !compact {
		t.Errorf("%s is not compacted: %+v", changelog, policy.Configs)
	}
}

func TestLostInputStopsExactlyOnce(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out := uniq(t, "lines"), uniq(t, "counts")
	cl := setup(t, addrs, 1, in, out)
	produce := func(n int) {
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a b")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	appID, dir := uniq(t, "lost"), t.TempDir()
	run := func(wait func(*processor.App) bool) error {
		app, err := processor.New(examples.WordCount(in, out, in+"-dlq"), processor.ApplicationID(appID),
			processor.Brokers(addrs...), processor.StateDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		return runUntil(app, wait)
	}
	produce(10)
	if err := run(func(a *processor.App) bool { return a.Stats().Processed.Load() >= 30 }); err != nil {
		t.Fatal(err)
	}
	// Records past the committed offset disappear before they are read.
	produce(10)
	adm := kadm.NewClient(cl)
	var del kadm.Offsets
	del.AddOffset(in, 0, 15, -1)
	resp, err := adm.DeleteRecords(ctx, del)
	if err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp.Error())
	}
	err = run(func(*processor.App) bool { return false })
	if !errors.Is(err, processor.ErrDataLoss) {
		t.Fatalf("Run after input loss returned %v, want ErrDataLoss", err)
	}
}

// runUntil runs app until wait says so (then it stops it and returns what
// Run returned) or until Run returns by itself; at most a minute.
func runUntil(app *processor.App, wait func(*processor.App) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	for !wait(app) {
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	return <-done
}
