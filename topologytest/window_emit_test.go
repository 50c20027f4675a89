package topologytest_test

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// emitRig runs a windowed count downstream of a repartition topic that the
// test feeds directly, so each record carries the watermark of a writer of
// its choice (header sluice.wm) while the task's own watermark moves only
// with the watermark records the test sends: the shapes of many upstream
// writers whose watermarks differ. The results go to "out" keyed by the
// windowed key, so a retraction is a tombstone and the topic read as a
// table is the downstream state.
type emitRig struct {
	t     *testing.T
	d     *topologytest.Driver
	rep   *topologytest.InputTopic[string, string]
	out   *topologytest.OutputTopic[topology.Windowed[string], int64]
	state map[topology.Windowed[string]]int64
	// repeats lists results that went out again unchanged, with nothing
	// retracted in between.
	repeats []string
	// keepRetracted ignores tombstones: a broken reader, for negative
	// controls.
	keepRetracted bool
}

func newEmitRig(t *testing.T, w topology.Windows, opts ...topology.WindowOption) *emitRig {
	t.Helper()
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	g := topology.GroupBy(in, func(_, v string) string { return v }, topology.Grouped("by-value", serde.String, serde.String))
	ws := topology.WindowedBy(g, w, opts...)
	counts := topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), "out", topology.WindowedSerde(serde.String), serde.Int64)
	d, err := topologytest.New(tp, topologytest.WallClock(time.UnixMilli(0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &emitRig{
		t: t, d: d,
		rep:   topologytest.NewInputTopic(d, "test-by-value-repartition", serde.String, serde.String),
		out:   topologytest.NewOutputTopic(d, "out", topology.WindowedSerde(serde.String), serde.Int64),
		state: map[topology.Windowed[string]]int64{},
	}
}

// rec pipes a record of key at ts that carries the writer watermark
// carried (none when carried is window.NoWatermark).
func (r *emitRig) rec(key string, ts, carried int64) {
	r.t.Helper()
	var hs []topology.Header
	if carried != window.NoWatermark {
		hs = append(hs, topology.Header{Key: exec.HeaderRecordWatermark, Value: binary.BigEndian.AppendUint64(nil, uint64(carried))})
	}
	if err := r.rep.Pipe(key, key, ts, hs...); err != nil {
		r.t.Fatal(err)
	}
}

// watermark announces wm as the (only) writer's watermark: the task's.
func (r *emitRig) watermark(wm int64) {
	r.t.Helper()
	v := append(binary.BigEndian.AppendUint64(nil, uint64(wm)), 0)
	if err := r.rep.PipeBytes(nil, v, 0, topology.Header{Key: exec.HeaderWatermark, Value: []byte("0")}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *emitRig) wall(ms int64) {
	r.t.Helper()
	if err := r.d.AdvanceWallClock(time.Duration(ms) * time.Millisecond); err != nil {
		r.t.Fatal(err)
	}
}

// read returns what was written since the last call, as key[start,end)=n
// or key[start,end)=del, and applies it to the downstream state.
func (r *emitRig) read() []string {
	r.t.Helper()
	rs, err := r.out.ReadRecords()
	if err != nil {
		r.t.Fatal(err)
	}
	var got []string
	for _, x := range rs {
		if x.Tombstone {
			if !r.keepRetracted {
				delete(r.state, x.Key)
			}
			got = append(got, fmt.Sprintf("%s%v=del", short(x.Key.Key), x.Key.Window))
			continue
		}
		if old, ok := r.state[x.Key]; ok && old == x.Value {
			r.repeats = append(r.repeats, fmt.Sprintf("%s%v=%d", short(x.Key.Key), x.Key.Window, x.Value))
		}
		r.state[x.Key] = x.Value
		got = append(got, fmt.Sprintf("%s%v=%d", short(x.Key.Key), x.Key.Window, x.Value))
	}
	return got
}

// final is the downstream state, sorted, in read's notation.
func (r *emitRig) final() []string {
	r.read()
	var s []string
	for k, n := range r.state {
		s = append(s, fmt.Sprintf("%s%v=%d", short(k.Key), k.Window, n))
	}
	slices.Sort(s)
	return s
}

// short names a key of any length by its length and first byte.
func short(k string) string {
	if len(k) <= 8 {
		return k
	}
	return fmt.Sprintf("%s…(%d)", k[:4], len(k))
}

// adversarialKeys are keys of every encoded length that matters: empty, one
// byte, a UUID, and past the one-byte uvarint length (128).
func windowKeys() []string {
	return []string{"", "a", "0f8c3a52-6f1e-4c8e-9d0b-6a3e2f1c9b7d", strings.Repeat("k", 127), strings.Repeat("é", 64), strings.Repeat("z", 130)}
}

// TestLateFiringAheadOfTheTaskFiresOnce: a record judged against a writer
// watermark ahead of the task's fires its window at once (a late firing);
// the firing the task's watermark still had due for that window must not
// go out again unchanged. Default trigger, lateness 100ms.
func TestLateFiringAheadOfTheTaskFiresOnce(t *testing.T) {
	lateness := topology.AllowedLateness(100 * ms)
	for _, key := range windowKeys() {
		cases := []struct {
			name string
			w    topology.Windows
		}{
			{"tumbling", window.Tumbling(100 * ms)},
			{"hopping", window.Hopping(100*ms, 50*ms)},
			{"session", window.InactivityGap(30 * ms)},
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d", c.name, len(key)), func(t *testing.T) {
				r := newEmitRig(t, c.w, lateness)
				r.watermark(0)
				r.rec(key, 10, 0)
				r.rec(key, 30, 0) // a session [10,30]: due at 60
				if got := r.read(); len(got) > 0 {
					t.Fatalf("fired before any watermark reached a window: %v", got)
				}
				// Ahead: the writer's watermark passed every window's
				// firing time but none's close.
				r.rec(key, 20, 120)
				early := r.read()
				if len(early) == 0 {
					t.Fatal("the late record fired nothing")
				}
				r.watermark(130) // the task reaches the firings still due
				if again := r.read(); len(again) > 0 {
					t.Errorf("fired %v at once, then again %v when the task's watermark reached the window", early, again)
				}
				r.watermark(1000)
				r.read()
				want := map[string][]string{
					"tumbling": {"[0,100)=3"},
					"hopping":  {"[-50,50)=3", "[0,100)=3"},
					"session":  {"[10,31)=3"},
				}[c.name]
				for i := range want {
					want[i] = short(key) + want[i]
				}
				if got := r.final(); !slices.Equal(got, want) {
					t.Errorf("downstream state %v, want %v", got, want)
				}
			})
		}
	}
}

// TestSessionRetractionFollowsWhatWasEmitted: whether a merged session is
// retracted depends on whether it was emitted, not on the watermark the
// merging record carries. A session late-fired by a record from a writer
// far ahead, then merged by a record from a writer behind, must be
// retracted; a session never emitted must not be.
func TestSessionRetractionFollowsWhatWasEmitted(t *testing.T) {
	for _, key := range windowKeys() {
		t.Run(fmt.Sprint(len(key)), func(t *testing.T) {
			r := newEmitRig(t, window.InactivityGap(30*ms), topology.AllowedLateness(100*ms))
			r.rec(key, 10, 50) // [10,10] due at 40 ≤ 50: fires at once
			if got := r.read(); !slices.Equal(got, []string{short(key) + "[10,11)=1"}) {
				t.Fatalf("late firing: %v", got)
			}
			r.rec(key, 35, 0)  // merges it, from a writer behind
			r.rec(key, 200, 0) // never emitted: due at 230
			// Merged by a record from a writer past 230: still no
			// retraction, since it never went out.
			r.rec(key, 225, 231)
			for _, o := range r.read() {
				if strings.Contains(o, "[200,") {
					t.Errorf("retracted %s, which never went out", o)
				}
			}
			r.watermark(1000)
			want := []string{short(key) + "[10,36)=2", short(key) + "[200,226)=2"}
			if got := r.final(); !slices.Equal(got, want) {
				t.Errorf("downstream state %v, want %v", got, want)
			}
		})
	}
}

// TestMergedSessionsRetractedForEveryTrigger: a session that any trigger
// emitted and that a later record merges into another is retracted, so
// the downstream state holds only the merged session.
func TestMergedSessionsRetractedForEveryTrigger(t *testing.T) {
	gap := window.InactivityGap(30 * ms)
	cases := []struct {
		name string
		opts []topology.WindowOption
		// wall advances the wall clock after the first two sessions.
		wall int64
		want string // the merged session's final count downstream
	}{
		{"EarlyEvery(2)", []topology.WindowOption{topology.WithTrigger(window.EarlyEvery(2))}, 0, "=5"},
		{"EarlyEveryInterval", []topology.WindowOption{topology.WithTrigger(window.EarlyEveryInterval(10 * ms))}, 20, "=5"},
		// Each session fired at its second record; the merge (0+0+1
		// records since) has not fired yet: nothing downstream.
		{"CountTrigger(2)", []topology.WindowOption{topology.WithTrigger(window.CountTrigger(2))}, 0, ""},
		{"Purging(EveryRecord)", []topology.WindowOption{topology.WithTrigger(window.Purging(window.EveryRecord()))}, 0, "=1"},
		{"Purging(CountTrigger(2))", []topology.WindowOption{topology.WithTrigger(window.Purging(window.CountTrigger(2)))}, 0, ""},
		{"Purging(EarlyEvery(2))", []topology.WindowOption{topology.WithTrigger(window.Purging(window.EarlyEvery(2)))}, 0, "=1"},
		{"EveryRecord", []topology.WindowOption{topology.EmitEveryUpdate()}, 0, "=5"},
		{"OnWatermark", nil, 0, "=5"},
	}
	for _, key := range windowKeys() {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d", c.name, len(key)), func(t *testing.T) {
				r := newEmitRig(t, gap, c.opts...)
				r.watermark(0)
				// 2 + 2 + 1: two sessions of two records, then one record
				// bridging them.
				r.rec(key, 10, window.NoWatermark)
				r.rec(key, 11, window.NoWatermark)
				r.rec(key, 70, window.NoWatermark)
				r.rec(key, 71, window.NoWatermark)
				if c.wall > 0 {
					r.wall(c.wall)
				}
				r.rec(key, 40, window.NoWatermark)
				r.watermark(1000)
				want := []string{}
				if c.want != "" {
					want = append(want, short(key)+"[10,72)"+c.want)
				}
				if got := r.final(); !slices.Equal(got, want) {
					t.Errorf("downstream state %v, want %v", got, want)
				}
			})
		}
	}
}

