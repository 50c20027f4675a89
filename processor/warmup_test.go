package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
)

// TestScaleOutWarmsUpBeforeMoving adds a second instance to one that holds
// wordcount's state. The counting tasks do not move at once: the newcomer
// first gets warm-up copies (standby state), and the leader's probing
// rebalance moves a task once its copy is within the acceptable lag, so the
// newcomer restores only a tail when it takes the task. Counts stay exact.
func TestScaleOutWarmsUpBeforeMoving(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out := uniq(t, "lines"), uniq(t, "counts")
	cl := setup(t, addrs, 2, in, out)
	want := map[string]int64{}
	produce := func(n, from int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			line := fmt.Sprintf("w%d w%d", (from+i)%4000, (from+i*7)%4001)
			for _, w := range examples.Words(line) {
				want[w]++
			}
			recs[i] = &kgo.Record{Value: []byte(line)}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	appID := uniq(t, "warm")
	newApp := func() *processor.App {
		app, err := processor.New(examples.WordCount(in, out, in+"-dlq"),
			processor.ApplicationID(appID), processor.Brokers(addrs...), processor.StateDir(t.TempDir()),
			processor.AcceptableRecoveryLag(50), processor.MaxWarmupReplicas(1),
			processor.ProbingRebalanceInterval(time.Second),
			processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: warmupLogLevel()}))))
		if err != nil {
			t.Fatal(err)
		}
		return app
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var done []chan error
	run := func(app *processor.App) {
		d := make(chan error, 1)
		done = append(done, d)
		go func() { d <- app.Run(rctx) }()
	}
	var a, b *processor.App
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				for i, app := range []*processor.App{a, b} {
					if app != nil {
						t.Logf("instance %d: %+v", i, app.Status().Tasks)
					}
				}
				t.Fatalf("%s: not within 90s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	a = newApp()
	run(a)
	produce(10_000, 0)
	waitFor("the first instance processed the input", func() bool { return a.Stats().Processed.Load() >= 30_000 })

	b = newApp()
	run(b)
	state := func(app *processor.App, id string) processor.TaskState {
		for _, st := range app.Status().Tasks {
			if st.ID == id {
				return st.State
			}
		}
		return ""
	}
	sawWarmup := false
	var moved string
	waitFor("a counting task moved to the newcomer", func() bool {
		for _, id := range []string{"1_0", "1_1"} {
			if state(b, id) == processor.TaskStandby {
				sawWarmup = true
			}
			if state(b, id) == processor.TaskRunning {
				moved = id
				return true
			}
		}
		return false
	})
	if !sawWarmup {
		t.Error("the counting task moved without a warm-up copy seen first")
	}
	var restored int64
	for _, st := range b.Status().Tasks {
		if st.ID == moved {
			restored = st.Restored
		}
	}
	t.Logf("task %s moved to the newcomer after warming up; it restored %d records at the move", moved, restored)
	if restored > 1000 {
		t.Errorf("the moved task restored %d records: its warm-up copy was not used", restored)
	}

	produce(2_000, 10_000)
	waitFor("the counts", func() bool {
		rc, c := context.WithTimeout(ctx, 30*time.Second)
		defer c()
		recs, err := readback.ReadCommitted(rc, addrs, out)
		if err != nil {
			return false
		}
		got := readback.Last(recs)
		for w, n := range want {
			if string(got[w]) != strconv.FormatInt(n, 10) {
				return false
			}
		}
		return len(got) == len(want)
	})
	cancel()
	for _, d := range done {
		if err := <-d; err != nil {
			t.Error(err)
		}
	}
}

// warmupLogLevel is Info with SLUICE_TEST_LOG=info, else Warn.
func warmupLogLevel() slog.Level {
	if os.Getenv("SLUICE_TEST_LOG") == "info" {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}
