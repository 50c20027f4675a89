package window_test

import (
	"testing"
	"time"

	"github.com/sluice-streams/sluice/window"
)

func ctx(count, since, wm int64) window.TriggerContext {
	return window.TriggerContext{Window: window.Bounds{Start: 0, End: 100}, MaxTimestamp: 99, Close: 199,
		Count: count, SinceFire: since, Watermark: wm, EventTimer: 99, ProcessingTimer: window.NoTimer}
}

// TestCountTriggerSinceFire: CountTrigger(n) and EarlyEvery(n) fire when
// the records since the last firing reach or pass n, as after a session
// merge, whatever Count is.
func TestCountTriggerSinceFire(t *testing.T) {
	for n := int64(1); n <= 4; n++ {
		for since := int64(0); since <= 2*n+1; since++ {
			for _, count := range []int64{since, since + 1, 5 * n, 5*n + 1} {
				want := since >= n
				if got := window.CountTrigger(n).OnElement(ctx(count, since, 0), 10).Fire; got != want {
					t.Errorf("CountTrigger(%d) count %d since %d: fire %v, want %v", n, count, since, got, want)
				}
				if got := window.EarlyEvery(n).OnElement(ctx(count, since, 0), 10).Fire; got != want {
					t.Errorf("EarlyEvery(%d) count %d since %d: fire %v, want %v", n, count, since, got, want)
				}
				if got := window.Purging(window.CountTrigger(n)).OnElement(ctx(count, since, 0), 10); got.Fire != want || got.Purge != want {
					t.Errorf("Purging(CountTrigger(%d)) since %d: %+v", n, since, got)
				}
			}
		}
	}
	if window.CountTrigger(0).OnElement(ctx(5, 5, 0), 10).Fire {
		t.Error("CountTrigger(0) fired")
	}
}

// TestLateFiringClearsTheFiringDue: a late firing (the record's watermark
// past MaxTimestamp, maybe ahead of the task's) covers the window's
// firing still due, so OnWatermark clears its event timer, and the early
// triggers their processing timer too; on time, the timers are set.
func TestLateFiringClearsTheFiringDue(t *testing.T) {
	for _, tr := range []window.Trigger{window.OnWatermark(), window.EarlyEvery(3), window.EarlyEveryInterval(time.Second),
		window.Purging(window.OnWatermark())} {
		c := ctx(1, 1, 150)
		c.ProcessingTimer = 500
		r := tr.OnElement(c, 10)
		if !r.Fire || r.EventTimer != window.ClearTimer {
			t.Errorf("%v late: %+v, want a firing that clears the event timer", tr, r)
		}
		if tr != window.OnWatermark() && tr != window.Purging(window.OnWatermark()) && r.ProcessingTimer != window.ClearTimer {
			t.Errorf("%v late: processing timer %d, want cleared", tr, r.ProcessingTimer)
		}
		r = tr.OnElement(ctx(1, 1, 50), 10)
		if r.Fire || r.EventTimer != 99 {
			t.Errorf("%v on time: %+v, want the event timer at 99", tr, r)
		}
	}
}
