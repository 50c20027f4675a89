package topology

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
)

// TimeDomain says which clock a timer follows.
type TimeDomain int

const (
	// EventTime timers fire when the watermark reaches their time:
	// deterministic under replay.
	EventTime TimeDomain = iota
	// ProcessingTimeDomain timers fire when the wall clock reaches their
	// time.
	ProcessingTimeDomain
)

// Timer is a timer that fired: the key it was registered for, its time and
// its clock.
type Timer[K any] struct {
	Key    K
	Time   int64
	Domain TimeDomain
}

// TimerProcessor is a Processor with timers: OnTimer is called for each
// timer that fires, in time order (then key bytes), with what it forwards
// committed in the same transaction as the timer's removal, so a timer
// fires exactly once under exactly_once.
type TimerProcessor[KIn, VIn, KOut, VOut any] interface {
	Processor[KIn, VIn, KOut, VOut]
	OnTimer(t Timer[KIn]) error
}

// Timers declares the timers of a processor, keyed like its input records
// and kept in a store named name (its changelog is
// <application.id>-<name>-changelog), so they survive restarts and move
// with their task. Pass it to Process with the processor's stores; the
// processor must implement TimerProcessor.
func Timers[K any](name string, ks serde.Serde[K]) TimerSpec[K] {
	return TimerSpec[K]{spec: &exec.Store{Name: name, Cache: true, Windowed: true, KeySerde: serde.ID(ks), Layout: layout.KindTimers}, ks: ks}
}

// TimerSpec names and types a processor's timers; Timers makes one.
type TimerSpec[K any] struct {
	spec *exec.Store
	ks   serde.Serde[K]
}

// Name is the timers' store name.
func (ts TimerSpec[K]) Name() string { return ts.spec.Name }

func (ts TimerSpec[K]) register(t *Topology) bool {
	if ts.spec.Name == "" {
		t.errorf(ErrMissingName, "timers must be named")
		return false
	}
	if ts.ks == nil {
		t.errorf(ErrMissingSerde, "timers %q need a key serde", ts.spec.Name)
		return false
	}
	if t.registered(ts.spec) {
		return true
	}
	t.addStore(ts.spec)
	return true
}

// Open returns the timer service in the task that ctx belongs to. Call it
// in Init.
func (ts TimerSpec[K]) Open(ctx StateContext) *TimerService[K] {
	pc := ctx.processContext()
	return &TimerService[K]{t: ops.TimersIn(pc, ts.spec.Name, ts.ks), wall: pc.Exec()}
}

func (ts TimerSpec[K]) timerKeyType() string { return fmt.Sprintf("%T", *new(K)) }

func (ts TimerSpec[K]) store() ops.TimerStore[K] {
	return ops.TimerStore[K]{Name: ts.spec.Name, Keys: ts.ks}
}

// TimerService registers and deletes a processor's timers, per key. Timers
// are deduplicated: one per key, time and clock. The timers live in their
// store, laid out as internal/layout's timers.go draws.
type TimerService[K any] struct {
	t    *ops.Timers[K]
	wall exec.Context
}

// RegisterEventTime sets a timer for k that fires once the watermark
// reaches ts (at once, after the current record, if it already has).
func (s *TimerService[K]) RegisterEventTime(k K, ts int64) error {
	return s.t.Register(ops.EventTime, k, ts)
}

// RegisterProcessingTime sets a timer for k that fires once the wall clock
// reaches ts (milliseconds since the epoch).
func (s *TimerService[K]) RegisterProcessingTime(k K, ts int64) error {
	return s.t.Register(ops.ProcessingTime, k, ts)
}

// DeleteEventTime removes k's event-time timer at ts, if any.
func (s *TimerService[K]) DeleteEventTime(k K, ts int64) error {
	return s.t.Delete(ops.EventTime, k, ts)
}

// DeleteProcessingTime removes k's processing-time timer at ts, if any.
func (s *TimerService[K]) DeleteProcessingTime(k K, ts int64) error {
	return s.t.Delete(ops.ProcessingTime, k, ts)
}

// Watermark is the current event-time watermark.
func (s *TimerService[K]) Watermark() int64 { return s.wall.Watermark() }

// timerOf types a timer that came due.
func timerOf[K any](t ops.Timer[K]) Timer[K] {
	d := EventTime
	if t.Domain == ops.ProcessingTime {
		d = ProcessingTimeDomain
	}
	return Timer[K]{Key: t.Key, Time: t.Time, Domain: d}
}
