package examples_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/examples/nexmark"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/topology"
)

// The Nexmark tests' input: 20,000 events at 500 events/s of event time,
// so that 40 s of event time cross several of the queries' 10 s windows
// (at Nexmark's default 10,000/s they would span 2 s). Under the race
// detector, 5,000 events over the same 40 s.
var nexmarkTestConfig = func() nexmark.Config {
	if raceEnabled {
		return nexmark.Config{Seed: 20, Rate: 125, Events: 5_000}
	}
	return nexmark.Config{Seed: 20, Rate: 500, Events: 20_000}
}()

const nexmarkTestPartitions = 3

var nexmarkEvents = sync.OnceValues(func() ([]nexmark.Event, error) { return nexmark.Generate(nexmarkTestConfig) })

func testEvents(t *testing.T) []nexmark.Event {
	t.Helper()
	evs, err := nexmarkEvents()
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// nexmarkSetup starts a cluster, creates the input topics and the output
// topic, and writes the test events in transactions of 500, with an
// aborted transaction of decoys after every second one (read_committed
// must hide them: a decoy read would change every query's output).
func nexmarkSetup(t *testing.T, q string) (addrs []string, tp examples.NexmarkTopics) {
	t.Helper()
	addrs = testbroker.Addrs(t)
	prefix := testbroker.Unique(t, "nexmark-"+q+"-")
	tp = examples.NexmarkTopics{Topics: nexmark.Topics{Person: prefix + "-person", Auction: prefix + "-auction", Bid: prefix + "-bid"}, Output: prefix + "-out"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{tp.Person, tp.Auction, tp.Bid, tp.Output} {
		if err := broker.CreateTopic(ctx, addrs, topic, nexmarkTestPartitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID(prefix+"-writer"), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := nexmark.Write(ctx, cl, tp.Topics, testEvents(t), 500, 2); err != nil {
		t.Fatal(err)
	}
	return addrs, tp
}

// readOutput returns the committed output records.
func readOutput(t *testing.T, addrs []string, topic string) []nexmark.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := readback.ReadCommitted(ctx, addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]nexmark.Record, len(rs))
	for i, r := range rs {
		out[i] = nexmark.Record{Key: string(r.Key), Value: r.Value}
	}
	return out
}

// nexmarkBounded reports whether the query runs bounded. The others
// repartition without windowed state, which a bounded run refuses
// (processor.ErrBoundedUnsupported): they run streaming until their output
// matches the oracle.
var nexmarkBounded = map[string]bool{"q0": true, "q1": true, "q2": true, "q5": true, "q7": true, "q8": true, "q11": true, "q19": true, "q20": true}

// runNexmark runs the query's topology over the test events and returns
// the comparison of its committed output with the oracle's.
func runNexmark(t *testing.T, q string, build func(examples.NexmarkTopics) *topology.Topology) error {
	t.Helper()
	want, err := nexmark.Oracle(q, testEvents(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Records) == 0 {
		t.Fatalf("%s: the oracle expects no output: the input does not exercise the query", q)
	}
	addrs, tp := nexmarkSetup(t, q)
	opts := []processor.Opt{processor.ApplicationID(testbroker.Unique(t, "nexmark-"+q+"-")),
		processor.Brokers(addrs...), processor.StateDir(t.TempDir()), processor.CommitInterval(100 * time.Millisecond)}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	if nexmarkBounded[q] {
		app, err := processor.New(build(tp), append(opts, processor.Bounded())...)
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Run(ctx); err != nil {
			t.Fatalf("%s: bounded run: %v", q, err)
		}
		got := readOutput(t, addrs, tp.Output)
		t.Logf("%s: %d output records, the oracle's %d (mode %d)", q, len(got), len(want.Records), want.Mode)
		return nexmark.Check(want, got)
	}
	app, err := processor.New(build(tp), opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s: run: %v", q, err)
		}
	}()
	// Streaming: the output settles on the oracle's once every input
	// record is processed; until then, the latest difference.
	var last error
	for range 200 {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("%s: run ended early: %v", q, err)
		case <-ctx.Done():
			return fmt.Errorf("%s: output did not settle on the oracle's: %w", q, last)
		case <-time.After(250 * time.Millisecond):
		}
		got := readOutput(t, addrs, tp.Output)
		if last = nexmark.Check(want, got); last == nil {
			t.Logf("%s: %d output records, the oracle's %d (mode %d)", q, len(got), len(want.Records), want.Mode)
			return nil
		}
	}
	return last
}

// TestNexmarkMatchesOracle runs each Nexmark query over the same 20,000
// events (with aborted decoy transactions between them) on the in-process
// broker, exactly_once, and compares its committed output with the
// oracle's: every record exactly once for append-only outputs, the final
// value per key for tables.
func TestNexmarkMatchesOracle(t *testing.T) {
	for _, q := range nexmark.Queries {
		t.Run(q, func(t *testing.T) {
			build := func(tp examples.NexmarkTopics) *topology.Topology {
				tpl, _ := examples.NexmarkQuery(q, tp)
				return tpl
			}
			if err := runNexmark(t, q, build); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestNexmarkCatchesAWrongQuery is the negative control of the test above
// on a real run: q2 with the wrong modulus, run the same way, is caught.
func TestNexmarkCatchesAWrongQuery(t *testing.T) {
	wrong := func(tp examples.NexmarkTopics) *topology.Topology {
		return examples.NexmarkQ2Modulus(tp, nexmark.Q2Modulus+1)
	}
	err := runNexmark(t, "q2", wrong)
	if err == nil || !strings.Contains(err.Error(), "differs from the oracle") {
		t.Fatalf("a q2 with the wrong modulus passed the check: %v", err)
	}
	t.Logf("caught, as it should be: %.300s", err)
}

// TestNexmarkAcrossRebalances runs stateful queries on two instances of
// one application while the input is still being written: instance A
// alone on the first third, B joining for the second (a rebalance moves
// tasks and their stores to B), A stopping before the last (B takes over
// A's tasks and restores their state from the changelogs). The committed
// output must still be exactly the oracle's: nothing lost, nothing twice
// (q20 is append-only, so a replayed join would show as a duplicate).
func TestNexmarkAcrossRebalances(t *testing.T) {
	for _, q := range []string{"q20", "q4"} {
		t.Run(q, func(t *testing.T) { testNexmarkRebalance(t, q) })
	}
}

func testNexmarkRebalance(t *testing.T, q string) {
	evs := testEvents(t)
	want, err := nexmark.Oracle(q, evs)
	if err != nil {
		t.Fatal(err)
	}
	addrs := testbroker.Addrs(t)
	prefix := testbroker.Unique(t, "nexmark-rb-"+q+"-")
	tp := examples.NexmarkTopics{Topics: nexmark.Topics{Person: prefix + "-person", Auction: prefix + "-auction", Bid: prefix + "-bid"}, Output: prefix + "-out"}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	for _, topic := range []string{tp.Person, tp.Auction, tp.Bid, tp.Output} {
		if err := broker.CreateTopic(ctx, addrs, topic, nexmarkTestPartitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID(prefix+"-writer"), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	write := func(part int) {
		t.Helper()
		n := len(evs)
		if err := nexmark.Write(ctx, cl, tp.Topics, evs[part*n/3:(part+1)*n/3], 500, 2); err != nil {
			t.Fatal(err)
		}
	}
	tpl, _ := examples.NexmarkQuery(q, tp)
	appID := prefix + "-app"
	start := func(name string) (stop func()) {
		app, err := processor.New(tpl, processor.ApplicationID(appID), processor.Brokers(addrs...),
			processor.StateDir(t.TempDir()), processor.CommitInterval(100*time.Millisecond), processor.InstanceID(name))
		if err != nil {
			t.Fatal(err)
		}
		actx, acancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- app.Run(actx) }()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				acancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("instance %s: %v", name, err)
				}
			})
		}
		t.Cleanup(stop)
		return stop
	}
	// waitOutput waits until the output has more than n records.
	waitOutput := func(n int) int {
		t.Helper()
		for range 400 {
			if got := len(readOutput(t, addrs, tp.Output)); got > n {
				return got
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: no output past %d records", q, n)
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatalf("%s: no output past %d records", q, n)
		return 0
	}
	write(0)
	stopA := start("a")
	seen := waitOutput(0)
	stopB := start("b")
	write(1)
	seen = waitOutput(seen)
	stopA()
	write(2)
	var last error
	for range 400 {
		if last = nexmark.Check(want, readOutput(t, addrs, tp.Output)); last == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: output did not settle on the oracle's: %v", q, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
	if last != nil {
		t.Fatal(last)
	}
	stopB()
}
