package layout

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/window"
)

// TestWindowKeysEveryKeyLength: over keys of every length, UUIDs and
// starts at the ends of time, a window key in either layout parses back
// to its key and start; laid out by start, keys order by start first and,
// within a start, as the layout by key orders them (so the windows that
// close together close in one order in both); and a truncated or
// lengthened key is corrupt, not misread.
func TestWindowKeysEveryKeyLength(t *testing.T) {
	keys := testkeys.Bytes()
	starts := []int64{math.MinInt64, -60_000, -1, 0, 1, 60_000, math.MaxInt64}
	for _, kb := range keys {
		for _, start := range starts {
			for _, k := range [][]byte{WindowKey(nil, kb, start), StartKey(nil, kb, start)} {
				gk, gs, err := ParseWindowKey(k)
				if err != nil || !bytes.Equal(gk, kb) || gs != start || WindowStart(k) != start {
					t.Fatalf("key %x: parsed %x@%d (%v), start %d; want %x@%d", k, gk, gs, err, WindowStart(k), kb, start)
				}
				for _, bad := range [][]byte{k[:len(k)-1], append(append([]byte(nil), k...), 0)} {
					if _, _, err := ParseWindowKey(bad); !errors.Is(err, window.ErrCorrupt) {
						t.Fatalf("key %x: %x parsed (%v)", k, bad, err)
					}
				}
			}
		}
	}
	for _, a := range keys {
		for _, b := range keys {
			byKey := bytes.Compare(WindowKey(nil, a, 0), WindowKey(nil, b, 0))
			if got := bytes.Compare(StartKey(nil, a, 0), StartKey(nil, b, 0)); got != byKey {
				t.Fatalf("keys %x, %x at one start: by start %d, by key %d", a, b, got, byKey)
			}
			if bytes.Compare(StartKey(nil, a, -1), StartKey(nil, b, 0)) >= 0 {
				t.Fatalf("keys %x, %x: an earlier start does not come first", a, b)
			}
		}
	}
}
