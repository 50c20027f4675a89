package topologytest_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// TestWindowStateStaysBounded runs tumbling windows, hopping windows and
// sessions over a long stream of keys that come and go, and checks that
// each store holds no more entries at the end than after the first tenth:
// windows are removed once the watermark passes their close time.
func TestWindowStateStaysBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		w    topology.Windows
	}{
		{"tumbling", window.Tumbling(time.Second)},
		{"hopping", window.Hopping(time.Second, 250*time.Millisecond)},
		{"sessions", window.InactivityGap(500 * time.Millisecond)},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := topology.New()
			in := topology.From(tp, "in", serde.String, serde.String,
				topology.Watermarks(window.BoundedOutOfOrderness(200*time.Millisecond)))
			ws := topology.WindowedBy(topology.GroupByKey(in), c.w, topology.AllowedLateness(time.Second), topology.EmitFinal())
			counts := topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))
			topology.To(topology.ToStream(counts), "out", topology.WindowedSerde(serde.String), serde.Int64)
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
			out := topologytest.NewOutputTopic(d, "out", topology.WindowedSerde(serde.String), serde.Int64)
			rng := rand.New(rand.NewPCG(1, 2))
			n := 12_000
			if raceEnabled {
				n = 3_000
			}
			var early, peak int
			emitted := 0
			for i := range n {
				// 50 keys active at a time, drifting: old keys go away.
				key := string(rune('A'+(i/400+rng.IntN(50))%500%26)) + string(rune('a'+(i/400+rng.IntN(50))%500/26))
				if err := pipe.Pipe(key, "", int64(i*10+rng.IntN(150))); err != nil {
					t.Fatal(err)
				}
				if i%(n/60) == n/60-1 { // n/10 is a multiple: "early" is sampled
					entries, err := d.StoreEntries("w")
					if err != nil {
						t.Fatal(err)
					}
					if i == n/10-1 {
						early = entries
					}
					peak = max(peak, entries)
				}
			}
			rs, err := out.ReadRecords()
			if err != nil {
				t.Fatal(err)
			}
			emitted = len(rs)
			final, _ := d.StoreEntries("w")
			t.Logf("entries after %d records: %d; peak %d; at the end %d; %d windows emitted", n/10, early, peak, final, emitted)
			if emitted == 0 || early == 0 {
				t.Fatal("nothing was windowed")
			}
			// Flat: the end holds about what the start did, while the
			// stream went on for ten times as long.
			if final > 2*early || peak > 3*early {
				t.Errorf("state grew: %d entries after %d records, %d at the end, peak %d", early, n/10, final, peak)
			}
		})
	}
}

// TestIdleInputStopsHoldingTheWatermark reads two topics in one task: while
// one of them has no records the watermark cannot pass it, unless an idle
// timeout excludes it; a record on it makes it rejoin.
func TestIdleInputStopsHoldingTheWatermark(t *testing.T) {
	build := func() *topology.Topology {
		tp := topology.New()
		a := topology.From(tp, "a", serde.String, serde.String)
		b := topology.From(tp, "b", serde.String, serde.String)
		ws := topology.WindowedBy(topology.GroupByKey(topology.Merge(a, b)), window.Tumbling(100*time.Millisecond))
		topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized("w", serde.String, serde.Int64))),
			"out", topology.WindowedSerde(serde.String), serde.Int64)
		return tp
	}
	run := func(t *testing.T, opts ...topologytest.Option) (fired []int, wms []int64) {
		d, err := topologytest.New(build(), append(opts, topologytest.WallClock(time.UnixMilli(0)))...)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		a := topologytest.NewInputTopic(d, "a", serde.String, serde.String)
		b := topologytest.NewInputTopic(d, "b", serde.String, serde.String)
		out := topologytest.NewOutputTopic(d, "out", topology.WindowedSerde(serde.String), serde.Int64)
		step := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
			rs, _ := out.ReadRecords()
			fired = append(fired, len(rs))
			wm, _ := d.Watermark("w")
			wms = append(wms, wm)
		}
		step(a.Pipe("k", "", 50))
		step(d.AdvanceWallClock(time.Second)) // b silent for a second
		step(a.Pipe("k", "", 150))            // a's watermark 149
		step(b.Pipe("k", "", 120))            // b rejoins at 119
		step(b.Pipe("k", "", 250))
		return fired, wms
	}
	t.Run("no idle timeout", func(t *testing.T) {
		fired, wms := run(t)
		if want := []int{0, 0, 0, 1, 0}; !equalInts(fired, want) {
			t.Errorf("fired %v (watermarks %v), want %v: b holds the watermark until its first record", fired, wms, want)
		}
	})
	t.Run("idle timeout", func(t *testing.T) {
		fired, wms := run(t, topologytest.IdleTimeout(500*time.Millisecond))
		if want := []int{0, 0, 1, 0, 0}; !equalInts(fired, want) {
			t.Errorf("fired %v (watermarks %v), want %v: idle b must not hold the watermark", fired, wms, want)
		}
		if wms[3] != wms[2] {
			t.Errorf("watermark went from %d to %d when b rejoined; it must wait, not go back", wms[2], wms[3])
		}
	})
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
