package window

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"
)

func TestSessionsValidate(t *testing.T) {
	for _, gap := range []time.Duration{0, -time.Second, time.Microsecond} {
		if err := InactivityGap(gap).Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("gap %v accepted: %v", gap, err)
		}
	}
	if err := InactivityGap(time.Millisecond).Validate(); err != nil {
		t.Errorf("valid gap rejected: %v", err)
	}
}

func TestSessionsMerge(t *testing.T) {
	s := InactivityGap(10 * time.Millisecond)
	for _, c := range []struct {
		existing []Bounds
		ts       int64
		merged   Bounds
		absorbed []Bounds
	}{
		{nil, 100, Bounds{100, 101}, nil},
		{[]Bounds{{100, 101}}, 105, Bounds{100, 106}, []Bounds{{100, 101}}},
		{[]Bounds{{100, 101}}, 110, Bounds{100, 111}, []Bounds{{100, 101}}}, // last+gap: inclusive
		{[]Bounds{{100, 101}}, 111, Bounds{111, 112}, nil},                  // one past
		{[]Bounds{{100, 101}}, 90, Bounds{90, 101}, []Bounds{{100, 101}}},   // first-gap: inclusive
		{[]Bounds{{100, 101}}, 89, Bounds{89, 90}, nil},
		{[]Bounds{{100, 121}}, 110, Bounds{100, 121}, []Bounds{{100, 121}}},                         // inside
		{[]Bounds{{100, 101}, {120, 131}}, 110, Bounds{100, 131}, []Bounds{{100, 101}, {120, 131}}}, // bridge
		{[]Bounds{{0, 1}, {120, 131}, {100, 101}}, 110, Bounds{100, 131}, []Bounds{{120, 131}, {100, 101}}},
		{[]Bounds{{math.MinInt64, math.MinInt64 + 1}}, math.MaxInt64 - 1, Bounds{math.MaxInt64 - 1, math.MaxInt64}, nil}, // no overflow
	} {
		existing := slices.Clone(c.existing)
		merged, absorbed := s.Merge(existing, c.ts)
		if merged != c.merged || fmt.Sprint(absorbed) != fmt.Sprint(c.absorbed) {
			t.Errorf("Merge(%v, %d) = %v, %v; want %v, %v", c.existing, c.ts, merged, absorbed, c.merged, c.absorbed)
		}
	}
}

func TestSessionsClosed(t *testing.T) {
	s := InactivityGap(10 * time.Millisecond)
	b := Bounds{100, 121} // records 100..120
	for wm, want := range map[int64]bool{NoWatermark: false, 129: false, 130: true, 131: true} {
		if got := s.Closed(b, wm); got != want {
			t.Errorf("Closed(%v, %d) = %v, want %v", b, wm, got, want)
		}
	}
	if s.Closed(Bounds{math.MaxInt64 - 5, math.MaxInt64 - 4}, math.MaxInt64) {
		t.Errorf("a session whose last+gap overflows cannot be closed")
	}
}

// modelSessions is the brute force: sort every timestamp seen and cut
// where two neighbours are more than gap apart.
func modelSessions(seen []int64, gap int64) []Bounds {
	ts := slices.Sorted(slices.Values(seen))
	var out []Bounds
	for i, v := range ts {
		if i == 0 || v-ts[i-1] > gap {
			out = append(out, Bounds{v, v + 1})
		} else {
			out[len(out)-1].End = v + 1
		}
	}
	return out
}

func TestSessionsMatchModel(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for run := range 2000 {
		gap := 1 + rng.Int63n(10)
		s := Sessions{gap: gap}
		var store, seen []Bounds
		var stamps []int64
		for k := range 1 + rng.Intn(40) {
			ts := rng.Int63n(200) - 100 // out of order, dense enough to bridge
			stamps = append(stamps, ts)
			// Half the time hand Merge only what a store range query for
			// sessions overlapping [ts-gap, ts+gap] would return.
			candidates := slices.Clone(store)
			if rng.Intn(2) == 0 {
				candidates = slices.DeleteFunc(candidates, func(b Bounds) bool { return b.End-1 < ts-gap || b.Start > ts+gap })
			}
			before := slices.Clone(candidates)
			merged, absorbed := s.Merge(candidates, ts)
			for _, a := range absorbed {
				if !slices.Contains(before, a) {
					t.Fatalf("run %d step %d: absorbed %v was not given", run, k, a)
				}
				if a.Start < merged.Start || a.End > merged.End {
					t.Fatalf("run %d step %d: absorbed %v outside merged %v", run, k, a, merged)
				}
			}
			if !merged.Contains(ts) {
				t.Fatalf("run %d step %d: merged %v misses ts %d", run, k, merged, ts)
			}
			store = slices.DeleteFunc(store, func(b Bounds) bool { return slices.Contains(absorbed, b) })
			store = append(store, merged)
			seen = slices.SortedFunc(slices.Values(store), func(a, b Bounds) int { return int(a.Start - b.Start) })
			if want := modelSessions(stamps, gap); fmt.Sprint(seen) != fmt.Sprint(want) {
				t.Fatalf("run %d step %d gap %d ts %d: sessions %v, model %v (stamps %v)", run, k, gap, ts, seen, want, stamps)
			}
		}
	}
}

func BenchmarkSessionsMerge(b *testing.B) {
	s := InactivityGap(30 * time.Minute)
	// A key with a few sessions, of which the record bridges two.
	const minute = 60_000
	sessions := []Bounds{{0, 10 * minute}, {50 * minute, 60 * minute}, {100 * minute, 110 * minute}, {200 * minute, 201 * minute}}
	buf := make([]Bounds, len(sessions))
	var sink int64
	b.ReportAllocs()
	for b.Loop() {
		copy(buf, sessions)
		merged, absorbed := s.Merge(buf, 80*minute)
		sink += merged.End + int64(len(absorbed))
	}
	_ = sink
}

func ExampleSessions_Merge() {
	s := InactivityGap(5 * time.Minute)
	const minute = 60_000
	sessions := []Bounds{{0, 2*minute + 1}, {10 * minute, 12*minute + 1}} // records 0..2m and 10m..12m
	merged, absorbed := s.Merge(sessions, 6*minute)                       // within 5m of both: bridges them
	fmt.Println(merged, absorbed)
	// Output: [0,720001) [[0,120001) [600000,720001)]
}
