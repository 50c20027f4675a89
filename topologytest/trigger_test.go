package topologytest_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// triggerStep pipes one record (or, with wall > 0, advances the wall clock
// by wall ms) and expects these results ("key[start]=sum").
type triggerStep struct {
	key  string
	ts   int64
	v    int64
	wall int64
	want string
}

func runTriggerSteps(t *testing.T, w topology.Windows, opts []topology.WindowOption, steps []triggerStep) {
	t.Helper()
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.Int64)
	ws := topology.WindowedBy(topology.GroupByKey(in), w, opts...)
	sums := topology.ReduceWindows(ws, func(a, b int64) int64 { return a + b }, topology.Materialized("sums", serde.String, serde.Int64))
	topology.To(topology.Map(topology.ToStream(sums), func(w topology.Windowed[string], n int64) (string, string) {
		start := fmt.Sprint(w.Window.Start)
		if w.Window == window.GlobalBounds {
			start = "global"
		}
		return fmt.Sprintf("%s[%s]=%d", w.Key, start, n), ""
	}), "out", serde.String, serde.String)
	d, err := topologytest.New(tp, topologytest.WallClock(time.UnixMilli(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64)
	out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
	for i, s := range steps {
		if s.wall > 0 {
			err = d.AdvanceWallClock(time.Duration(s.wall) * time.Millisecond)
		} else {
			err = pipe.Pipe(s.key, s.v, s.ts)
		}
		if err != nil {
			t.Fatal(err)
		}
		rs, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Key)
		}
		if fmt.Sprint(got) != s.want {
			t.Errorf("step %d: fired %v, want %s", i, got, s.want)
		}
	}
}

func TestTriggers(t *testing.T) {
	tumbling := window.Tumbling(100 * time.Millisecond)
	cases := []struct {
		name  string
		w     topology.Windows
		opts  []topology.WindowOption
		steps []triggerStep
	}{
		{"on watermark (default)", tumbling, nil, []triggerStep{
			{key: "a", ts: 10, v: 1, want: "[]"},
			{key: "a", ts: 20, v: 2, want: "[]"},
			{key: "b", ts: 100, v: 5, want: "[a[0]=3]"}, // wm 99 = end-1
			{key: "a", ts: 30, v: 4, want: "[]"},        // past the lateness (0): late
		}},
		{"early every 2 records, then on watermark", tumbling, []topology.WindowOption{topology.WithTrigger(window.EarlyEvery(2))}, []triggerStep{
			{key: "a", ts: 10, v: 1, want: "[]"},
			{key: "a", ts: 20, v: 2, want: "[a[0]=3]"},
			{key: "a", ts: 30, v: 3, want: "[]"},
			{key: "a", ts: 99, v: 4, want: "[a[0]=10]"},  // early (4th record)
			{key: "a", ts: 100, v: 1, want: "[a[0]=10]"}, // and complete
		}},
		{"purging count: tumbling count windows over the global window", window.Global(),
			[]topology.WindowOption{topology.WithTrigger(window.Purging(window.CountTrigger(3)))}, []triggerStep{
				{key: "a", ts: 10, v: 1, want: "[]"},
				{key: "a", ts: 5, v: 2, want: "[]"}, // no lateness in the global window
				{key: "b", ts: 11, v: 9, want: "[]"},
				{key: "a", ts: 12, v: 3, want: "[a[global]=6]"},
				{key: "a", ts: 13, v: 4, want: "[]"},
				{key: "a", ts: 14, v: 5, want: "[]"},
				{key: "a", ts: 15, v: 6, want: "[a[global]=15]"},
			}},
		{"accumulating count over the global window", window.Global(),
			[]topology.WindowOption{topology.WithTrigger(window.CountTrigger(2))}, []triggerStep{
				{key: "a", ts: 10, v: 1, want: "[]"},
				{key: "a", ts: 11, v: 2, want: "[a[global]=3]"},
				{key: "a", ts: 12, v: 3, want: "[]"},
				{key: "a", ts: 13, v: 4, want: "[a[global]=10]"},
			}},
		{"processing time", tumbling, []topology.WindowOption{topology.WithTrigger(window.ProcessingTime())}, []triggerStep{
			{key: "a", ts: 10, v: 1, want: "[]"},
			{key: "a", ts: 50, v: 1, want: "[]"},
			{wall: 98, want: "[]"},
			{wall: 1, want: "[a[0]=2]"}, // wall clock 99 = end-1 of [0,100)
			{key: "a", ts: 150, v: 1, want: "[]"},
			{wall: 400, want: "[a[100]=1]"},
		}},
		{"early every interval", tumbling, []topology.WindowOption{topology.WithTrigger(window.EarlyEveryInterval(50 * time.Millisecond))}, []triggerStep{
			{key: "a", ts: 10, v: 1, want: "[]"},
			{wall: 49, want: "[]"},
			{wall: 1, want: "[a[0]=1]"},
			{key: "a", ts: 20, v: 2, want: "[]"},
			{wall: 50, want: "[a[0]=3]"},
			{key: "b", ts: 100, v: 1, want: "[a[0]=3]"}, // the watermark completes it
			{wall: 500, want: "[b[100]=1]"},             // no more early firings of a
		}},
		{"every record with allowed lateness", tumbling, []topology.WindowOption{topology.EmitEveryUpdate(), topology.AllowedLateness(50 * time.Millisecond)}, []triggerStep{
			{key: "a", ts: 10, v: 1, want: "[a[0]=1]"},
			{key: "a", ts: 120, v: 1, want: "[a[100]=1]"},
			{key: "a", ts: 20, v: 2, want: "[a[0]=3]"}, // late within the lateness
			{key: "a", ts: 150, v: 1, want: "[a[100]=2]"},
			{key: "a", ts: 30, v: 2, want: "[]"}, // past it
		}},
		{"user-defined: every second record, purging", tumbling,
			[]topology.WindowOption{topology.WithTrigger(window.Purging(bigRecord{}))}, []triggerStep{
				{key: "a", ts: 10, v: 1, want: "[]"},
				{key: "a", ts: 11, v: 10, want: "[a[0]=11]"},
				{key: "a", ts: 12, v: 3, want: "[]"},
				{key: "a", ts: 13, v: 30, want: "[a[0]=33]"},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runTriggerSteps(t, c.w, c.opts, c.steps) })
	}
}

// bigRecord is a user-defined trigger: it fires on every second record of a
// window (a trigger sees the window's count and times, not the values).
type bigRecord struct{}

func (bigRecord) OnElement(c window.TriggerContext, _ int64) window.TriggerResult {
	return window.TriggerResult{Fire: c.Count%2 == 0, EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}
func (bigRecord) OnEventTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}
func (bigRecord) OnProcessingTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}
func (bigRecord) String() string { return "bigRecord" }

func TestGlobalWindowsNeedATrigger(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.Int64)
	topology.CountWindows(topology.WindowedBy(topology.GroupByKey(in), window.Global()), topology.Materialized("c", serde.String, serde.Int64))
	if _, err := tp.Build(); !errors.Is(err, topology.ErrInvalidWindow) {
		t.Fatalf("global windows without a trigger: Build returned %v, want ErrInvalidWindow", err)
	}
}
