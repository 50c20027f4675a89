package ops

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/store"
)

// TestWindowsOfEveryKeyLength: WindowsOf finds exactly one key's windows,
// oldest first, among keys of every length and UUIDs (some a prefix of
// another), in either layout, with starts at the ends of time, some
// committed to the engine and some only staged, and some deleted in the
// stage.
func TestWindowsOfEveryKeyLength(t *testing.T) {
	keys := testkeys.Bytes()
	starts := []int64{math.MinInt64, -100, 0, 100, 200, math.MaxInt64}
	for _, byStart := range []bool{false, true} {
		key := layout.WindowKey
		if byStart {
			key = layout.StartKey
		}
		e := store.NewMemory()
		var ws []store.Write
		for i, kb := range keys {
			for j, s := range starts[:4] {
				if (i+j)%3 != 0 {
					ws = append(ws, store.Write{Key: key(nil, kb, s), Value: fmt.Appendf(nil, "%d", s)})
				}
			}
		}
		if err := e.Apply(ws, 0); err != nil {
			t.Fatal(err)
		}
		st := store.NewStaged("w", e)
		want := map[string][]int64{}
		for i, kb := range keys {
			for j, s := range starts {
				k := key(nil, kb, s)
				switch {
				case (i+j)%5 == 0:
					if err := st.Delete(k); err != nil {
						t.Fatal(err)
					}
					continue
				case j >= 4 || (i+j)%3 == 0:
					if err := st.Put(k, fmt.Appendf(nil, "%d", s)); err != nil {
						t.Fatal(err)
					}
				}
				want[string(kb)] = append(want[string(kb)], s)
			}
		}
		for _, kb := range keys {
			var got []int64
			err := WindowsOf(st, kb, func(k, v []byte) error {
				gk, s, err := layout.ParseWindowKey(k)
				if err != nil || !bytes.Equal(gk, kb) || string(v) != fmt.Sprint(s) {
					return fmt.Errorf("key %x: window %x=%q (%v)", kb, k, v, err)
				}
				got = append(got, s)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want[string(kb)]) {
				t.Fatalf("by start %v, key %x: windows at %v, want %v", byStart, kb, got, want[string(kb)])
			}
		}
	}
}
