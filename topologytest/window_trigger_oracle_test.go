package topologytest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// triggerOracle is a plain in-memory model of what a windowed count leaves
// downstream (the output read as a table, retractions applied) once the
// task's watermark has closed every window, for records that each carry
// the watermark of one of several upstream writers while the task's
// watermark is their minimum. Lateness is judged against the carried
// watermark (or the task's, if ahead); windows close when the task's
// watermark reaches their close time, and a session stops taking part in
// merges once the watermark a record is judged by reaches it.
//
// What is downstream at the end depends on the trigger family:
//
//   - completing (OnWatermark, AtClose, EarlyEvery, EarlyEveryInterval):
//     every window, with all the records it took;
//   - CountTrigger(n): every window that fired, with its count at the last
//     firing, which happens when n records came since the last (a merged
//     session adds up its sessions' records since their last firing);
//   - Purging(CountTrigger(n)): the same, with the records since the last
//     firing as the count;
//   - other purging triggers: every window (values not compared);
//
// and, for sessions, none of the sessions that were merged into another.
type triggerOracle struct {
	size, advance, gap, lateness int64
	n                            int64 // 0: completing trigger
	purging                      bool

	taskWM  int64
	windows map[string]map[int64]*oracleWindow // time windows: key → start → window
	live    map[string][]*oracleWindow         // sessions
	final   map[string]int64                   // "key[start,end)" → downstream value
}

type oracleWindow struct {
	first, last      int64 // sessions: the timestamp range
	count, sinceFire int64
	emitted          bool
	shown            int64
}

func (o *triggerOracle) closeOf(w *oracleWindow, start int64) int64 {
	if o.gap > 0 {
		return w.last + o.gap + o.lateness
	}
	return start + o.size - 1 + o.lateness
}

func (o *triggerOracle) add(w *oracleWindow) {
	w.count++
	w.sinceFire++
	if o.n > 0 && w.sinceFire >= o.n {
		w.emitted, w.shown, w.sinceFire = true, w.count, 0
		if o.purging {
			w.count = 0
		}
	}
}

func (o *triggerOracle) record(key string, ts, carried int64) {
	wm := max(o.taskWM, carried)
	if o.gap == 0 {
		ws := o.windows[key]
		if ws == nil {
			ws = map[int64]*oracleWindow{}
			o.windows[key] = ws
		}
		for start := ts - ts%o.advance - (o.size/o.advance-1)*o.advance; start <= ts; start += o.advance {
			if ts >= start+o.size || start+o.size-1+o.lateness <= wm {
				continue
			}
			w := ws[start]
			if w == nil {
				w = &oracleWindow{}
				ws[start] = w
			}
			o.add(w)
		}
		return
	}
	merged := &oracleWindow{first: ts, last: ts}
	var rest []*oracleWindow
	var absorbed []*oracleWindow
	for _, s := range o.live[key] {
		// A session closed for this record (by the watermark it is
		// judged by) takes no part in its merge, whether or not the
		// task's own watermark removed it yet (invariant 5).
		if s.first-o.gap <= ts && ts <= s.last+o.gap && s.last+o.gap+o.lateness > wm {
			absorbed = append(absorbed, s)
			merged.first, merged.last = min(merged.first, s.first), max(merged.last, s.last)
		} else {
			rest = append(rest, s)
		}
	}
	if merged.last+o.gap+o.lateness <= wm {
		return // late
	}
	if len(absorbed) == 1 && absorbed[0].first == merged.first && absorbed[0].last == merged.last {
		o.add(absorbed[0]) // inside a session: no merge
		return
	}
	for _, s := range absorbed {
		merged.count += s.count
		merged.sinceFire += s.sinceFire
	}
	o.add(merged)
	o.live[key] = append(rest, merged)
}

// watermark moves the task's watermark, closing windows.
func (o *triggerOracle) watermark(wm int64) {
	o.taskWM = max(o.taskWM, wm)
	for key, ws := range o.windows {
		for start, w := range ws {
			if o.closeOf(w, start) <= o.taskWM {
				o.settle(fmt.Sprintf("%s%v", short(key), window.Bounds{Start: start, End: start + o.size}), w)
				delete(ws, start)
			}
		}
	}
	for key, ss := range o.live {
		o.live[key] = slices.DeleteFunc(ss, func(s *oracleWindow) bool {
			if o.closeOf(s, 0) > o.taskWM {
				return false
			}
			o.settle(fmt.Sprintf("%s%v", short(key), window.Bounds{Start: s.first, End: s.last + 1}), s)
			return true
		})
	}
}

