package topologytest_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
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

const ms = time.Millisecond

// slidingCounts is a sliding-window count of "in" (key = the value when
// regroup, so the windows run after a repartition), writing
// key[start,end)=count to "out" and the late records, key@ts, to "late".
func slidingCounts(d, bound, lateness int64, regroup bool, opts ...topology.WindowOption) (*topology.Topology, topology.Materialization[string, int64]) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String,
		topology.Watermarks(window.BoundedOutOfOrderness(time.Duration(bound)*ms)))
	g := topology.GroupByKey(in)
	if regroup {
		g = topology.GroupBy(in, func(_, v string) string { return v }, topology.Grouped("by-value", serde.String, serde.String))
	}
	ws := topology.WindowedBy(g, window.Sliding(time.Duration(d)*ms), append(opts, topology.AllowedLateness(time.Duration(lateness)*ms))...)
	m := topology.Materialized("sliding", serde.String, serde.Int64)
	counts := topology.CountWindows(ws, m)
	topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, string) {
		return fmt.Sprintf("%s[%d,%d)=%d", w.Key, w.Window.Start, w.Window.End, n), ""
	}), "out", serde.String, serde.String)
	topology.To(topology.LateRecords(ws), "late", serde.String, serde.String)
	return tp, m
}

// slidingOutput reads the keys written to "out", and the late records as
// key@ts.
type slidingOutput struct {
	out, late *topologytest.OutputTopic[string, string]
}

func newSlidingOutput(d *topologytest.Driver) slidingOutput {
	return slidingOutput{
		out:  topologytest.NewOutputTopic(d, "out", serde.String, serde.String),
		late: topologytest.NewOutputTopic(d, "late", serde.String, serde.String),
	}
}

// read returns what was written since the last call.
func (o slidingOutput) read(t *testing.T) (out, late []string) {
	t.Helper()
	rs, err := o.out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		out = append(out, r.Key)
	}
	ls, err := o.late.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ls {
		late = append(late, fmt.Sprintf("%s@%d", r.Key, r.Timestamp))
	}
	return out, late
}

