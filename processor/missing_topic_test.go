package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestMissingSourceTopicSaysHowToCreateIt: an instance whose source topic
// does not exist stops at once, naming the topic and the command that
// creates it.
func TestMissingSourceTopicSaysHowToCreateIt(t *testing.T) {
	brokers := testBrokers(t)
	in := uniq(t, "absent")
	top := topology.New()
	topology.To(topology.From(top, in, serde.String, serde.String), uniq(t, "out"), serde.String, serde.String)
	err := runMissing(t, brokers, top)
	if err == nil || !strings.Contains(err.Error(), "sluice topic create "+in) {
		t.Fatalf("Run with source topic %s missing: %v, want an error saying sluice topic create %s", in, err, in)
	}
}

// TestMissingSourceTopicsAreAllNamed: with several source topics missing,
// the error names each of them (not only the first) in one create command;
// the one that exists is not named.
func TestMissingSourceTopicsAreAllNamed(t *testing.T) {
	brokers := testBrokers(t)
	a, b, present := uniq(t, "absent-a"), uniq(t, "absent-b"), uniq(t, "present")
	if err := broker.CreateTopic(context.Background(), brokers, present, 1, nil); err != nil {
		t.Fatal(err)
	}
	top := topology.New()
	from := func(name string) topology.Stream[string, string] {
		return topology.From(top, name, serde.String, serde.String)
	}
	merged := topology.Merge(topology.Merge(from(a), from(present)), from(b))
	topology.To(merged, uniq(t, "out"), serde.String, serde.String)
	err := runMissing(t, brokers, top)
	if err == nil || !strings.Contains(err.Error(), "sluice topic create "+a+" "+b+" ") || strings.Contains(err.Error(), present) {
		t.Fatalf("Run with source topics %s and %s missing: %v, want an error saying sluice topic create %s %s, and not naming %s", a, b, err, a, b, present)
	}
}

// runMissing runs top until it stops, which it must do at once.
func runMissing(t *testing.T, brokers []string, top *topology.Topology) error {
	t.Helper()
	app, err := processor.New(top, processor.ApplicationID(uniq(t, "missing")), processor.Brokers(brokers...), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return app.Run(ctx)
}
