package topologytest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// oracle is a brute-force model of event-time windows with EmitFinal: the
// watermark is max(ts) - bound - 1; a record is late when every window it
// would join is closed (its fire time plus the lateness at or below the
// watermark); a window's result goes out once the watermark reaches its
// close time. Sessions are sets of timestamps, re-merged from scratch.
type oracle struct {
	bound, lateness, size, advance, gap int64
	wm                                  int64
	open                                map[string][]int64 // "key|start" → timestamps (time windows)
	sessions                            map[string][][]int64
	out                                 []string
	late                                []string
}

func newOracle(bound, lateness, size, advance, gap int64) *oracle {
	return &oracle{bound: bound, lateness: lateness, size: size, advance: advance, gap: gap,
		wm: window.NoWatermark, open: map[string][]int64{}, sessions: map[string][][]int64{}}
}

func (o *oracle) add(key string, ts int64) {
	if o.gap > 0 {
		o.addSession(key, ts)
	} else {
		onTime := false
		for start := ts - ts%o.advance - (o.size/o.advance-1)*o.advance; start <= ts; start += o.advance {
			if start < 0 || ts >= start+o.size {
				continue
			}
			if start+o.size-1+o.lateness <= o.wm {
				continue
			}
			onTime = true
			k := fmt.Sprintf("%s|%d", key, start)
			o.open[k] = append(o.open[k], ts)
		}
		if !onTime {
			o.late = append(o.late, fmt.Sprintf("%s@%d", key, ts))
		}
	}
	o.wm = max(o.wm, ts-o.bound-1)
	o.fire()
}

func (o *oracle) addSession(key string, ts int64) {
	var merged []int64
	var rest [][]int64
	for _, s := range o.sessions[key] {
		if slices.Min(s)-o.gap <= ts && ts <= slices.Max(s)+o.gap {
			merged = append(merged, s...)
		} else {
			rest = append(rest, s)
		}
	}
	merged = append(merged, ts)
	if slices.Max(merged)+o.gap+o.lateness <= o.wm {
		o.late = append(o.late, fmt.Sprintf("%s@%d", key, ts))
		return
	}
	o.sessions[key] = append(rest, merged)
}

func (o *oracle) fire() {
	for k, tss := range o.open {
		var key string
		var start int64
		fmt.Sscanf(k, "%s", &key)
		for i := range k {
			if k[i] == '|' {
				key = k[:i]
				fmt.Sscanf(k[i+1:], "%d", &start)
			}
		}
		if start+o.size-1+o.lateness <= o.wm {
			o.out = append(o.out, fmt.Sprintf("%s[%d,%d)=%d", key, start, start+o.size, len(tss)))
			delete(o.open, k)
		}
	}
	for key, ss := range o.sessions {
		var keep [][]int64
		for _, s := range ss {
			last := slices.Max(s)
			if last+o.gap+o.lateness <= o.wm {
				o.out = append(o.out, fmt.Sprintf("%s[%d,%d)=%d", key, slices.Min(s), last+1, len(s)))
			} else {
				keep = append(keep, s)
			}
		}
		o.sessions[key] = keep
	}
}

// TestWindowsMatchOracle compares EmitFinal windowed counts, after a
// repartition (the watermark crosses a repartition topic), with the oracle
// over random out-of-order input.
func TestWindowsMatchOracle(t *testing.T) {
	kinds := []struct {
		name               string
		w                  topology.Windows
		size, advance, gap int64
	}{
		{"tumbling", window.Tumbling(100 * time.Millisecond), 100, 100, 0},
		{"hopping", window.Hopping(100*time.Millisecond, 25*time.Millisecond), 100, 25, 0},
		{"session", window.InactivityGap(30 * time.Millisecond), 0, 0, 30},
	}
	for _, k := range kinds {
		seeds := uint64(20)
		if raceEnabled {
			seeds = 4
		}
		for seed := range seeds {
			t.Run(fmt.Sprintf("%s/%d", k.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				bound, lateness := int64(rng.IntN(50)), int64(rng.IntN(40))
				tp := topology.New()
				in := topology.From(tp, "in", serde.String, serde.String,
					topology.Watermarks(window.BoundedOutOfOrderness(time.Duration(bound)*time.Millisecond)))
				// Re-key so the windows run downstream of a repartition.
				g := topology.GroupBy(in, func(_, v string) string { return v }, topology.Grouped("by-value", serde.String, serde.String))
				ws := topology.WindowedBy(g, k.w, topology.AllowedLateness(time.Duration(lateness)*time.Millisecond), topology.EmitFinal())
				counts := topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))
				topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, string) {
					return fmt.Sprintf("%s[%d,%d)=%d", w.Key, w.Window.Start, w.Window.End, n), ""
				}), "out", serde.String, serde.String)
				topology.To(topology.Map(topology.LateRecords(ws), func(k, _ string) (string, string) { return k, "" }), "late", serde.String, serde.String)
				d, err := topologytest.New(tp)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
				o := newOracle(bound, lateness, k.size, k.advance, k.gap)
				ts := int64(1000)
				for range 300 {
					ts += int64(rng.IntN(15))
					rts := max(0, ts-int64(rng.IntN(int(bound+lateness+20))))
					key := string(rune('a' + rng.IntN(4)))
					if err := pipe.Pipe("x", key, rts); err != nil {
						t.Fatal(err)
					}
					o.add(key, rts)
				}
				if len(o.out) == 0 {
					t.Fatal("the oracle fired no window: the input does not exercise anything")
				}
				got := readKeys(t, d, "out")
				lateGot := readKeys(t, d, "late")
				slices.Sort(got)
				slices.Sort(o.out)
				if !slices.Equal(got, o.out) {
					t.Errorf("results differ:\n got  %v\n want %v", got, o.out)
				}
				if len(lateGot) != len(o.late) {
					t.Errorf("%d late records, want %d", len(lateGot), len(o.late))
				}
			})
		}
	}
}

func readKeys(t *testing.T, d *topologytest.Driver, topic string) []string {
	t.Helper()
	rs, err := topologytest.NewOutputTopic(d, topic, serde.String, serde.String).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, r := range rs {
		ks = append(ks, r.Key)
	}
	return ks
}