// TestSlidingWindowBoundaries checks the window set of Kafka Streams'
// sliding windows (d = 10ms, EmitFinal) on the cases at its edges. Each
// input is key@ts; after it a record far ahead closes every window, and
// the windows of key a, as emitted, must be exactly want.
func TestSlidingWindowBoundaries(t *testing.T) {
	for _, c := range []struct {
		name            string
		bound, lateness int64
		in              []string
		want            []string // key a's windows with their counts
		late            []string
	}{
		{
			name: "one record: its left window only",
			in:   []string{"a@100"},
			want: []string{"a[90,101)=1"},
		},
		{
			// KS [90,100], [100,110] and the right window of 100, [101,111].
			name: "exactly d apart: one window holds both, and the right window exists",
			in:   []string{"a@100", "a@110"},
			want: []string{"a[90,101)=1", "a[100,111)=2", "a[101,112)=1"},
		},
		{
			name: "d+1 apart: no window holds both; 100's right window is 111's left",
			in:   []string{"a@100", "a@111"},
			want: []string{"a[90,101)=1", "a[101,112)=1"},
		},
		{
			name: "equal timestamps share their windows",
			in:   []string{"a@100", "a@100", "a@105", "a@105"},
			want: []string{"a[90,101)=2", "a[95,106)=4", "a[101,112)=2"},
		},
		{
			name:  "out of order: right windows appear for earlier records",
			bound: 50,
			in:    []string{"a@110", "a@100", "a@95"},
			want:  []string{"a[85,96)=1", "a[90,101)=2", "a[96,107)=1", "a[100,111)=2", "a[101,112)=1"},
		},
		{
			// wm 119 after a@120; a@105's left window closes at 105+20.
			name:     "out of order within the lateness",
			lateness: 20,
			in:       []string{"a@100", "a@120", "a@105"},
			want:     []string{"a[90,101)=1", "a[95,106)=2", "a[101,112)=1", "a[110,121)=1"},
		},
		{
			// wm 119: a@114's left window closed (114+5 <= 119), a@115's
			// did not, and 115 makes 120 a window of two.
			name:     "beyond the lateness: late, and in no window",
			lateness: 5,
			in:       []string{"a@100", "a@120", "a@114", "a@115"},
			want:     []string{"a[90,101)=1", "a[105,116)=1", "a[110,121)=2", "a[116,127)=1"},
			late:     []string{"a@114"},
		},
		{
			// wm 104: a@103's left window [93,103] closed, although the
			// right window of 100, [101,111], would still be open: Kafka
			// Streams drops the record, and so 100 has no right window.
			name: "late when its left window closed, even if a later one is open",
			in:   []string{"a@100", "b@105", "a@103"},
			want: []string{"a[90,101)=1"},
			late: []string{"a@103"},
		},
		{
			// Where Kafka Streams would fold both into [0,10].
			name: "no floor at the epoch",
			in:   []string{"a@3", "a@8"},
			want: []string{"a[-7,4)=1", "a[-2,9)=2", "a[4,15)=1"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp, m := slidingCounts(10, c.bound, c.lateness, false, topology.EmitFinal())
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
			for _, s := range append(c.in, "z@100000") {
				var key string
				var ts int64
				if _, err := fmt.Sscanf(strings.Replace(s, "@", " ", 1), "%s %d", &key, &ts); err != nil {
					t.Fatal(err)
				}
				if err := pipe.Pipe(key, "v", ts); err != nil {
					t.Fatal(err)
				}
			}
			out, late := newSlidingOutput(d).read(t)
			got := slices.DeleteFunc(out, func(s string) bool { return !strings.HasPrefix(s, "a[") })
			slices.Sort(got)
			want := slices.Sorted(slices.Values(c.want))
			if !slices.Equal(got, want) {
				t.Errorf("windows\n got  %v\n want %v", got, want)
			}
			if !slices.Equal(late, c.late) {
				t.Errorf("late %v, want %v", late, c.late)
			}
			// Key a is gone from the store: its windows and records.
			st, err := topologytest.WindowStore(d, m)
			if err != nil {
				t.Fatal(err)
			}
			st.Fetch("a", func(b window.Bounds, n int64) error {
				t.Errorf("window %v=%d of a still kept", b, n)
				return nil
			})
			// Left: z's record and its expiry, z's window and its expiry,
			// and the task's time state.
			if n, err := d.StoreEntries(m.Name()); err != nil || n != 5 {
				t.Errorf("%d store entries, want 5 (%v)", n, err)
			}
		})
	}
}

// TestSlidingWindowsOnWatermark steps through the default emit: a window
// goes out when the watermark reaches its last timestamp, and again on
// each update within the lateness.
func TestSlidingWindowsOnWatermark(t *testing.T) {
	tp, _ := slidingCounts(10, 0, 20, false)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	output := newSlidingOutput(d)
	for i, s := range []struct {
		key       string
		ts        int64
		out, late []string
	}{
		{"a", 100, nil, nil}, // wm 99: [90,100] waits for 100
		{"a", 101, []string{"a[90,101)=1"}, nil},
		{"b", 115, []string{"a[91,102)=2", "a[101,112)=1"}, nil}, // wm 114
		// Within the lateness (95+20 > 114): every window it changes or
		// makes is complete already, so each goes out at once.
		{"a", 95, []string{"a[85,96)=1", "a[90,101)=2", "a[91,102)=3", "a[96,107)=2"}, nil},
		{"a", 94, nil, []string{"a@94"}}, // 94+20 <= 114
		{"c", 200, []string{"b[105,116)=1"}, nil},
		{"a", 179, nil, []string{"a@179"}},        // 179+20 <= 199
		{"a", 180, []string{"a[170,181)=1"}, nil}, // on time, and complete at once
		{"a", 181, []string{"a[171,182)=2", "a[181,192)=1"}, nil},
	} {
		if err := pipe.Pipe(s.key, "v", s.ts); err != nil {
			t.Fatal(err)
		}
		out, late := output.read(t)
		if !slices.Equal(out, s.out) || !slices.Equal(late, s.late) {
			t.Errorf("step %d (%s@%d): out %v late %v, want %v %v", i, s.key, s.ts, out, late, s.out, s.late)
		}
	}
}

