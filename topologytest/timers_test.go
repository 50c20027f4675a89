package topologytest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// reminder sets, per key, an event-time timer 100ms after the key's latest
// record (moving it on every record) and a processing-time timer a second
// after the key's first record; each timer forwards "<key> <domain>@<time>".
type reminder struct {
	ctx    *topology.ProcessorContext[string, string]
	spec   topology.TimerSpec[string]
	timers *topology.TimerService[string]
	last   topology.Materialization[string, int64]
	kv     *topology.KV[string, int64]
	wall   *int64
}

func (r *reminder) Init(ctx *topology.ProcessorContext[string, string]) error {
	r.ctx, r.timers, r.kv = ctx, r.spec.Open(ctx), r.last.Open(ctx)
	return nil
}

func (r *reminder) Process(rec topology.Record[string, string]) error {
	prev, ok, err := r.kv.Get(rec.Key)
	if err != nil {
		return err
	}
	if ok {
		if err := r.timers.DeleteEventTime(rec.Key, prev+100); err != nil {
			return err
		}
	} else if err := r.timers.RegisterProcessingTime(rec.Key, *r.wall+1000); err != nil {
		return err
	}
	if err := r.kv.Put(rec.Key, rec.Timestamp); err != nil {
		return err
	}
	return r.timers.RegisterEventTime(rec.Key, rec.Timestamp+100)
}

func (r *reminder) OnTimer(t topology.Timer[string]) error {
	d := "event"
	if t.Domain == topology.ProcessingTimeDomain {
		d = "processing"
	}
	return r.ctx.Forward(topology.Record[string, string]{Key: t.Key, Value: fmt.Sprintf("%s@%d", d, t.Time), Timestamp: t.Time})
}

func (r *reminder) Close() error { return nil }

func TestTimersFireOncePerKeyInOrder(t *testing.T) {
	wall := time.UnixMilli(1_000_000)
	now := wall.UnixMilli()
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	spec := topology.Timers("reminders", serde.String)
	last := topology.KeyValueStore("last-seen", serde.String, serde.Int64)
	out := topology.Process(in, "reminder", func() topology.Processor[string, string, string, string] {
		return &reminder{spec: spec, last: last, wall: &now}
	}, spec, last)
	topology.To(out, "out", serde.String, serde.String)
	d, err := topologytest.New(tp, topologytest.WallClock(wall))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	read := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
	got := func() string {
		rs, err := read.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, r := range rs {
			s = append(s, r.Key+" "+r.Value)
		}
		return fmt.Sprint(s)
	}
	steps := []struct {
		key  string
		ts   int64
		want string
	}{
		{"a", 1000, "[]"},
		{"b", 1050, "[]"}, // watermark 1049
		{"a", 1080, "[]"}, // a's timer moves from 1100 to 1180
		{"c", 1101, "[]"}, // wm 1100: a's old timer was deleted
		{"c", 1151, "[b event@1150]"},
		{"c", 1300, "[a event@1180]"}, // c's timers at 1201 and 1251 were moved to 1400
		{"c", 1500, "[]"},             // the record moves c's timer before its watermark reaches 1400
		{"d", 1701, "[c event@1600]"},
	}
	for i, s := range steps {
		if err := pipe.Pipe(s.key, "x", s.ts); err != nil {
			t.Fatal(err)
		}
		if g := got(); g != s.want {
			t.Errorf("step %d (%s@%d): fired %s, want %s", i, s.key, s.ts, g, s.want)
		}
	}
	// Processing-time timers wait for the wall clock.
	if err := d.AdvanceWallClock(999 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if g := got(); g != "[]" {
		t.Errorf("processing-time timers fired early: %s", g)
	}
	if err := d.AdvanceWallClock(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("[a processing@%d b processing@%d c processing@%d d processing@%d]", now+1000, now+1000, now+1000, now+1000)
	if g := got(); g != want {
		t.Errorf("processing-time timers: %s, want %s", g, want)
	}
	if err := d.AdvanceWallClock(time.Hour); err != nil {
		t.Fatal(err)
	}
	if g := got(); g != "[]" {
		t.Errorf("timers fired twice: %s", g)
	}
}

// noTimer is a processor that declares timers but cannot be told of them.
type noTimer struct{}

func (noTimer) Init(*topology.ProcessorContext[string, string]) error { return nil }
func (noTimer) Process(topology.Record[string, string]) error         { return nil }
func (noTimer) Close() error                                          { return nil }

func TestTimersNeedOnTimerAndTheInputKeyType(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	topology.Process(in, "p", func() topology.Processor[string, string, string, string] { return noTimer{} },
		topology.Timers("t", serde.Int64))
	if _, err := tp.Build(); !errors.Is(err, topology.ErrTypeMismatch) {
		t.Fatalf("timers keyed by int64 on a string-keyed processor: Build returned %v, want ErrTypeMismatch", err)
	}

	tp = topology.New()
	in = topology.From(tp, "in", serde.String, serde.String)
	topology.Process(in, "p", func() topology.Processor[string, string, string, string] { return noTimer{} },
		topology.Timers("t", serde.String))
	d, err := topologytest.New(tp)
	if err == nil {
		d.Close()
		t.Fatal("a processor with timers and no OnTimer method was started")
	}
	if !strings.Contains(err.Error(), "no OnTimer method") {
		t.Fatalf("starting a processor with timers and no OnTimer: %v", err)
	}
}
