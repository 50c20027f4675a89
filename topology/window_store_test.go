package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

func windowStoreProc(tr window.Trigger, sessions bool) *windowProc[string, string, string] {
	p := &windowProc[string, string, string]{
		m:   Materialized("w", serde.String, serde.String),
		cfg: windowConfig{trigger: tr},
		st:  store.NewStaged("w", store.NewMemory()),
	}
	if sessions {
		p.sessions, p.isSessions = window.InactivityGap(30*time.Millisecond), true
	}
	return p
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
						w := stored[string]{b: window.Bounds{Start: -5, End: 1 << 40}, count: 7, eventTimer: window.NoTimer,
							procTime: 99, seq: 3, sinceFire: 200, hasAgg: hasAgg, emitted: emitted}
						if hasAgg {
							w.agg = agg
						}
						if shown != "-" && emitted {
							w.shown = []byte(shown)
						}
						dk := layout.WindowKey(nil, []byte(key), w.b.Start)
						if err := p.put(dk, w); err != nil {
							t.Fatal(err)
						}
						got, ok, err := p.get(dk)
						if err != nil || !ok {
							t.Fatalf("get: %v %v", ok, err)
						}
						name := fmt.Sprintf("key %d agg %q shown %q hasAgg %v emitted %v", len(key), agg, shown, hasAgg, emitted)
						if got.b != w.b || got.count != w.count || got.eventTimer != w.eventTimer || got.procTime != w.procTime ||
							got.seq != w.seq || got.sinceFire != w.sinceFire || got.hasAgg != w.hasAgg || got.agg != w.agg ||
							got.emitted != w.emitted || got.legacy {
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
		val := make([]byte, windowHeader)
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
		w, err := p.decode(10, legacy(c.hasAgg, c.eventTimer, "agg"))
		if err != nil {
			t.Fatalf("%v: %v", c.tr, err)
		}
		if !w.legacy || w.count != 5 || w.sinceFire != 5 || w.hasAgg != c.hasAgg || w.emitted != c.emitted || w.b.End != 100 {
			t.Errorf("%v hasAgg %v timer %d: decoded %+v", c.tr, c.hasAgg, c.eventTimer, w)
		}
		if c.hasAgg && w.agg != "agg" {
			t.Errorf("%v: aggregate %q", c.tr, w.agg)
		}
		// IQ reads it too.
		if _, ab, err := decodeWindow[string](10, legacy(c.hasAgg, c.eventTimer, "agg")); err != nil || c.hasAgg && string(ab) != "agg" {
			t.Errorf("%v: decodeWindow %q %v", c.tr, ab, err)
		}
	}
}

// TestWindowValueCorrupt: undefined flags, legacy entries with new flags,
// and truncated fields are reported as corrupt, not misread.
func TestWindowValueCorrupt(t *testing.T) {
	base := make([]byte, windowHeader)
	for _, c := range []struct {
		name string
		val  []byte
	}{
		{"short", base[:windowHeader-1]},
		{"undefined flag", append(append([]byte(nil), base[:40]...), 1<<4)},
		{"legacy with emitted", append(append([]byte(nil), base[:40]...), flagEmitted)},
		{"no since-fire", append(append([]byte(nil), base[:40]...), flagKept)},
		{"shown past the end", append(append([]byte(nil), base[:40]...), flagKept|flagShown, 0, 9, 'a')},
	} {
		if _, _, err := decodeWindow[string](0, c.val); !errors.Is(err, window.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.name, err)
		}
	}
}
