package ops

import (
	"fmt"
	"math"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// Domain is the clock a timer follows.
type Domain int

const (
	// EventTime timers are due when the watermark reaches their time.
	EventTime Domain = iota
	// ProcessingTime timers are due when the wall clock reaches their
	// time.
	ProcessingTime
)

// prefix is the domain's index in the timer store (layout.TimerEvent,
// layout.TimerProcessing).
func (d Domain) prefix() byte {
	if d == EventTime {
		return layout.TimerEvent
	}
	return layout.TimerProcessing
}

// Timer is a timer that came due: the key it was registered for, its time
// and its clock.
type Timer[K any] struct {
	Key    K
	Time   int64
	Domain Domain
}

// Timers is the runtime of a processor's timers in one task, per key and
// deduplicated (one per key, time and clock), in a store laid out as
// internal/layout's timers.go draws.
type Timers[K any] struct {
	s  *store.Staged
	ks serde.Serde[K]
	// next is at most the earliest registered time per clock: a stale low
	// value costs one scan.
	next     [2]int64
	nextInit bool
}

// NewTimers types the timer store s with the key serde ks.
func NewTimers[K any](s *store.Staged, ks serde.Serde[K]) *Timers[K] {
	return &Timers[K]{s: s, ks: ks}
}

func (s *Timers[K]) key(d Domain, k K, ts int64) ([]byte, error) {
	kb, err := s.ks.Encode(k)
	if err != nil {
		return nil, fmt.Errorf("timers %s: key: %w", s.s.Name(), err)
	}
	return layout.TimerKey(d.prefix(), ts, kb), nil
}

// Register sets a timer of clock d for k at ts.
func (s *Timers[K]) Register(d Domain, k K, ts int64) error {
	key, err := s.key(d, k, ts)
	if err != nil {
		return err
	}
	if s.nextInit {
		s.next[d] = min(s.next[d], ts)
	}
	return s.s.Put(key, layout.IndexValue)
}

// Delete removes k's timer of clock d at ts, if any.
func (s *Timers[K]) Delete(d Domain, k K, ts int64) error {
	key, err := s.key(d, k, ts)
	if err != nil {
		return err
	}
	return s.s.Delete(key)
}

// Forget drops the due-time bounds after an abort (exec.AbortListener):
// the aborted transaction may have raised them past timers its replay must
// fire again. The next Due finds them in the committed store.
func (s *Timers[K]) Forget() { s.nextInit = false }

// Due removes and returns the timers of clock d at or before now, in time
// order, then key bytes. It returns at once when the bound on the next
// due time says none is.
func (s *Timers[K]) Due(d Domain, now int64) ([]Timer[K], error) {
	if !s.nextInit {
		for _, dd := range []Domain{EventTime, ProcessingTime} {
			n, err := FirstIndex(s.s, dd.prefix(), math.MinInt64)
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
	// No timer lies below next[d], so the scan starts there; once every
	// timer up to now is removed, the search for the next bound starts
	// past now. Neither passes again over the timers removed earlier in
	// the transaction, which the stage and the engine hold as deletes.
	keys, err := DueIndex(s.s, d.prefix(), s.next[d], now)
	if err != nil {
		return nil, err
	}
	var out []Timer[K]
	for _, key := range keys {
		at, kb, err := layout.ParseTimerKey(key)
		if err != nil {
			return nil, fmt.Errorf("timers %s: %w", s.s.Name(), err)
		}
		k, err := s.ks.Decode(kb)
		if err != nil {
			return nil, fmt.Errorf("timers %s: key: %w", s.s.Name(), err)
		}
		if err := s.s.Delete(key); err != nil {
			return nil, err
		}
		out = append(out, Timer[K]{Key: k, Time: at, Domain: d})
	}
	// (At the end of time now+1 wraps to math.MinInt64: a scan from the
	// index's start, correct, only not bounded.)
	s.next[d], err = FirstIndex(s.s, d.prefix(), now+1)
	return out, err
}
