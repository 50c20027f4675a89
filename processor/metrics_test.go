package processor

import (
	"reflect"
	"testing"
	"time"
)

// TestHistogram checks the buckets' cumulative counts and sum, and that a
// batch adds exactly what its observations one by one would.
func TestHistogram(t *testing.T) {
	ds := []time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 3 * time.Millisecond, 2 * time.Minute}
	one, batched := newHistogram(), newHistogram()
	var b histBatch
	for _, d := range ds {
		one.observe(d, 1)
		b.add(d)
	}
	batched.observeBatch(&b)
	s := one.Snapshot()
	// 50µs and 100µs are at or below 100µs (bounds are inclusive); 3ms
	// first fits 5ms; 2 minutes only +Inf.
	for bound, want := range map[float64]uint64{0.0001: 2, 0.0025: 2, 0.005: 3, 60: 3} {
		if got := s.Buckets[bound]; got != want {
			t.Errorf("bucket %vs: %d, want %d", bound, got, want)
		}
	}
	if want := (2*time.Minute + 3*time.Millisecond + 150*time.Microsecond).Seconds(); s.Count != 4 || s.Sum != want {
		t.Errorf("count %d, sum %v; want 4 and %v", s.Count, s.Sum, want)
	}
	if bs := batched.Snapshot(); !reflect.DeepEqual(bs, s) {
		t.Errorf("batched %+v, one by one %+v", bs, s)
	}
	one.observe(time.Millisecond, 5)
	if s := one.Snapshot(); s.Count != 9 || s.Buckets[0.001] != 7 {
		t.Errorf("after 5 observations of 1ms: count %d, bucket 1ms %d; want 9 and 7", s.Count, s.Buckets[0.001])
	}
}
