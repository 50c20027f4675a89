package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
)

// startInProcess runs jobs in this process (the tests have no sluice
// binary to start); wrong runs a q2 with the wrong modulus instead.
func startInProcess(t *testing.T, wrong bool) NexmarkStart {
	return func(ctx context.Context, job NexmarkJob) (func() (NexmarkUsage, error), <-chan error, error) {
		jctx, cancel := context.WithCancel(ctx)
		exited := make(chan error, 1)
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			if wrong {
				tp := examples.NexmarkQ2Modulus(job.Topics, 124)
				var app *processor.App
				app, err = processor.New(tp, processor.ApplicationID(job.AppID), processor.Brokers(job.Brokers...),
					processor.StateDir(t.TempDir()), processor.Bounded())
				if err == nil {
					err = app.Run(jctx)
				}
			} else {
				_, err = RunNexmarkJob(jctx, job)
			}
			exited <- err
		}()
		return func() (NexmarkUsage, error) {
			cancel()
			<-done
			return NexmarkUsage{CPUSeconds: 1}, nil
		}, exited, nil
	}
}

// TestRunNexmark runs a bounded and a streaming query through the
// benchmark, which checks their outputs against the oracle; negative
// control: a wrong q2 is an error, not a number.
func TestRunNexmark(t *testing.T) {
	addrs := testbroker.Addrs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cfg := NexmarkConfig{Events: 5000, Rate: 200, Partitions: 2, CommitInterval: 100 * time.Millisecond,
		Queries: []string{"q2", "q18"}, Brokers: addrs, Start: startInProcess(t, false)}
	res, err := RunNexmark(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Query != "q2" || !res[0].Bounded || res[1].Bounded || res[1].Outputs == 0 || res[1].EventsPerSecond <= 0 || res[1].EventsPerCPUSecond != 5000 {
		t.Fatalf("results %+v", res)
	}
	// --nexmark-limit-go-memory reaches each job.
	var limited []bool
	cfg.Queries, cfg.LimitGoMemory = []string{"q2"}, true
	cfg.Start = func(ctx context.Context, job NexmarkJob) (func() (NexmarkUsage, error), <-chan error, error) {
		limited = append(limited, job.LimitGoMemory)
		return startInProcess(t, false)(ctx, job)
	}
	if _, err := RunNexmark(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if len(limited) != 1 || !limited[0] {
		t.Fatalf("jobs' LimitGoMemory %v, want [true]", limited)
	}
	cfg.LimitGoMemory = false
	cfg.Queries, cfg.Start = []string{"q2"}, startInProcess(t, true)
	if _, err := RunNexmark(ctx, cfg, nil); err == nil || !strings.Contains(err.Error(), "differs from the oracle") {
		t.Fatalf("a wrong q2 passed: %v", err)
	}
	cfg.Queries = []string{"q99"}
	if _, err := RunNexmark(ctx, cfg, nil); err == nil {
		t.Fatal("an unknown query ran")
	}
}
