package window

import (
	"fmt"
	"math"
	"time"
)

// NoTimer in a TriggerResult leaves a timer as it is; ClearTimer removes
// it.
const (
	NoTimer    int64 = math.MinInt64
	ClearTimer int64 = math.MinInt64 + 1
)

// TriggerContext is what a trigger knows about one window when it decides.
type TriggerContext struct {
	Window Bounds
	// MaxTimestamp is when the watermark completes the window: End-1 for a
	// time window, the last record plus the gap for a session.
	MaxTimestamp int64
	// Close is MaxTimestamp plus the allowed lateness: the window's state
	// is removed once the watermark reaches it.
	Close int64
	// Count is the number of records the window took since it was created
	// or last purged, this one included.
	Count int64
	// SinceFire is the number of records the window took since it last
	// fired (or was created or purged), this one included. When sessions
	// merge, the merged session's is the sum of theirs (Flink's merged
	// count state), so it can jump past a multiple that Count%n would
	// wait for.
	SinceFire int64
	// Watermark is the watermark the record is judged against (in
	// OnElement) or the task's.
	Watermark int64
	// Now is the wall clock the task last saw (processing time).
	Now int64
	// EventTimer and ProcessingTimer are the window's timers, NoTimer when
	// not set.
	EventTimer, ProcessingTimer int64
}

// TriggerResult is a trigger's decision: fire the window (forward its
// result), purge it (drop its contents; the window stays until it closes),
// and the times to call the trigger back at (NoTimer: keep the current
// timer, ClearTimer: remove it). A window has at most one timer of each
// clock.
type TriggerResult struct {
	Fire, Purge                 bool
	EventTimer, ProcessingTimer int64
}

// Trigger decides when a window emits (Flink's Trigger). Its only state is
// the window's count and timers, kept with the window in its store, so
// triggers stay deterministic under replay (processing-time decisions
// aside).
type Trigger interface {
	// OnElement is called after a record was added to the window.
	OnElement(c TriggerContext, ts int64) TriggerResult
	// OnEventTime is called when the watermark reaches the window's event
	// timer.
	OnEventTime(c TriggerContext) TriggerResult
	// OnProcessingTime is called when the wall clock reaches the window's
	// processing timer.
	OnProcessingTime(c TriggerContext) TriggerResult
	String() string
}

func keep() TriggerResult { return TriggerResult{EventTimer: NoTimer, ProcessingTimer: NoTimer} }

// OnWatermark fires a window when the watermark reaches its MaxTimestamp,
// and again for every record that arrives after that within the allowed
// lateness (Flink's EventTimeTrigger). The default.
func OnWatermark() Trigger { return onWatermark{} }

type onWatermark struct{}

func (onWatermark) OnElement(c TriggerContext, _ int64) TriggerResult {
	r := keep()
	if c.MaxTimestamp <= c.Watermark {
		// A late firing. The record may be judged against a watermark
		// ahead of the task's (carried from an upstream writer), so the
		// window's firing at MaxTimestamp may still be due: this firing
		// covers it, and a record that comes on time sets it again.
		r.Fire = true
		r.EventTimer = ClearTimer
	} else {
		r.EventTimer = c.MaxTimestamp
	}
	return r
}

func (onWatermark) OnEventTime(TriggerContext) TriggerResult {
	r := keep()
	r.Fire = true
	return r
}

func (onWatermark) OnProcessingTime(TriggerContext) TriggerResult { return keep() }
func (onWatermark) String() string                                { return "OnWatermark" }

// AtClose fires a window exactly once, when it closes: when the watermark
// reaches its MaxTimestamp plus the allowed lateness (Kafka Streams'
// suppress(untilWindowCloses)).
func AtClose() Trigger { return atClose{} }

type atClose struct{}

func (atClose) OnElement(c TriggerContext, _ int64) TriggerResult {
	r := keep()
	r.EventTimer = c.Close
	return r
}

func (atClose) OnEventTime(c TriggerContext) TriggerResult {
	r := keep()
	r.Fire = c.Watermark >= c.Close
	return r
}

func (atClose) OnProcessingTime(TriggerContext) TriggerResult { return keep() }
func (atClose) String() string                                { return "AtClose" }

// EveryRecord fires a window on every record it takes (Kafka Streams'
// default emit strategy).
func EveryRecord() Trigger { return CountTrigger(1) }

