package processor_test

import (
	"context"
	"strings"
	"testing"
	"time"

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
	app, err := processor.New(top, processor.ApplicationID(uniq(t, "missing")), processor.Brokers(brokers...), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = app.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "sluice topic create "+in) {
		t.Fatalf("Run with source topic %s missing: %v, want an error saying sluice topic create %s", in, err, in)
	}
}
