package window

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestSlidingValidate(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second, time.Microsecond} {
		if err := Sliding(d).Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("time difference %v accepted: %v", d, err)
		}
	}
	w := Sliding(1500 * time.Microsecond) // truncated to 1ms
	if err := w.Validate(); err != nil || w.TimeDifference() != 1 {
		t.Errorf("1.5ms: difference %d, %v", w.TimeDifference(), err)
	}
}

// TestSlidingBounds checks the half-open translation of Kafka Streams'
// inclusive [s, s+d]: the left window holds ts-d..ts, the right one
// ts+1..ts+d+1.
func TestSlidingBounds(t *testing.T) {
	w := Sliding(10 * time.Millisecond)
	for _, c := range []struct {
		b       Bounds
		in, out []int64
	}{
		{w.Left(100), []int64{90, 95, 100}, []int64{89, 101}},
		{w.Right(100), []int64{101, 111}, []int64{100, 112}},
		{w.Left(-3), []int64{-13, -3}, []int64{-14, -2}}, // no floor at the epoch
	} {
		if c.b.End-c.b.Start != w.TimeDifference()+1 {
			t.Errorf("%v spans %d, want d+1", c.b, c.b.End-c.b.Start)
		}
		for _, ts := range c.in {
			if !c.b.Contains(ts) {
				t.Errorf("%v does not hold %d", c.b, ts)
			}
		}
		for _, ts := range c.out {
			if c.b.Contains(ts) {
				t.Errorf("%v holds %d", c.b, ts)
			}
		}
	}
	// A record d+1 after another has that record's right window as its
	// left window: one window.
	if w.Right(100) != w.Left(111) {
		t.Errorf("Right(100) %v != Left(111) %v", w.Right(100), w.Left(111))
	}
}

func ExampleSliding() {
	w := Sliding(10 * time.Second)
	// Records at 0s and 4s: the left windows of both, and the right window
	// of the first (the record at 4s lies within 10s after it).
	fmt.Println(w.Left(0), w.Left(4_000), w.Right(0))
	// Output: [-10000,1) [-6000,4001) [1,10002)
}