func (o *triggerOracle) settle(name string, w *oracleWindow) {
	switch {
	case o.n == 0:
		o.final[name] = w.count
	case w.emitted:
		o.final[name] = w.shown
	}
}

func (o *triggerOracle) state() []string {
	var s []string
	for k, v := range o.final {
		s = append(s, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(s)
	return s
}

type oracleTrigger struct {
	name    string
	opt     topology.WindowOption
	n       int64 // 0: completing
	purging bool
	// noRepeats: under this trigger a result never goes out twice
	// unchanged.
	noRepeats bool
	// keysOnly: the values left downstream depend on when firings
	// happen (purging triggers with timers), so only the windows are
	// compared: every final window fired at least once, and no merged
	// session is left.
	keysOnly bool
}

func oracleTriggers() []oracleTrigger {
	ts := []oracleTrigger{
		{name: "OnWatermark", noRepeats: true},
		{name: "AtClose", opt: topology.EmitFinal(), noRepeats: true},
		{name: "EarlyEvery(2)", opt: topology.WithTrigger(window.EarlyEvery(2))},
		{name: "EarlyEveryInterval", opt: topology.WithTrigger(window.EarlyEveryInterval(10 * time.Millisecond))},
		{name: "EveryRecord", opt: topology.EmitEveryUpdate(), n: 1, noRepeats: true},
	}
	ts = append(ts,
		oracleTrigger{name: "Purging(OnWatermark)", opt: topology.WithTrigger(window.Purging(window.OnWatermark())), keysOnly: true},
		oracleTrigger{name: "Purging(EarlyEvery(2))", opt: topology.WithTrigger(window.Purging(window.EarlyEvery(2))), keysOnly: true},
		oracleTrigger{name: "Purging(EarlyEveryInterval)", opt: topology.WithTrigger(window.Purging(window.EarlyEveryInterval(10 * time.Millisecond))), keysOnly: true})
	for n := int64(1); n <= 4; n++ {
		ts = append(ts,
			oracleTrigger{name: fmt.Sprintf("CountTrigger(%d)", n), opt: topology.WithTrigger(window.CountTrigger(n)), n: n, noRepeats: true},
			oracleTrigger{name: fmt.Sprintf("Purging(CountTrigger(%d))", n), opt: topology.WithTrigger(window.Purging(window.CountTrigger(n))), n: n, purging: true})
	}
	return ts
}

type oracleKind struct {
	name               string
	w                  topology.Windows
	size, advance, gap int64
}

func oracleKinds() []oracleKind {
	return []oracleKind{
		{"tumbling", window.Tumbling(100 * time.Millisecond), 100, 100, 0},
		{"hopping", window.Hopping(100*time.Millisecond, 25*time.Millisecond), 100, 25, 0},
		{"session", window.InactivityGap(30 * time.Millisecond), 0, 0, 30},
	}
}

// oracleRun drives one random scenario through the topology and the
// oracle and returns how they differ (nil: they agree). Records come from
// three writers with their own clocks and out-of-orderness, each carrying
// its writer's watermark; the task's watermark, their minimum, is
// announced every few records; the wall clock moves now and then.
func oracleRun(t *testing.T, k oracleKind, tr oracleTrigger, seed uint64, trigger topology.WindowOption, brokenReader bool) []string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 15))
	lateness := int64(rng.IntN(60))
	opts := []topology.WindowOption{topology.AllowedLateness(time.Duration(lateness) * time.Millisecond)}
	if trigger != nil {
		opts = append(opts, trigger)
	}
	r := newEmitRig(t, k.w, opts...)
	r.keepRetracted = brokenReader
	o := &triggerOracle{size: k.size, advance: k.advance, gap: k.gap, lateness: lateness, n: tr.n, purging: tr.purging,
		taskWM: 0, windows: map[string]map[int64]*oracleWindow{}, live: map[string][]*oracleWindow{}, final: map[string]int64{}}
	keys := windowKeys()[:2+rng.IntN(len(windowKeys())-1)]
	const writers = 3
	var clock, wm, bound [writers]int64
	for i := range writers {
		clock[i], bound[i] = 1000+int64(rng.IntN(100)), int64(rng.IntN(40))
	}
	r.watermark(0)
	announced := int64(0)
	for i := range 150 {
		wr := rng.IntN(writers)
		clock[wr] += int64(rng.IntN(12))
		ts := max(0, clock[wr]-int64(rng.IntN(int(bound[wr]+lateness+20))))
		key := keys[rng.IntN(len(keys))]
		r.rec(key, ts, wm[wr])
		o.record(key, ts, wm[wr])
		wm[wr] = max(wm[wr], ts-bound[wr]-1)
		if i%5 == 4 {
			if task := min(wm[0], wm[1], wm[2]); task > announced {
				r.watermark(task)
				o.watermark(task)
				announced = task
			}
		}
		if rng.IntN(10) == 0 {
			r.wall(int64(rng.IntN(25)))
		}
	}
	r.watermark(1 << 40)
	o.watermark(1 << 40)
	var diffs []string
	got, want := r.final(), o.state()
	if tr.keysOnly {
		for _, l := range [][]string{got, want} {
			for i, x := range l {
				l[i] = x[:strings.LastIndexByte(x, '=')]
			}
		}
	}
	if !slices.Equal(got, want) {
		diffs = append(diffs, fmt.Sprintf("downstream state differs (lateness %d):\n got  %v\n want %v", lateness, got, want))
	}
	if tr.noRepeats && len(r.repeats) > 0 {
		diffs = append(diffs, fmt.Sprintf("went out again unchanged: %v", r.repeats))
	}
	return diffs
}

