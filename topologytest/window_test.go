package topologytest_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

func TestTumblingCountFiresOnWatermark(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String, topology.Watermarks(window.BoundedOutOfOrderness(10*time.Millisecond)))
	ws := topology.WindowedBy(topology.GroupByKey(in), window.Tumbling(100*time.Millisecond), topology.AllowedLateness(20*time.Millisecond))
	m := topology.Materialized("counts", serde.String, serde.Int64)
	counts := topology.CountWindows(ws, m)
	topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, string) {
		return fmt.Sprintf("%s@%d", w.Key, w.Window.Start), fmt.Sprint(n)
	}), "out", serde.String, serde.String)
	topology.To(topology.LateRecords(ws), "late", serde.String, serde.String)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
	late := topologytest.NewOutputTopic(d, "late", serde.String, serde.String)
	steps := []struct {
		ts       int64
		key      string
		wantOut  []string
		wantLate []string
	}{
		{10, "a", nil, nil},
		{99, "a", nil, nil},
		{100, "b", nil, nil},               // wm 89
		{109, "a", nil, nil},               // wm 98: window [0,100) fires at wm 99
		{110, "b", []string{"a@0=2"}, nil}, // wm 99
		{50, "a", []string{"a@0=3"}, nil},  // late within lateness: refire
		{130, "c", nil, nil},               // wm 119: [0,100) closes (99+20)
		{60, "a", nil, []string{"a"}},      // beyond lateness
		{210, "c", []string{"a@100=1", "b@100=2", "c@100=1"}, nil},
	}
	for i, s := range steps {
		if err := pipe.Pipe(s.key, "v", s.ts); err != nil {
			t.Fatal(err)
		}
		rs, err := out.ReadRecords()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Key+"="+r.Value)
		}
		if fmt.Sprint(got) != fmt.Sprint(s.wantOut) {
			t.Errorf("step %d (ts %d): out %v, want %v", i, s.ts, got, s.wantOut)
		}
		ls, _ := late.ReadRecords()
		var gotLate []string
		for _, r := range ls {
			gotLate = append(gotLate, r.Key)
		}
		if fmt.Sprint(gotLate) != fmt.Sprint(s.wantLate) {
			t.Errorf("step %d (ts %d): late %v, want %v", i, s.ts, gotLate, s.wantLate)
		}
	}
	st, err := topologytest.WindowStore(d, m)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	st.All(func(w topology.Windowed[string], n int64) error {
		kept = append(kept, fmt.Sprintf("%s@%d=%d", w.Key, w.Window.Start, n))
		return nil
	})
	// wm is 199: [100,200) fired and expires at 219; [200,300) is open.
	if want := "[a@100=1 b@100=2 c@100=1 c@200=1]"; fmt.Sprint(kept) != want {
		t.Errorf("kept %v, want %s", kept, want)
	}
}

func TestSessionStoreReads(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	m := topology.Materialized("sessions", serde.String, serde.Int64)
	ws := topology.WindowedBy(topology.GroupByKey(in), window.InactivityGap(10*time.Millisecond), topology.AllowedLateness(time.Second))
	topology.To(topology.ToStream(topology.CountWindows(ws, m)), "out", topology.WindowedSerde(serde.String), serde.Int64)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	for _, r := range []struct {
		k  string
		ts int64
	}{{"a", 100}, {"a", 105}, {"a", 200}, {"b", 150}, {"a", 110}} {
		if err := pipe.Pipe(r.k, "", r.ts); err != nil {
			t.Fatal(err)
		}
	}
	st, err := topologytest.WindowStore(d, m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := st.Fetch("a", func(b window.Bounds, n int64) error {
		got = append(got, fmt.Sprintf("%v=%d", b, n))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Sessions [first, last] are [first, last+1) half-open.
	if want := "[[100,111)=3 [200,201)=1]"; fmt.Sprint(got) != want {
		t.Errorf("sessions of a: %v, want %s", got, want)
	}
}

// TestMergedSessionsAreRetracted emits every update of sessions: when a
// record bridges two sessions, both are deleted downstream (tombstones) and
// the merged one emitted, so the output read as a table holds exactly the
// current sessions.
func TestMergedSessionsAreRetracted(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	ws := topology.WindowedBy(topology.GroupByKey(in), window.InactivityGap(20*time.Millisecond), topology.EmitEveryUpdate(), topology.AllowedLateness(time.Second))
	topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("s", serde.String, serde.Int64))),
		"out", topology.WindowedSerde(serde.String), serde.Int64)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	out := topologytest.NewOutputTopic(d, "out", topology.WindowedSerde(serde.String), serde.Int64)
	for _, ts := range []int64{100, 130, 115} { // 115 bridges [100] and [130]
		if err := pipe.Pipe("a", "", ts); err != nil {
			t.Fatal(err)
		}
	}
	m, err := topologytest.ToMap(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for w, n := range m {
		got = append(got, fmt.Sprintf("%v=%d", w.Window, n))
	}
	if want := "[[100,131)=3]"; fmt.Sprint(got) != want {
		t.Errorf("sessions as a table: %v, want %s", got, want)
	}
}

// TestWindowsOfByteKeysCloseTogether: many windows of []byte keys (whose
// serde decodes without copying) close at one watermark; each result
// keeps its own key. A decoded key that aliased a buffer the window
// reuses for the next close came out as the last key closed (the bounded
// pageviews run's sessions, all counted under two users); the sessions
// case catches that buffer, the tumbling one checks time windows the same
// way, though its results were not affected by it.
func TestWindowsOfByteKeysCloseTogether(t *testing.T) {
	for _, name := range []string{"tumbling", "sessions"} {
		t.Run(name, func(t *testing.T) {
			tp := topology.New()
			in := topology.From(tp, "in", serde.Bytes, serde.String)
			var ws topology.WindowedStream[[]byte, string]
			if name == "tumbling" {
				ws = topology.WindowedBy(topology.GroupByKey(in), window.Tumbling(100*time.Millisecond), topology.EmitFinal())
			} else {
				ws = topology.WindowedBy(topology.GroupByKey(in), window.InactivityGap(50*time.Millisecond), topology.EmitFinal())
			}
			counts := topology.CountWindows(ws, topology.Materialized("counts", serde.Bytes, serde.Int64))
			topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[[]byte], n int64) ([]byte, string) {
				return w.Key, fmt.Sprint(n)
			}), "out", serde.Bytes, serde.String)
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			pipe := topologytest.NewInputTopic(d, "in", serde.Bytes, serde.String)
			out := topologytest.NewOutputTopic(d, "out", serde.Bytes, serde.String)
			want := map[string]string{}
			for i := range 40 {
				// Keys of every length from 1 to 40 bytes, key i seen i%3+1 times.
				k := []byte(fmt.Sprintf("%0*d", i+1, i))
				for j := range i%3 + 1 {
					if err := pipe.Pipe(k, "v", int64(10+j)); err != nil {
						t.Fatal(err)
					}
				}
				want[string(k)] = fmt.Sprint(i%3 + 1)
			}
			if err := pipe.Pipe([]byte("late-closer"), "v", 10_000); err != nil { // closes every window above at once
				t.Fatal(err)
			}
			rs, err := out.ReadRecords()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, r := range rs {
				if _, dup := got[string(r.Key)]; dup {
					t.Errorf("key %q came out twice", r.Key)
				}
				got[string(r.Key)] = r.Value
			}
			if !maps.Equal(got, want) {
				t.Errorf("%d results %v, want %d: %v", len(got), got, len(want), want)
			}
		})
	}
}
