package task

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// rearmTrigger sets a window's event timer at its end and, when that
// timer runs, moves it to the close, where the window fires: a timer that
// changes a stored window before it closes. It tells the two runs of a
// window's timer apart by counting them (calls, by the window's start),
// which a trigger of a real job could not (its only state is the window's
// count and timers), and needs each window to belong to one key.
type rearmTrigger struct{ calls map[int64]int }

func (rearmTrigger) OnElement(c window.TriggerContext, _ int64) window.TriggerResult {
	return window.TriggerResult{EventTimer: c.MaxTimestamp, ProcessingTimer: window.NoTimer}
}

func (t rearmTrigger) OnEventTime(c window.TriggerContext) window.TriggerResult {
	r := window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
	if t.calls[c.Window.Start]++; t.calls[c.Window.Start] == 1 {
		r.EventTimer = c.Close
	} else {
		r.Fire = true
	}
	return r
}

func (rearmTrigger) OnProcessingTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}

func (rearmTrigger) String() string { return "rearmTrigger" }

// TestWindowTimerBeforeTheCloseInOneWatermark stores windows of keys of
// every length and UUIDs, a window each, whose event timer, due at their
// end, moves itself to their close, then moves the watermark past all of
// them at once. The timer runs first and changes each window; the close
// must see the change and fire every window once: the scan that finds the
// windows due read them before the timers ran, and a close that took its
// values would find each window's timer still at its end and fire none.
func TestWindowTimerBeforeTheCloseInOneWatermark(t *testing.T) {
	for _, byStart := range []bool{true, false} {
		t.Run(fmt.Sprintf("byStart=%t", byStart), func(t *testing.T) {
			defer func(was bool) { ops.WindowsByStart = was }(ops.WindowsByStart)
			ops.WindowsByStart = byStart
			tp := topology.New()
			in := topology.From(tp, "in", serde.String, serde.Bytes, topology.Watermarks(window.BoundedOutOfOrderness(2*time.Second)))
			ws := topology.WindowedBy(topology.GroupByKey(in), window.Tumbling(10*time.Millisecond),
				topology.AllowedLateness(5*time.Millisecond), topology.WithTrigger(rearmTrigger{calls: map[int64]int{}}))
			topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))),
				"out", topology.WindowedSerde(serde.String), serde.Int64Text)
			d := &discard{keep: []*kgo.Record{}}
			tk := startTask(t, plan(t, tp), 0, Config{AppID: "rearm", Send: d.send})
			keys := testkeys.All()
			process := func(key string, ts int64) {
				t.Helper()
				if err := tk.Process(&kgo.Record{Topic: "in", Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(ts)}); err != nil {
					t.Fatal(err)
				}
			}
			commit := func() {
				t.Helper()
				if err := tk.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := tk.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			// Two records a key, in a window of its own, all within
			// the watermark's bound, and the windows to the engine;
			// then one record far ahead closes them all.
			for i, k := range keys {
				process(k, int64(10*i+1))
				process(k, int64(10*i+8))
			}
			commit()
			process(keys[0], int64(10*len(keys)+3_000))
			commit()
			var got []string
			for _, r := range d.keep {
				if r.Topic == "out" {
					got = append(got, fmt.Sprintf("%x=%s", r.Key, r.Value))
				}
			}
			sort.Strings(got)
			var want []string
			for i, k := range keys {
				start := int64(10 * i)
				wk, err := topology.WindowedSerde(serde.String).Encode(topology.Windowed[string]{Key: k, Window: window.Bounds{Start: start, End: start + 10}})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprintf("%x=2", wk))
			}
			sort.Strings(want)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				gotSet := map[string]bool{}
				for _, g := range got {
					gotSet[g] = true
				}
				var missing []string
				for _, w := range want {
					if !gotSet[w] {
						missing = append(missing, w)
					}
				}
				missing = append(missing, "none") // got holds one more than once
				t.Fatalf("%d results, want %d, one a key; %d missing, the first %.80s", len(got), len(want), len(missing)-1, missing[0])
			}
		})
	}
}