// TestCountTriggerAfterMerge: CountTrigger(n) fires once the records since
// its last firing reach or pass n, merged sessions adding up theirs
// (Flink's CountTrigger): two unfired sessions of 2 bridged by one record
// hold 5 ≥ 3 records since any firing, so the merge fires.
func TestCountTriggerAfterMerge(t *testing.T) {
	for _, key := range windowKeys() {
		for _, purging := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/purging=%v", len(key), purging), func(t *testing.T) {
				tr := window.CountTrigger(3)
				if purging {
					tr = window.Purging(tr)
				}
				r := newEmitRig(t, window.InactivityGap(30*ms), topology.WithTrigger(tr))
				r.watermark(0)
				for _, ts := range []int64{10, 11, 70, 71} {
					r.rec(key, ts, window.NoWatermark)
				}
				if got := r.read(); len(got) > 0 {
					t.Fatalf("fired before 3 records: %v", got)
				}
				r.rec(key, 40, window.NoWatermark)
				if got := r.read(); !slices.Equal(got, []string{short(key) + "[10,72)=5"}) {
					t.Errorf("after the bridging record: %v, want [%s[10,72)=5]", got, short(key))
				}
				// Then every 3 records again.
				r.rec(key, 41, window.NoWatermark)
				r.rec(key, 42, window.NoWatermark)
				if got := r.read(); len(got) > 0 {
					t.Errorf("fired after 2 more records: %v", got)
				}
				r.rec(key, 43, window.NoWatermark)
				want := "[10,72)=8"
				if purging {
					want = "[10,72)=3"
				}
				if got := r.read(); !slices.Equal(got, []string{short(key) + want}) {
					t.Errorf("after 3 more records: %v, want [%s%s]", got, short(key), want)
				}
			})
		}
	}
}

