package processor_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// addPartitions grows topic to n partitions.
func addPartitions(t *testing.T, addrs []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).UpdatePartitions(ctx, n, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("growing %s to %d partitions: %v", topic, n, err)
	}
}

// produceTo produces values to one partition of topic.
func produceTo(t *testing.T, addrs []string, topic string, p int32, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(v), Value: []byte(v)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// readOutput reads topic's committed records, within 30s.
func readOutput(t *testing.T, addrs []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readback.ReadCommitted(ctx, addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// values returns the records' values as strings.
func values(recs []*kgo.Record) []string {
	vs := make([]string, len(recs))
	for i, r := range recs {
		vs[i] = string(r.Value)
	}
	return vs
}

// TestStatelessInputsMayGrow adds partitions to the input of a stateless
// topology while it runs: the records on the new partitions are processed,
// exactly once.
func TestStatelessInputsMayGrow(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "grow-in"), uniq(t, "grow-out")
	setup(t, addrs, 2, in, out)
	top := topology.New()
	s := topology.From(top, in, serde.String, serde.String)
	topology.To(topology.MapValues(s, strings.ToUpper), out, serde.String, serde.String)
	app, err := processor.New(top, processor.ApplicationID(uniq(t, "grow")), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.CommitInterval(50*time.Millisecond),
		// The group's leader sees new partitions at its next metadata
		// refresh: every 5 minutes by default.
		processor.ClientOptions(kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	produceTo(t, addrs, in, 0, "a", "b")
	grown := false
	err = runUntil(app, func(app *processor.App) bool {
		if !grown && app.Stats().Processed.Load() >= 2 {
			addPartitions(t, addrs, in, 4)
			produceTo(t, addrs, in, 3, "c", "d")
			grown = true
		}
		return app.Stats().Processed.Load() >= 4
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := values(readOutput(t, addrs, out))
	if strings.Join(got, ",") != "A,B,C,D" && strings.Join(got, ",") != "C,D,A,B" {
		t.Errorf("output %v, want A B C D once each", got)
	}
}

// TestStatefulInputsMayNotGrow adds partitions to the input of wordcount,
// whose counts live in the partitions of its repartition topic and store:
// the instance refuses to start on the grown input, naming it, and a
// running instance stops when it sees the new partitions.
func TestStatefulInputsMayNotGrow(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "lines"), uniq(t, "counts")
	setup(t, addrs, 2, in, out)
	app := uniq(t, "wc")
	dir := t.TempDir()
	newApp := func() *processor.App {
		a, err := processor.New(examples.WordCount(in, out, in+"-dlq"), processor.ApplicationID(app),
			processor.Brokers(addrs...), processor.StateDir(dir), processor.CommitInterval(50*time.Millisecond),
			processor.ClientOptions(kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	produceTo(t, addrs, in, 0, "x y")
	grown := false
	err := runUntil(newApp(), func(a *processor.App) bool {
		if !grown && a.Stats().Processed.Load() >= 3 {
			addPartitions(t, addrs, in, 3)
			grown = true
		}
		return false // until it stops by itself
	})
	if !errors.Is(err, processor.ErrRepartitioned) || !strings.Contains(err.Error(), in) {
		t.Fatalf("running on a grown input: Run returned %v, want ErrRepartitioned naming %s", err, in)
	}
	err = runUntil(newApp(), func(*processor.App) bool { return false })
	if !errors.Is(err, processor.ErrRepartitioned) || !strings.Contains(err.Error(), in) || !strings.Contains(err.Error(), "sluice reset") {
		t.Fatalf("starting on a grown input: Run returned %v, want ErrRepartitioned naming %s and the way out", err, in)
	}
	t.Logf("refusal: %v", err)
}

// copying makes an app that copies a new topic of 2 partitions to another,
// committing every interval; it returns the brokers and the input topic.
func copying(t *testing.T, name string, interval time.Duration) (app *processor.App, addrs []string, in string) {
	t.Helper()
	addrs = testBrokers(t)
	app, in = copyingOn(t, addrs, name, interval)
	return app, addrs, in
}

// copyingOn is copying on the brokers at addrs.
func copyingOn(t *testing.T, addrs []string, name string, interval time.Duration) (app *processor.App, in string) {
	t.Helper()
	in, out := uniq(t, name+"-in"), uniq(t, name+"-out")
	setup(t, addrs, 2, in, out)
	top := topology.New()
	topology.To(topology.From(top, in, serde.String, serde.String), out, serde.String, serde.String)
	app, err := processor.New(top, processor.ApplicationID(uniq(t, name)), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.CommitInterval(interval))
	if err != nil {
		t.Fatal(err)
	}
	return app, in
}

// TestAssignedTasksOpenAtOnce: with a commit interval of a minute and no
// input, the instance opens its tasks and is ready as soon as the group
// assigns them, not when its first poll would have ended. The assignment
// ends the poll in progress (instance.enqueue).
func TestAssignedTasksOpenAtOnce(t *testing.T) {
	app, _, _ := copying(t, "prompt", time.Minute)
	start := time.Now()
	var took time.Duration
	err := runUntil(app, func(app *processor.App) bool {
		if st := app.Status(); !st.Ready || len(st.Tasks) != 2 {
			if time.Since(start) > 20*time.Second {
				took = time.Since(start)
				return true // runUntil would wait out the poll: give up here
			}
			return false
		}
		took = time.Since(start)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	// The first poll of a session would end a minute after it began.
	if took > 20*time.Second {
		t.Fatalf("the tasks were not open and ready %v after start, with a commit interval of a minute", took)
	}
	t.Logf("ready with 2 tasks %v after start", took.Round(time.Millisecond))
}

// TestNotReadyBeforeItsAssignment: an instance that has joined its group
// but not yet received its assignment is not ready. The broker holds back
// its SyncGroup answer here; the generation is known from JoinGroup all the
// while, and with a commit interval of 20 ms the loop polls many times
// before the assignment arrives. Once it does, the instance is ready with
// both tasks.
func TestNotReadyBeforeItsAssignment(t *testing.T) {
	if len(testbroker.External()) > 0 {
		t.Skip("holds back the embedded broker's SyncGroup answers")
	}
	b := processor.HookedBroker(t)
	app, _ := copyingOn(t, b.Addrs(), "unassigned", 20*time.Millisecond)
	syncing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.Cluster().ControlKey(kmsg.SyncGroup.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		once.Do(func() { close(syncing) })
		b.Cluster().SleepControl(func() { <-release })
		return nil, nil, false // then the broker answers as always
	})
	var held time.Time
	released, readyAfter := false, false
	err := runUntil(app, func(app *processor.App) bool {
		st := app.Status()
		select {
		case <-syncing:
		default:
			return false // not joined yet
		}
		if held.IsZero() {
			held = time.Now()
		}
		if !released {
			if st.Ready {
				t.Errorf("ready with %d tasks while its assignment was held back", len(st.Tasks))
				close(release) // or stopping waits for the held answer
				released = true
				return true
			}
			if time.Since(held) < time.Second { // 50 commit intervals
				return false
			}
			close(release)
			released = true
		}
		readyAfter = st.Ready && len(st.Tasks) == 2
		return readyAfter
	})
	if !released {
		close(release)
	}
	if err != nil {
		t.Fatal(err)
	}
	if released && !readyAfter && !t.Failed() {
		t.Error("not ready with both tasks after the assignment arrived")
	}
}

// TestIdleInstanceEndsNoTransaction checks that an instance with nothing to
// do leaves its transaction open rather than ending it empty: franz-go
// holds the End after an empty one back for 500ms, which would delay the
// first records after every quiet spell. Then a record goes through.
func TestIdleInstanceEndsNoTransaction(t *testing.T) {
	app, addrs, in := copying(t, "idle", 20*time.Millisecond)
	var readyAt time.Time
	produced := false
	err := runUntil(app, func(app *processor.App) bool {
		if !app.Status().Ready {
			return false
		}
		if readyAt.IsZero() {
			readyAt = time.Now()
		}
		if time.Since(readyAt) < time.Second {
			return false // 50 commit intervals without input
		}
		if !produced {
			if n := app.Stats().Commits.Load() + app.Stats().Aborts.Load(); n != 0 {
				t.Errorf("%d transactions ended while there was nothing to commit", n)
			}
			produceTo(t, addrs, in, 0, "x")
			produced = true
		}
		return app.Stats().Processed.Load() == 1
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := app.Stats().Commits.Load(); c < 1 {
		t.Errorf("%d commits after the record, want at least 1", c)
	}
}

// TestStatelessMergeOfUnequalInputs merges two inputs of 2 and 3 partitions
// in a stateless topology, which needs no co-partitioning: every record of
// both gets through once.
func TestStatelessMergeOfUnequalInputs(t *testing.T) {
	addrs := testBrokers(t)
	a, b, out := uniq(t, "merge-a"), uniq(t, "merge-b"), uniq(t, "merge-out")
	setup(t, addrs, 2, a, out)
	setup(t, addrs, 3, b)
	top := topology.New()
	merged := topology.Merge(topology.From(top, a, serde.String, serde.String), topology.From(top, b, serde.String, serde.String))
	topology.To(merged, out, serde.String, serde.String)
	app, err := processor.New(top, processor.ApplicationID(uniq(t, "merge")), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.CommitInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	produceTo(t, addrs, a, 1, "a1")
	produceTo(t, addrs, b, 2, "b2")
	if err := runUntil(app, func(app *processor.App) bool { return app.Stats().Processed.Load() >= 2 }); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := values(readOutput(t, addrs, out))
	slices.Sort(got)
	if strings.Join(got, ",") != "a1,b2" {
		t.Errorf("output %v, want a1 and b2 once each", got)
	}
}
