package window

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestTumblingIsHalfOpen(t *testing.T) {
	w := Tumbling(10 * time.Millisecond)
	for ts, want := range map[int64]Bounds{0: {0, 10}, 9: {0, 10}, 10: {10, 20}, -1: {-10, 0}} {
		got := w.Assign(nil, ts)
		if len(got) != 1 || got[0] != want {
			t.Errorf("Assign(%d) = %v, want [%v]", ts, got, want)
		}
	}
}

func TestHoppingMatchesBruteForce(t *testing.T) {
	for _, c := range []struct{ size, adv int64 }{{10, 5}, {10, 3}, {7, 7}, {60, 1}} {
		w := Hopping(time.Duration(c.size)*time.Millisecond, time.Duration(c.adv)*time.Millisecond)
		for ts := int64(-50); ts < 50; ts++ {
			var want []Bounds
			for start := -300 / c.adv * c.adv; start <= 200; start += c.adv { // epoch-aligned
				if b := (Bounds{start, start + c.size}); b.Contains(ts) {
					want = append(want, b)
				}
			}
			if got := w.Assign(nil, ts); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("size %d advance %d ts %d: got %v, want %v", c.size, c.adv, ts, got, want)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	if err := Hopping(time.Second, 2*time.Second).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("advance > size accepted: %v", err)
	}
	if err := Tumbling(0).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero size accepted: %v", err)
	}
	if err := Tumbling(time.Second).Validate(); err != nil {
		t.Errorf("valid window rejected: %v", err)
	}
}

func BenchmarkAssignTumbling(b *testing.B) {
	w := Tumbling(time.Minute)
	buf := make([]Bounds, 0, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = w.Assign(buf[:0], int64(i)*997)
	}
}

func BenchmarkAssignHopping(b *testing.B) {
	w := Hopping(time.Minute, 10*time.Second)
	buf := make([]Bounds, 0, 8)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf = w.Assign(buf[:0], int64(i)*997)
	}
}

func ExampleTime_Assign() {
	w := Hopping(10*time.Second, 5*time.Second)
	fmt.Println(w.Assign(nil, 12_000))
	// Output: [[5000,15000) [10000,20000)]
}
