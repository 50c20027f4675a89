package processor_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// alarm sets an event-time timer 100ms after each record, and forwards the
// key when it fires.
type alarm struct {
	ctx    *topology.ProcessorContext[string, string]
	spec   topology.TimerSpec[string]
	timers *topology.TimerService[string]
}

func (a *alarm) Init(ctx *topology.ProcessorContext[string, string]) error {
	a.ctx, a.timers = ctx, a.spec.Open(ctx)
	return nil
}

func (a *alarm) Process(r topology.Record[string, string]) error {
	return a.timers.RegisterEventTime(r.Key, r.Timestamp+100)
}

func (a *alarm) OnTimer(t topology.Timer[string]) error {
	return a.ctx.Forward(topology.Record[string, string]{Key: t.Key, Value: "fired", Timestamp: t.Time})
}

func (a *alarm) Close() error { return nil }

// TestTimersSurviveRestartAndWipe registers timers, stops the instance,
// deletes its local state, and checks that the timers, restored from their
// changelog together with the committed watermark, fire exactly once when a
// later record moves the watermark past them.
func TestTimersSurviveRestartAndWipe(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out := uniq(t, "alarms-in"), uniq(t, "alarms-out")
	cl := setup(t, addrs, 1, in, out)
	appID, dir := uniq(t, "alarms"), t.TempDir()
	build := func() *topology.Topology {
		tp := topology.New()
		spec := topology.Timers("alarms", serde.String)
		s := topology.Process(topology.From(tp, in, serde.String, serde.String), "alarm",
			func() topology.Processor[string, string, string, string] { return &alarm{spec: spec} }, spec)
		topology.To(s, out, serde.String, serde.String)
		return tp
	}
	produce := func(key string, ts int64) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte("x"), Timestamp: time.UnixMilli(ts)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	run := func(processed int64) {
		t.Helper()
		app, err := processor.New(build(), processor.ApplicationID(appID), processor.Brokers(addrs...), processor.StateDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntil(app, func(a *processor.App) bool { return a.Stats().Processed.Load() >= processed }); err != nil {
			t.Fatal(err)
		}
	}
	fired := func() []string {
		t.Helper()
		rs, err := readback.ReadCommitted(ctx, addrs, out)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, r := range rs {
			keys = append(keys, string(r.Key))
		}
		slices.Sort(keys)
		return keys
	}

	produce("a", 1000)
	produce("b", 2000) // watermark 1999: a (1100) fires
	run(2)
	if f := fired(); !slices.Equal(f, []string{"a"}) {
		t.Fatalf("fired %v, want [a]", f)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// The watermark comes back with the state: c's timer (600) is due at
	// once, though c itself would only make the watermark 499.
	produce("c", 500)
	run(1)
	if f := fired(); !slices.Equal(f, []string{"a", "c"}) {
		t.Fatalf("after restoring from the changelog, fired %v, want [a c]", f)
	}
	produce("d", 5000) // b (2100) is due; a and c must not fire again
	run(1)
	if f := fired(); !slices.Equal(f, []string{"a", "b", "c"}) {
		t.Fatalf("after another restart, fired %v, want [a b c]", f)
	}
}
