package topology

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
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
	return TimerSpec[K]{spec: &exec.Store{Name: name, Cache: true, Windowed: true}, ks: ks}
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
	if existing, ok := t.stores[ts.spec.Name]; ok && existing == ts.spec {
		return true
	}
	t.addStore(ts.spec)
	return true
}

// Open returns the timer service in the task that ctx belongs to. Call it
// in Init.
func (ts TimerSpec[K]) Open(ctx procContext) *TimerService[K] {
	return ctx.timerService(ts.spec.Name, func() any {
		c := ctx.execContext()
		return &TimerService[K]{s: c.Store(ts.spec.Name), ks: ts.ks, wall: c}
	}).(*TimerService[K])
}

func (ts TimerSpec[K]) timerKeyType() string { return fmt.Sprintf("%T", *new(K)) }

// TimerService registers and deletes a processor's timers, per key. Timers
// are deduplicated: one per key, time and clock.
//
// Layout of its store: 'e' or 'p' (event or processing time), the time (8
// bytes big-endian, sign bit flipped), the key's bytes → 1.
type TimerService[K any] struct {
	s    *store.Staged
	ks   serde.Serde[K]
	wall exec.Context
	// next is at most the earliest registered time per clock: a stale low
	// value costs one scan.
	next     [2]int64
	nextInit bool
}

const (
	timerEvent      = 'e'
	timerProcessing = 'p'
)

func timerPrefix(d TimeDomain) byte {
	if d == EventTime {
		return timerEvent
	}
	return timerProcessing
}

func (s *TimerService[K]) key(d TimeDomain, k K, ts int64) ([]byte, error) {
	kb, err := s.ks.Encode(k)
	if err != nil {
		return nil, fmt.Errorf("timers %s: key: %w", s.s.Name(), err)
	}
	return append(layout.AppendTime([]byte{timerPrefix(d)}, ts), kb...), nil
}

// RegisterEventTime sets a timer for k that fires once the watermark
// reaches ts (at once, after the current record, if it already has).
func (s *TimerService[K]) RegisterEventTime(k K, ts int64) error {
	return s.register(EventTime, k, ts)
}

// RegisterProcessingTime sets a timer for k that fires once the wall clock
// reaches ts (milliseconds since the epoch).
func (s *TimerService[K]) RegisterProcessingTime(k K, ts int64) error {
	return s.register(ProcessingTimeDomain, k, ts)
}

// DeleteEventTime removes k's event-time timer at ts, if any.
func (s *TimerService[K]) DeleteEventTime(k K, ts int64) error {
	return s.delete(EventTime, k, ts)
}

// DeleteProcessingTime removes k's processing-time timer at ts, if any.
func (s *TimerService[K]) DeleteProcessingTime(k K, ts int64) error {
	return s.delete(ProcessingTimeDomain, k, ts)
}

// Watermark is the current event-time watermark.
func (s *TimerService[K]) Watermark() int64 { return s.wall.Watermark() }

func (s *TimerService[K]) register(d TimeDomain, k K, ts int64) error {
	key, err := s.key(d, k, ts)
	if err != nil {
		return err
	}
	if s.nextInit {
		s.next[d] = min(s.next[d], ts)
	}
	return s.s.Put(key, layout.IndexValue)
}

func (s *TimerService[K]) delete(d TimeDomain, k K, ts int64) error {
	key, err := s.key(d, k, ts)
	if err != nil {
		return err
	}
	return s.s.Delete(key)
}

// forget drops the due-time bounds after an abort (exec.AbortListener):
// the next call finds them in the committed store.
func (s *TimerService[K]) forget() { s.nextInit = false }

// due removes and returns the timers of clock d at or before now, in order.
func (s *TimerService[K]) due(d TimeDomain, now int64) ([]Timer[K], error) {
	if !s.nextInit {
		for _, dd := range []TimeDomain{EventTime, ProcessingTimeDomain} {
			n, err := firstIndex(s.s, timerPrefix(dd))
			if err != nil {
				return nil, err
			}
			s.next[dd] = n
		}
		s.nextInit = true
	}
	if now < s.next[d] {
		return nil, nil
	}
	keys, err := dueIndex(s.s, timerPrefix(d), now)
	if err != nil {
		return nil, err
	}
	var out []Timer[K]
	for _, key := range keys {
		k, err := s.ks.Decode(key[9:])
		if err != nil {
			return nil, fmt.Errorf("timers %s: key: %w", s.s.Name(), err)
		}
		if err := s.s.Delete(key); err != nil {
			return nil, err
		}
		out = append(out, Timer[K]{Key: k, Time: layout.ReadTime(key[1:9]), Domain: d})
	}
	s.next[d], err = firstIndex(s.s, timerPrefix(d))
	return out, err
}