// TestSlidingWindowsEveryUpdate emits the windows each record changes or
// makes, in order of start, and shows the order records are folded in:
// arrival order into a window that exists, timestamp order into a new one.
func TestSlidingWindowsEveryUpdate(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String,
		topology.Watermarks(window.BoundedOutOfOrderness(50*ms)))
	ws := topology.WindowedBy(topology.GroupByKey(in), window.Sliding(10*ms), topology.EmitEveryUpdate())
	agg := topology.AggregateWindows(ws, func() string { return "" },
		func(_, v, acc string) string { return acc + v },
		topology.Materialized("concat", serde.String, serde.String))
	topology.To(topology.Map(topology.ToStream(agg), func(w topology.Windowed[string], s string) (string, string) {
		return fmt.Sprintf("%s[%d,%d)=%s", w.Key, w.Window.Start, w.Window.End, s), ""
	}), "out", serde.String, serde.String)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
	for i, s := range []struct {
		ts   int64
		v    string
		want []string
	}{
		{100, "p", []string{"a[90,101)=p"}},
		{108, "q", []string{"a[98,109)=pq", "a[101,112)=q"}},
		{104, "r", []string{"a[94,105)=pr", "a[98,109)=pqr", "a[101,112)=qr", "a[105,116)=q"}},
		// [100,110], the right window of 99, is new: folded in timestamp
		// order, p r q; the others take s last.
		{99, "s", []string{"a[89,100)=s", "a[90,101)=ps", "a[94,105)=prs", "a[98,109)=pqrs", "a[100,111)=prq"}},
	} {
		if err := pipe.Pipe("a", s.v, s.ts); err != nil {
			t.Fatal(err)
		}
		rs, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Key)
			if w := r.Key; !strings.HasPrefix(w, "a[") {
				t.Errorf("unexpected key %q", w)
			}
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("step %d (@%d): got %v, want %v", i, s.ts, got, s.want)
		}
	}
}

// TestSlidingReduceStampsEnd checks ReduceWindows over sliding windows and
// the timestamp of a result: the window's last millisecond.
func TestSlidingReduceStampsEnd(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.Int64Text)
	ws := topology.WindowedBy(topology.GroupByKey(in), window.Sliding(10*ms))
	maxes := topology.ReduceWindows(ws, func(a, b int64) int64 { return max(a, b) },
		topology.Materialized("max", serde.String, serde.Int64))
	topology.To(topology.ToStream(maxes), "out", topology.WindowedSerde(serde.String), serde.Int64)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64Text)
	for _, r := range []struct{ ts, v int64 }{{100, 7}, {105, 3}, {200, 0}} {
		if err := pipe.Pipe("a", r.v, r.ts); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := topologytest.NewOutputTopic(d, "out", topology.WindowedSerde(serde.String), serde.Int64).ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprintf("%v=%d@%d", r.Key.Window, r.Value, r.Timestamp))
	}
	if want := "[[90,101)=7@100 [95,106)=7@105 [101,112)=3@111]"; fmt.Sprint(got) != want {
		t.Errorf("got %v, want %s", got, want)
	}
}

