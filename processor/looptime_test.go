package processor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestLoopTime: the instance loop's wall time is counted in the phase where
// it is spent. The job sleeps in a function before a folded count and in
// one after it. The first runs as records are processed, so its sleeps are
// processing; the second runs on the updates the count holds until the
// commit, so its sleeps are the commit's flush. Once the input is consumed
// the loop waits in poll. The phases take turns, so they add up to no more
// than the run's wall time.
func TestLoopTime(t *testing.T) {
	const (
		partitions = 2
		records    = 200
		keys       = 40
		before     = time.Millisecond     // per input record, in process
		after      = 3 * time.Millisecond // per folded update, in flush
	)
	addrs := testBrokers(t)
	in, out := uniq(t, "loop-in"), uniq(t, "loop-out")
	cl := setup(t, addrs, partitions, in, out)
	recs := make([]*kgo.Record, records)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte("v")}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	top := topology.New()
	s := topology.MapValues(topology.From(top, in, serde.String, serde.String), func(v string) string {
		time.Sleep(before)
		return v
	})
	c := topology.Count(topology.GroupByKey(s), topology.Materialized("loop-counts", serde.String, serde.Int64))
	counts := topology.MapValues(topology.ToStream(c), func(n int64) int64 {
		time.Sleep(after)
		return n
	})
	topology.To(counts, out, serde.String, serde.Int64)
	began := time.Now()
	app, stop := runApp(t, addrs, top, uniq(t, "loop"), t.TempDir(),
		processor.CommitInterval(100*time.Millisecond), processor.FoldUpdates(true))
	var once sync.Once
	stopOnce := func() {
		once.Do(func() {
			if err := stop(); err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	defer stopOnce()
	st := app.Stats()
	waitFor(t, time.Minute, "the input committed", func() bool { return st.Processed.Load() >= records })
	idle := st.LoopTime()[processor.PhasePoll]
	waitFor(t, time.Minute, "the loop idle in poll", func() bool { return st.LoopTime()[processor.PhasePoll]-idle >= 300*time.Millisecond })
	stopOnce()
	ran := time.Since(began)

	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	updates, err := readback.ReadCommitted(ctx2, addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	lt := st.LoopTime()
	t.Logf("loop time %v over %v; %d folded updates out", lt, ran, len(updates))
	// Each partition's task runs on a goroutine of its own at most, so a
	// phase takes at least its sleeps over the number of partitions.
	if want := records * before / partitions; lt[processor.PhaseProcess] < want {
		t.Errorf("process %v, want at least %v: the sleeps before the count", lt[processor.PhaseProcess], want)
	}
	if want := time.Duration(len(updates)) * after / partitions; len(updates) < keys || lt[processor.PhaseFlush] < want {
		t.Errorf("flush %v with %d updates, want at least %v: the sleeps after the count", lt[processor.PhaseFlush], len(updates), want)
	}
	for _, p := range []string{processor.PhaseEnd, processor.PhaseApply} {
		if lt[p] <= 0 {
			t.Errorf("%s took %v over %d commits", p, lt[p], st.Commits.Load())
		}
	}
	var sum time.Duration
	for _, p := range processor.LoopPhases {
		sum += lt[p]
	}
	if sum > ran {
		t.Errorf("the phases add up to %v, more than the run's %v: one counted twice", sum, ran)
	}
	if len(lt) != len(processor.LoopPhases) {
		t.Errorf("LoopTime has %d phases, want %d", len(lt), len(processor.LoopPhases))
	}
}
