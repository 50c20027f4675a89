package processor_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestStreamThreadsProcessTasksAtOnce counts keys over four partitions with
// num.stream.threads 4: records of different tasks are processed at the same
// time, and every key's counts are still 1, 2, ..., n, each once. The
// negative control runs one thread, under which no two records may ever be
// processed at once.
func TestStreamThreadsProcessTasksAtOnce(t *testing.T) {
	for _, threads := range []int{4, 1} {
		t.Run(strconv.Itoa(threads), func(t *testing.T) {
			most, outputs := countWithThreads(t, threads, false)
			if outputs != 400 {
				t.Errorf("%d outputs, want one per input, 400", outputs)
			}
			if threads > 1 && most < 2 {
				t.Errorf("with %d threads at most %d record was processed at a time, want records of several tasks at once", threads, most)
			}
			if threads == 1 && most != 1 {
				t.Errorf("with 1 thread %d records were processed at once", most)
			}
		})
	}
}

// TestFoldUpdates counts with fold.updates on: each key's updates within a
// commit go downstream as one, so there are fewer outputs than inputs, each
// key's counts still rise and end exact. (TestStreamThreadsProcessTasksAtOnce
// is the control: with it off, one output per input.)
func TestFoldUpdates(t *testing.T) {
	_, outputs := countWithThreads(t, 2, true)
	if outputs >= 400 {
		t.Errorf("%d outputs for 400 inputs over 20 keys: nothing folded", outputs)
	}
}

// countWithThreads runs the count and checks its output: every key's counts
// rise by one (with fold, by at least one) and end at the key's inputs. It
// returns the most records that were inside the topology at once, and how
// many outputs there were.
func countWithThreads(t *testing.T, threads int, fold bool) (most int64, outputs int) {
	const partitions, perPartition, keys = 4, 100, 5
	addrs := testBrokers(t)
	in, out := uniq(t, "threads-in"), uniq(t, "threads-out")
	setup(t, addrs, partitions, in, out)
	want := map[string]int64{}
	for p := range int32(partitions) {
		var vs []string
		for i := range perPartition {
			k := fmt.Sprintf("p%d-k%d", p, i%keys)
			vs = append(vs, k)
			want[k]++
		}
		produceTo(t, addrs, in, p, vs...)
	}

	// Each record waits inside the topology, up to 2ms, until two records
	// have been inside at once: a record of another task can only come in
	// meanwhile if the tasks run on goroutines of their own.
	var inside, inMost atomic.Int64
	top := topology.New()
	s := topology.MapValues(topology.From(top, in, serde.String, serde.String), func(v string) string {
		n := inside.Add(1)
		for m := inMost.Load(); n > m && !inMost.CompareAndSwap(m, n); m = inMost.Load() {
		}
		for deadline := time.Now().Add(2 * time.Millisecond); inMost.Load() < 2 && time.Now().Before(deadline); {
		}
		inside.Add(-1)
		return v
	})
	counts := topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), out, serde.String, serde.Int64)
	app, err := processor.New(top, processor.ApplicationID(uniq(t, "threads")), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.CommitInterval(50*time.Millisecond), processor.StreamThreads(threads), processor.FoldUpdates(fold))
	if err != nil {
		t.Fatal(err)
	}
	total := int64(partitions * perPartition)
	if err := runUntil(app, func(app *processor.App) bool { return app.Stats().Processed.Load() >= total }); err != nil {
		t.Fatalf("Run: %v", err)
	}

	next := map[string]int64{}
	for _, r := range readOutput(t, addrs, out) {
		outputs++
		k := string(r.Key)
		n, err := serde.Int64.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if n != next[k]+1 && !(fold && n > next[k]) {
			t.Errorf("key %s: count %d after %d", k, n, next[k])
		}
		next[k] = n
	}
	for k, n := range want {
		if next[k] != n {
			t.Errorf("key %s: counted to %d, want %d", k, next[k], n)
		}
	}
	return inMost.Load(), outputs
}