func TestSlidingWindowsRejected(t *testing.T) {
	build := func(w topology.Windows, opts ...topology.WindowOption) error {
		tp := topology.New()
		in := topology.From(tp, "in", serde.String, serde.String)
		ws := topology.WindowedBy(topology.GroupByKey(in), w, opts...)
		topology.CountWindows(ws, topology.Materialized("s", serde.String, serde.Int64))
		_, err := tp.Build()
		return err
	}
	for name, err := range map[string]error{
		"zero difference": build(window.Sliding(0)),
		"other trigger":   build(window.Sliding(time.Second), topology.WithTrigger(window.CountTrigger(2))),
		"purging":         build(window.Sliding(time.Second), topology.WithTrigger(window.Purging(window.OnWatermark()))),
	} {
		if !errors.Is(err, topology.ErrInvalidWindow) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := build(window.Sliding(time.Second), topology.WithTrigger(window.EarlyEvery(3))); err == nil || !strings.Contains(err.Error(), "sliding windows emit") {
		t.Errorf("trigger error does not say why: %v", err)
	}
	for _, o := range []topology.WindowOption{topology.EmitFinal(), topology.EmitEveryUpdate(), topology.WithTrigger(window.OnWatermark())} {
		if err := build(window.Sliding(time.Second), o); err != nil {
			t.Errorf("supported emit rejected: %v", err)
		}
	}
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	ws := topology.WindowedBy(topology.GroupByKey(in), window.Sliding(time.Second))
	topology.ProcessWindows(ws, func(string, window.Bounds, []topology.Element[string]) []string { return nil },
		topology.Materialized("p", serde.String, serde.String))
	if _, err := tp.Build(); !errors.Is(err, topology.ErrInvalidWindow) {
		t.Errorf("ProcessWindows over sliding windows: %v", err)
	}
}

// slidingOracle is a brute-force model of sliding windows: the watermark
// is max(ts) - bound - 1; a record is late when ts + lateness is at or
// below the watermark before it; the windows of a key are recomputed from
// scratch from its on-time records (the left window of each, and the
// right window of each that has a record within d after it), each
// counting the records inside it. Emits per mode: "final" once when the
// watermark reaches s+d+lateness; "watermark" when it reaches s+d, and
// again whenever a record changes the window after that; "update"
// whenever a record changes or makes the window.
type slidingOracle struct {
	d, bound, lateness int64
	mode               string
	wm                 int64
	recs               map[string][]int64
	fired              map[string]bool // key|start
	out, late          []string
}

func (o *slidingOracle) windows(tss []int64) map[int64]int {
	ws := map[int64]int{}
	for _, t := range tss {
		ws[t-o.d] = 0
		for _, u := range tss {
			if t < u && u <= t+o.d {
				ws[t+1] = 0
			}
		}
	}
	for s := range ws {
		for _, u := range tss {
			if s <= u && u <= s+o.d {
				ws[s]++
			}
		}
	}
	return ws
}

func (o *slidingOracle) emit(key string, s int64, n int) {
	o.out = append(o.out, fmt.Sprintf("%s[%d,%d)=%d", key, s, s+o.d+1, n))
}

func (o *slidingOracle) add(key string, ts int64) {
	if ts+o.lateness <= o.wm {
		o.late = append(o.late, fmt.Sprintf("%s@%d", key, ts))
	} else {
		before := o.windows(o.recs[key])
		o.recs[key] = append(o.recs[key], ts)
		for s, n := range o.windows(o.recs[key]) {
			if m, ok := before[s]; ok && m == n {
				continue // unchanged
			}
			switch {
			case o.mode == "update":
				o.emit(key, s, n)
			case o.mode == "watermark" && s+o.d <= o.wm:
				o.emit(key, s, n)
				o.fired[fmt.Sprintf("%s|%d", key, s)] = true
			}
		}
	}
	o.wm = max(o.wm, ts-o.bound-1)
	if o.mode == "update" {
		return
	}
	for key, tss := range o.recs {
		for s, n := range o.windows(tss) {
			at := s + o.d
			if o.mode == "final" {
				at += o.lateness
			}
			if k := fmt.Sprintf("%s|%d", key, s); at <= o.wm && !o.fired[k] {
				o.emit(key, s, n)
				o.fired[k] = true
			}
		}
	}
}

// TestSlidingWindowsMatchOracle compares sliding-window counts, after a
// repartition, with the oracle over random out-of-order input, in each
// emit mode: the emitted (key, window, count) multiset and the late
// records exactly. A last record far ahead closes everything, after which
// the store must hold only that record's state.
func TestSlidingWindowsMatchOracle(t *testing.T) {
	modes := []struct {
		name string
		opts []topology.WindowOption
	}{
		{"final", []topology.WindowOption{topology.EmitFinal()}},
		{"watermark", nil},
		{"update", []topology.WindowOption{topology.EmitEveryUpdate()}},
	}
	lateSeen := 0
	for _, mode := range modes {
		seeds := uint64(25)
		if raceEnabled {
			seeds = 4
		}
		for seed := range seeds {
			t.Run(fmt.Sprintf("%s/%d", mode.name, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				diff, bound, lateness := 1+int64(rng.IntN(40)), int64(rng.IntN(50)), int64(rng.IntN(40))
				tp, m := slidingCounts(diff, bound, lateness, true, mode.opts...)
				d, err := topologytest.New(tp)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
				o := &slidingOracle{d: diff, bound: bound, lateness: lateness, mode: mode.name,
					wm: window.NoWatermark, recs: map[string][]int64{}, fired: map[string]bool{}}
				ts := int64(1000)
				keys := 1 + rng.IntN(4)
				for range 300 {
					ts += int64(rng.IntN(15))
					rts := max(0, ts-int64(rng.IntN(int(bound+lateness+20))))
					key := string(rune('a' + rng.IntN(keys)))
					if err := pipe.Pipe("x", key, rts); err != nil {
						t.Fatal(err)
					}
					o.add(key, rts)
				}
				fired := len(o.out)
				if err := pipe.Pipe("x", "z", ts+10_000); err != nil {
					t.Fatal(err)
				}
				o.add("z", ts+10_000)
				if fired == 0 {
					t.Fatal("the oracle fired no window: the input does not exercise anything")
				}
				lateSeen += len(o.late)
				got, late := newSlidingOutput(d).read(t)
				t.Logf("d %d, bound %d, lateness %d, %d keys: %d results, %d late", diff, bound, lateness, keys, len(o.out), len(o.late))
				slices.Sort(got)
				slices.Sort(o.out)
				if !slices.Equal(got, o.out) {
					t.Errorf("results differ (d %d, bound %d, lateness %d):\n got  %v\n want %v", diff, bound, lateness, got, o.out)
				}
				if !slices.Equal(late, o.late) {
					t.Errorf("late %v, want %v", late, o.late)
				}
				// z's record, its window (with a pending firing unless
				// every update is emitted), their expiries, the time state.
				want := 6
				if mode.name != "watermark" {
					want = 5
				}
				if n, err := d.StoreEntries(m.Name()); err != nil || n != want {
					t.Errorf("%d store entries at the end, want %d (%v)", n, want, err)
				}
			})
		}
	}
	if lateSeen == 0 {
		t.Error("no record was late: the input does not exercise the lateness")
	}
}

// TestSlidingLateFiringAheadOfTheTask feeds the repartition topic
// directly, so a record is judged against an upstream watermark ahead of
// the task's own: a window whose firing is still due in the task goes out
// at once on the late update, and not again when the task's watermark
// reaches it.
func TestSlidingLateFiringAheadOfTheTask(t *testing.T) {
	tp, _ := slidingCounts(10, 0, 100, true)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	repartition := topologytest.NewInputTopic(d, "test-by-value-repartition", serde.String, serde.String)
	recordAt := func(wm int64) topology.Header {
		return topology.Header{Key: exec.HeaderRecordWatermark, Value: binary.BigEndian.AppendUint64(nil, uint64(wm))}
	}
	output := newSlidingOutput(d)
	for i, s := range []struct {
		ts, wm int64
		want   []string
	}{
		{100, 50, nil}, // [90,100] fires when the task reaches 100
		{95, 150, []string{"a[85,96)=1", "a[90,101)=2", "a[96,107)=1"}},
	} {
		if err := repartition.Pipe("a", "a", s.ts, recordAt(s.wm)); err != nil {
			t.Fatal(err)
		}
		if out, late := output.read(t); !slices.Equal(out, s.want) || len(late) > 0 {
			t.Errorf("step %d: out %v late %v, want %v", i, out, late, s.want)
		}
	}
	// The upstream writer 0 announces 200: the task's watermark passes
	// every window's firing, and all but [96,106] close.
	wm := append(binary.BigEndian.AppendUint64(nil, 200), 0)
	if err := repartition.PipeBytes(nil, wm, 0, topology.Header{Key: exec.HeaderWatermark, Value: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	if out, _ := output.read(t); len(out) > 0 {
		t.Errorf("fired again: %v", out)
	}
	if got, _ := d.Watermark("sliding"); got != 200 {
		t.Errorf("task watermark %d, want 200", got)
	}
}
