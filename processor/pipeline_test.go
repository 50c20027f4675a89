package processor_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// pipelineProbe is shared by the probes of all tasks.
type pipelineProbe struct {
	overlaps  atomic.Int64 // a task entered while it was in use
	reorders  atomic.Int64 // a partition's offset not above the last seen
	ticks     atomic.Int64 // wall-clock punctuations
	running   atomic.Int64 // tasks processing a record now
	most      atomic.Int64 // the most tasks processing records at once
	processed atomic.Int64
	// With gate set, a task's first record waits until another task has
	// begun (at most gateWait): the loop must poll while a task is busy.
	gate     bool
	started  atomic.Int64 // tasks that have begun processing
	timedOut atomic.Int64 // first records that waited gateWait in vain
}

const gateWait = 10 * time.Second

// taskProbe is one task's Processor: it notes when the task is entered
// while in use (by Process or a wall-clock punctuation) and when a
// partition's records arrive out of order.
type taskProbe struct {
	p    *pipelineProbe
	ctx  *topology.ProcessorContext[string, string]
	busy atomic.Bool
	last map[int32]int64
}

func (tp *taskProbe) enter() {
	if !tp.busy.CompareAndSwap(false, true) {
		tp.p.overlaps.Add(1)
	}
}

func (tp *taskProbe) exit() { tp.busy.Store(false) }

func (tp *taskProbe) Init(ctx *topology.ProcessorContext[string, string]) error {
	tp.ctx, tp.last = ctx, map[int32]int64{}
	ctx.Schedule(time.Millisecond, topology.WallClockTime, func(int64) error {
		tp.enter()
		defer tp.exit()
		tp.p.ticks.Add(1)
		time.Sleep(100 * time.Microsecond)
		return nil
	})
	return nil
}

func (tp *taskProbe) Process(r topology.Record[string, string]) error {
	tp.enter()
	defer tp.exit()
	n := tp.p.running.Add(1)
	defer tp.p.running.Add(-1)
	for m := tp.p.most.Load(); n > m && !tp.p.most.CompareAndSwap(m, n); m = tp.p.most.Load() {
	}
	_, partition, offset, _ := tp.ctx.RecordMetadata()
	first := len(tp.last) == 0
	if last, ok := tp.last[partition]; ok && offset <= last {
		tp.p.reorders.Add(1)
	}
	tp.last[partition] = offset
	if first {
		tp.p.started.Add(1)
		for deadline := time.Now().Add(gateWait); tp.p.gate && tp.p.started.Load() < 2; {
			if time.Now().After(deadline) {
				tp.p.timedOut.Add(1)
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	if tp.p.processed.Add(1)%10 == 0 {
		time.Sleep(time.Millisecond) // the task stays busy over polls
	}
	return tp.ctx.Forward(r)
}

func (tp *taskProbe) Close() error { return nil }

// TestPipelineKeepsEachTaskItsOwn: the tasks process while the loop polls
// again, and a task's later polls queue behind its earlier ones, yet a task
// is only ever in one goroutine's hands, its partitions' records come in
// offset order, and its wall-clock ticks never run beside its processing.
// The fetches hold 1 KiB a partition and the input comes in batches larger
// than that, so a fetch holds one partition and a busy task's next records
// arrive while it still processes. Transactions end every 100 ms, so the
// loop drains busy tasks to commit.
func TestPipelineKeepsEachTaskItsOwn(t *testing.T) {
	probe := &pipelineProbe{}
	st := runPipelineProbe(t, probe, 2000, 100*time.Millisecond)
	if n := probe.overlaps.Load(); n > 0 {
		t.Errorf("a task was entered %d times while in use", n)
	}
	if n := probe.reorders.Load(); n > 0 && st.Aborts.Load() == 0 {
		t.Errorf("%d records came at or below an offset their task had seen, with no abort", n)
	}
	if probe.ticks.Load() == 0 {
		t.Error("no wall-clock punctuation ran")
	}
}

// TestPipelinePollsWhileATaskProcesses: a task's first record waits until
// another task has begun, which happens only if the loop polls again and
// hands the other task its records while the first is busy. The
// transaction is long, so no commit drains the busy task first, and a
// partition holds fewer records than the first poll may take (1,000), so
// the records in hand leave the loop room to poll.
func TestPipelinePollsWhileATaskProcesses(t *testing.T) {
	probe := &pipelineProbe{gate: true}
	runPipelineProbe(t, probe, 1000, time.Minute)
	if n := probe.timedOut.Load(); n > 0 {
		t.Errorf("a task's first record waited %v for another task to begin: the loop did not poll while it processed", gateWait)
	}
	if probe.most.Load() < 2 {
		t.Errorf("at most %d task processed at once, want the tasks of successive polls at once", probe.most.Load())
	}
	if n := probe.overlaps.Load(); n > 0 {
		t.Errorf("a task was entered %d times while in use", n)
	}
}

// runPipelineProbe runs the probe over records in 2 partitions with 4
// goroutines and fetches of 1 KiB a partition, checks that every record
// was committed to the output, and returns the instance's stats.
func runPipelineProbe(t *testing.T, probe *pipelineProbe, records int, commit time.Duration) *processor.Stats {
	t.Helper()
	const partitions = 2
	addrs := testBrokers(t)
	in, out := uniq(t, "pipeline-in"), uniq(t, "pipeline-out")
	cl := setup(t, addrs, partitions, in, out)
	recs := make([]*kgo.Record, records)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "value-%d", i)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	top := topology.New()
	s := topology.Process(topology.From(top, in, serde.String, serde.String), "probe",
		func() topology.Processor[string, string, string, string] { return &taskProbe{p: probe} })
	topology.To(s, out, serde.String, serde.String)
	app, stop := runApp(t, addrs, top, uniq(t, "pipeline"), t.TempDir(),
		processor.StreamThreads(2*partitions), processor.MaxPartitionFetchBytes(1024),
		processor.CommitInterval(commit))
	st := app.Stats()
	waitFor(t, 2*time.Minute, "the input processed", func() bool { return probe.processed.Load() >= int64(records) })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := committedCount(t, addrs, out); n != records {
		t.Errorf("%d records committed to the output, want %d", n, records)
	}
	t.Logf("processed %d, ticks %d, at most %d tasks at once, %d aborts", probe.processed.Load(), probe.ticks.Load(), probe.most.Load(), st.Aborts.Load())
	return st
}
