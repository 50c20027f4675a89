// These tests start forks from savepoints the real coordinator took, where the other tests of the
// start use takeSavepoint, a test-only stand-in.

package processor_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
)

// TestFromSavepointOfTheCoordinatorForkEqualsUninterrupted: A runs over
// the first part of the input; the coordinator takes a savepoint of it
// (stopping it); B forks from the savepoint over the rest; A's output and
// B's equal an uninterrupted run's, key by key (runFork's comparison).
func TestFromSavepointOfTheCoordinatorForkEqualsUninterrupted(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  forkJob
	}{{"pageviews", pageViewsJob()}, {"billing", billingJob()}} {
		t.Run(tc.name, func(t *testing.T) {
			job := tc.job
			addrs := testBrokers(t)
			in := uniq(t, "rc-in")
			if err := broker.CreateTopic(context.Background(), addrs, in, 3, nil); err != nil {
				t.Fatal(err)
			}
			outsA, outsB, outsC := topicsNamed(t, addrs, "rc-a", job.outputs, 2), topicsNamed(t, addrs, "rc-b", job.outputs, 2), topicsNamed(t, addrs, "rc-c", job.outputs, 2)
			recs := job.records()
			cut := len(recs) * 11 / 20
			produceAll(t, addrs, in, recs[:cut])
			appA := uniq(t, "rc-a")
			stop := startApp(t, addrs, job.build(in, outsA), appA, t.TempDir())
			waitCaughtUp(t, addrs, planOf(t, job.build(in, outsA)), appA)
			dir := filepath.Join(t.TempDir(), "sp")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if _, err := processor.TakeSavepoint(ctx, appA, dir, processor.Brokers(addrs...)); err != nil {
				t.Fatal(err)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			produceAll(t, addrs, in, recs[cut:])
			run(t, addrs, job, in, outsB, uniq(t, "rc-b"), processor.FromSavepoint(dir), processor.AllowOtherApp())
			run(t, addrs, job, in, outsC, uniq(t, "rc-c"))
			a, b, c := readOutputs(t, addrs, outsA), readOutputs(t, addrs, outsB), readOutputs(t, addrs, outsC)
			got := make([]map[string][]string, job.outputs)
			for i := range got {
				got[i] = concat(a[i], b[i])
			}
			if d := job.compare(got, c); d != "" {
				t.Fatalf("differs: %s", d)
			}
		})
	}
}