// TestWindowTriggersMatchOracle compares, for tumbling, hopping and
// session windows under every trigger, the downstream state after the
// last window closed with the oracle's.
func TestWindowTriggersMatchOracle(t *testing.T) {
	seeds := uint64(8)
	if testing.Short() || raceEnabled {
		seeds = 2
	}
	for _, k := range oracleKinds() {
		for _, tr := range oracleTriggers() {
			for seed := range seeds {
				t.Run(fmt.Sprintf("%s/%s/%d", k.name, tr.name, seed), func(t *testing.T) {
					for _, d := range oracleRun(t, k, tr, seed, tr.opt, false) {
						t.Error(d)
					}
				})
			}
		}
	}
}

// TestWindowTriggerOracleCatches is the oracle's negative control: it must
// tell apart the old behaviours — a CountTrigger firing at multiples of n
// (which a session merge skips), an OnWatermark that leaves the firing
// still due after a late one, and a reader that keeps retracted sessions.
func TestWindowTriggerOracleCatches(t *testing.T) {
	session := oracleKinds()[2]
	byName := map[string]oracleTrigger{}
	for _, tr := range oracleTriggers() {
		byName[tr.name] = tr
	}
	cases := []struct {
		name   string
		k      oracleKind
		tr     oracleTrigger
		opt    topology.WindowOption
		broken bool
	}{
		{"count at multiples", session, byName["CountTrigger(3)"], topology.WithTrigger(countAtMultiples{3}), false},
		{"late firing keeps the one due", oracleKinds()[0], byName["OnWatermark"], topology.WithTrigger(lateKeepsDue{}), false},
		{"retractions ignored", session, byName["EveryRecord"], topology.EmitEveryUpdate(), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(20) {
				if diffs := oracleRun(t, c.k, c.tr, seed, c.opt, c.broken); len(diffs) > 0 {
					t.Logf("seed %d: %s", seed, diffs[0])
					return
				}
			}
			t.Errorf("the oracle agreed with %s on 20 seeds", c.name)
		})
	}
}

// countAtMultiples is CountTrigger as it was: fire when the count is a
// multiple of n.
type countAtMultiples struct{ n int64 }

func (c countAtMultiples) OnElement(tc window.TriggerContext, _ int64) window.TriggerResult {
	return window.TriggerResult{Fire: tc.Count%c.n == 0, EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}
func (countAtMultiples) OnEventTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}
func (countAtMultiples) OnProcessingTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}
func (countAtMultiples) String() string { return "countAtMultiples" }

// lateKeepsDue is OnWatermark as it was: a late firing leaves the window's
// event timer, so the task's watermark fires it again.
type lateKeepsDue struct{}

func (lateKeepsDue) OnElement(tc window.TriggerContext, _ int64) window.TriggerResult {
	r := window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
	if tc.MaxTimestamp <= tc.Watermark {
		r.Fire = true
	} else {
		r.EventTimer = tc.MaxTimestamp
	}
	return r
}
func (lateKeepsDue) OnEventTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{Fire: true, EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}
func (lateKeepsDue) OnProcessingTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}
func (lateKeepsDue) String() string { return "lateKeepsDue" }