// CountTrigger fires a window every n records (Flink's CountTrigger): when
// the records since its last firing reach or pass n, which a session merge
// can make jump past n; with Purging, each firing covers the records since
// the last.
func CountTrigger(n int64) Trigger { return count{n} }

type count struct{ n int64 }

func (t count) OnElement(c TriggerContext, _ int64) TriggerResult {
	r := keep()
	r.Fire = t.n > 0 && c.SinceFire >= t.n
	return r
}

func (count) OnEventTime(TriggerContext) TriggerResult      { return keep() }
func (count) OnProcessingTime(TriggerContext) TriggerResult { return keep() }
func (t count) String() string                              { return fmt.Sprintf("CountTrigger(%d)", t.n) }

// ProcessingTime fires a window when the wall clock reaches its
// MaxTimestamp (Flink's ProcessingTimeTrigger): for windows over
// processing time (topology.ProcessingTime sources).
func ProcessingTime() Trigger { return processingTime{} }

type processingTime struct{}

func (processingTime) OnElement(c TriggerContext, _ int64) TriggerResult {
	r := keep()
	r.ProcessingTimer = c.MaxTimestamp
	return r
}

func (processingTime) OnEventTime(TriggerContext) TriggerResult { return keep() }

func (processingTime) OnProcessingTime(TriggerContext) TriggerResult {
	r := keep()
	r.Fire = true
	return r
}

func (processingTime) String() string { return "ProcessingTime" }

// EarlyEvery fires OnWatermark's firings and, before the watermark
// completes the window, also whenever n records came since its last
// firing: early results.
func EarlyEvery(n int64) Trigger { return early{n: n} }

// EarlyEveryInterval fires OnWatermark's firings and, before the watermark
// completes the window, also every d of processing time after the window's
// first record: early results.
func EarlyEveryInterval(d time.Duration) Trigger { return early{every: d.Milliseconds()} }

type early struct{ n, every int64 }

func (e early) OnElement(c TriggerContext, ts int64) TriggerResult {
	r := onWatermark{}.OnElement(c, ts)
	if r.Fire {
		// Late: complete as far as the record knows, so no early
		// firing stays due to repeat this one; a record on time arms
		// it again.
		r.ProcessingTimer = ClearTimer
		return r
	}
	if e.n > 0 && c.SinceFire >= e.n {
		r.Fire = true
	}
	if e.every > 0 && c.ProcessingTimer == NoTimer {
		r.ProcessingTimer = c.Now + e.every
	}
	return r
}

func (e early) OnEventTime(c TriggerContext) TriggerResult {
	r := onWatermark{}.OnEventTime(c)
	r.ProcessingTimer = ClearTimer // complete: no more early firings
	return r
}

func (e early) OnProcessingTime(c TriggerContext) TriggerResult {
	r := keep()
	if c.Watermark < c.MaxTimestamp {
		r.Fire = true
		r.ProcessingTimer = c.Now + e.every
	}
	return r
}

func (e early) String() string {
	if e.n > 0 {
		return fmt.Sprintf("EarlyEvery(%d)", e.n)
	}
	return fmt.Sprintf("EarlyEveryInterval(%v)", time.Duration(e.every)*time.Millisecond)
}

// Purging makes every firing of t also purge the window (Flink's
// PurgingTrigger): each result covers only the records since the last.
func Purging(t Trigger) Trigger { return purging{t} }

type purging struct{ t Trigger }

func purge(r TriggerResult) TriggerResult {
	if r.Fire {
		r.Purge = true
	}
	return r
}

func (p purging) OnElement(c TriggerContext, ts int64) TriggerResult {
	return purge(p.t.OnElement(c, ts))
}
func (p purging) OnEventTime(c TriggerContext) TriggerResult { return purge(p.t.OnEventTime(c)) }
func (p purging) OnProcessingTime(c TriggerContext) TriggerResult {
	return purge(p.t.OnProcessingTime(c))
}
func (p purging) String() string { return "Purging(" + p.t.String() + ")" }

// Global is the one window per key that never ends (Flink's GlobalWindows):
// it never fires on the watermark and never expires, so it needs a trigger
// that fires it (CountTrigger, ProcessingTime or one's own), and Purging keeps its
// state bounded.
func Global() GlobalWindows { return GlobalWindows{} }

// GlobalWindows is the definition made by Global.
type GlobalWindows struct{}

// Validate never fails.
func (GlobalWindows) Validate() error { return nil }

// GlobalBounds is the global window: all of time.
var GlobalBounds = Bounds{Start: math.MinInt64, End: math.MaxInt64}
