package ops

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

func windowStoreProc(tr window.Trigger, sessions bool) *WindowStates[string, string] {
	s := &WindowStates[string, string]{
		name: "w", ks: serde.String, vs: serde.String, trigger: tr, sessions: sessions,
		st: store.NewStaged("w", store.NewMemory()),
	}
	return s
}

// TestWindowValueRoundTrip: every combination of the stored facts comes
// back as written, for keys of every encoded length and aggregates empty
// or long.
func TestWindowValueRoundTrip(t *testing.T) {
	for _, key := range []string{"", "a", "0f8c3a52-6f1e-4c8e-9d0b-6a3e2f1c9b7d", strings.Repeat("k", 130)} {
		for _, agg := range []string{"", "x", strings.Repeat("é", 100)} {
			for _, shown := range []string{"-", "", "s", strings.Repeat("s", 200)} { // "-": none
				for _, hasAgg := range []bool{false, true} {
					for _, emitted := range []bool{false, true} {
						p := windowStoreProc(window.OnWatermark(), true)
						w := WindowState[string]{Bounds: window.Bounds{Start: -5, End: 1 << 40}, Count: 7, EventTimer: window.NoTimer,
							ProcTimer: 99, Seq: 3, SinceFire: 200, HasAgg: hasAgg, Emitted: emitted}
						if hasAgg {
							w.Agg = agg
						}
						if shown != "-" && emitted {
							w.shown = []byte(shown)
						}
						dk := layout.WindowKey(nil, []byte(key), w.Bounds.Start)
						if err := p.Put(dk, w); err != nil {
							t.Fatal(err)
						}
						got, ok, err := p.Get(dk)
						if err != nil || !ok {
							t.Fatalf("get: %v %v", ok, err)
						}
						name := fmt.Sprintf("key %d agg %q shown %q hasAgg %v emitted %v", len(key), agg, shown, hasAgg, emitted)
						if got.Bounds != w.Bounds || got.Count != w.Count || got.EventTimer != w.EventTimer || got.ProcTimer != w.ProcTimer ||
							got.Seq != w.Seq || got.SinceFire != w.SinceFire || got.HasAgg != w.HasAgg || got.Agg != w.Agg ||
							got.Emitted != w.Emitted || got.legacy {
							t.Errorf("%s: read back %+v, wrote %+v", name, got, w)
						}
						// What went out: the shown bytes, or the aggregate.
						wantShown := string(w.shown)
						if w.shown == nil && hasAgg {
							wantShown = agg
						}
						if emitted && (hasAgg || w.shown != nil) {
							if s := string(got.shown); got.shown == nil && got.enc != nil {
								s = string(got.enc)
							} else if got.shown == nil {
								t.Errorf("%s: emitted result lost", name)
							} else if s != wantShown {
								t.Errorf("%s: emitted result %q, want %q", name, s, wantShown)
							}
						}
					}
				}
			}
		}
	}
}

// TestWindowValueLegacy: an entry written before the since-fire count and
// the emitted flag were kept (flags 0 or 1, the aggregate right after the
// header) still decodes: its since-fire count is its count, and whether it
// was emitted is what the old retraction rule inferred.
func TestWindowValueLegacy(t *testing.T) {
	legacy := func(hasAgg bool, eventTimer int64, agg string) []byte {
		val := make([]byte, layout.WindowValueHeader)
		binary.BigEndian.PutUint64(val, uint64(100))
		binary.BigEndian.PutUint64(val[8:], 5)
		binary.BigEndian.PutUint64(val[16:], uint64(eventTimer))
		noTimer := window.NoTimer
		binary.BigEndian.PutUint64(val[24:], uint64(noTimer))
		if hasAgg {
			val[40] = 1
			val = append(val, agg...)
		}
		return val
	}
	cases := []struct {
		tr         window.Trigger
		hasAgg     bool
		eventTimer int64
		emitted    bool
	}{
		{window.EveryRecord(), true, window.NoTimer, true},
		{window.EveryRecord(), false, window.NoTimer, false},
		{window.OnWatermark(), true, window.NoTimer, true}, // its firing went out
		{window.OnWatermark(), true, 130, false},           // still due
		{window.EarlyEvery(2), true, window.NoTimer, false},
		{window.CountTrigger(2), true, window.NoTimer, false},
	}
	for _, c := range cases {
		p := windowStoreProc(c.tr, true)
		w, err := p.Decode(10, legacy(c.hasAgg, c.eventTimer, "agg"))
		if err != nil {
			t.Fatalf("%v: %v", c.tr, err)
		}
		if !w.legacy || w.Count != 5 || w.SinceFire != 5 || w.HasAgg != c.hasAgg || w.Emitted != c.emitted || w.Bounds.End != 100 {
			t.Errorf("%v hasAgg %v timer %d: decoded %+v", c.tr, c.hasAgg, c.eventTimer, w)
		}
		if c.hasAgg && w.Agg != "agg" {
			t.Errorf("%v: aggregate %q", c.tr, w.Agg)
		}
		// IQ reads it too.
		if _, ab, err := layout.ParseWindowValue(legacy(c.hasAgg, c.eventTimer, "agg")); err != nil || c.hasAgg && string(ab) != "agg" {
			t.Errorf("%v: ParseWindowValue %q %v", c.tr, ab, err)
		}
	}
}