// TestCountWindowsKeepTheirEvictionWithATrigger: a count window given a
// trigger still holds at most its size records (sliding) or the records
// since its last completion (tumbling, which completes — fires and purges —
// every size records), and keeps its state bounded, whether the trigger
// fires on every record or only on the wall clock.
func TestCountWindowsKeepTheirEvictionWithATrigger(t *testing.T) {
	cases := []struct {
		name string
		w    window.Count
		// the count downstream after each record, with EveryRecord
		every []int64
	}{
		{"SlidingCount(3,2)", window.SlidingCount(3, 2), []int64{1, 2, 3, 3, 3, 3, 3, 3, 3}},
		{"TumblingCount(3)", window.TumblingCount(3), []int64{1, 2, 3, 1, 2, 3, 1, 2, 3}},
	}
	for _, key := range windowKeys() {
		for _, c := range cases {
			global := topology.Windowed[string]{Key: key, Window: window.GlobalBounds}
			t.Run(fmt.Sprintf("%s/EveryRecord/%d", c.name, len(key)), func(t *testing.T) {
				r := newEmitRig(t, c.w, topology.WithTrigger(window.EveryRecord()))
				var got []int64
				for i := range int64(9) {
					r.rec(key, 10+i, window.NoWatermark)
					r.read()
					got = append(got, r.state[global])
				}
				if !slices.Equal(got, c.every) {
					t.Errorf("counts %v, want %v", got, c.every)
				}
			})
			t.Run(fmt.Sprintf("%s/EarlyEveryInterval/%d", c.name, len(key)), func(t *testing.T) {
				r := newEmitRig(t, c.w, topology.WithTrigger(window.EarlyEveryInterval(10*ms)))
				for i := range int64(9) {
					r.rec(key, 10+i, window.NoWatermark)
				}
				r.wall(10)
				r.read()
				if got := r.state[global]; got != 3 {
					t.Errorf("count %d after 9 records and one firing, want 3", got)
				}
				n, err := r.d.StoreEntries("w")
				if err != nil {
					t.Fatal(err)
				}
				// The window, its processing timer, the time state and
				// at most size kept records.
				if n > 3+int(c.w.Size()) {
					t.Errorf("%d store entries after 9 records: the window keeps more than its size", n)
				}
			})
		}
	}
}
