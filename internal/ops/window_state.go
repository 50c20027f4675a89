package ops

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// WindowState is one window's state: its value in the store
// (layout.WindowValue) with the aggregate decoded.
//
// HasAgg says the window holds records: an aggregate or, with elements,
// element entries, numbered from 0 to Seq-1 (some maybe evicted).
type WindowState[A any] struct {
	Bounds                window.Bounds
	Count                 int64
	EventTimer, ProcTimer int64
	Seq                   int64
	SinceFire             int64
	HasAgg                bool
	Agg                   A
	// Emitted says a result of the window went downstream (and was not
	// retracted); shown is that result encoded, nil when it is the
	// aggregate as encoded in enc or in the store (or not kept: only
	// sessions, which merges retract, keep it).
	Emitted bool
	shown   []byte
	// legacy: the entry was written without the since-fire count and
	// the emitted flag (see Decode).
	legacy bool
	// enc caches the encoded aggregate, nil when unknown.
	enc []byte
}

// NewWindowState is the state of window b before its first record: no
// timers set.
func NewWindowState[A any](b window.Bounds) WindowState[A] {
	return WindowState[A]{Bounds: b, EventTimer: window.NoTimer, ProcTimer: window.NoTimer}
}

// WindowStates reads and writes the window states of one store laid out as
// layout/window.go says, and forwards windows' results and late records:
// the part of a window runtime that sliding windows, whose windows are
// laid out the same way, share.
type WindowStates[K, A any] struct {
	name string
	ks   serde.Serde[K]
	vs   serde.Serde[A]
	// agg is Put's buffer for the aggregate's encoding.
	agg []byte
	// windowed makes the key of a result: topology.Windowed[K].
	windowed func(K, window.Bounds) any
	// trigger decides how a legacy entry's emitted flag is inferred.
	trigger window.Trigger
	// sessions keep what they emitted (keepShown); elements: the window
	// keeps element entries, not an aggregate; global: results are
	// stamped with the stream time.
	sessions, elements, global bool

	ctx       exec.Context
	st        *store.Staged
	lateChild string
	results   []string // children other than the late records'

	// out, if the task linked the results to a typed chain (WindowTyped),
	// passes a result down it. Forward hands it the result it keeps in
	// pending through send (sendResult, bound once): Context.ForwardTyped
	// takes a function without arguments, and a closure would be
	// allocated for every result.
	out     func(k K, b window.Bounds, agg A) error
	send    func() error
	pending struct {
		k   K
		b   window.Bounds
		agg A
	}
}

// NewWindowStates returns the window states of the store name, keys
// encoded by ks and aggregates by vs, for windows that are neither
// sessions nor global and keep an aggregate, not elements (sliding
// windows). windowed makes the key of a result (topology.Windowed[K]);
// lateChild names the child that takes late records, "" for none. Init
// readies it for a task.
func NewWindowStates[K, A any](name string, ks serde.Serde[K], vs serde.Serde[A], windowed func(K, window.Bounds) any, lateChild string) *WindowStates[K, A] {
	return &WindowStates[K, A]{name: name, ks: ks, vs: vs, windowed: windowed, lateChild: lateChild}
}

// Init takes the task's store and the node's children.
func (s *WindowStates[K, A]) Init(ctx exec.Context) {
	s.ctx, s.st = ctx, ctx.Store(s.name)
	s.results = s.results[:0]
	for _, c := range ctx.Children() {
		if c != s.lateChild {
			s.results = append(s.results, c)
		}
	}
}

// keepShown pins down what session w emitted before its aggregate
// changes: if that is the aggregate, its encoding. Only a session can be
// retracted (when merged), so only a session's is kept.
func (s *WindowStates[K, A]) keepShown(w *WindowState[A]) error {
	if !w.Emitted || w.shown != nil || s.elements || !s.sessions {
		return nil
	}
	if w.enc == nil {
		if !w.HasAgg {
			return nil
		}
		ab, err := s.vs.Encode(w.Agg)
		if err != nil {
			return fmt.Errorf("store %s: value: %w", s.name, err)
		}
		w.enc = ab
	}
	w.shown = w.enc
	return nil
}

// Put stores window w under its data key.
func (s *WindowStates[K, A]) Put(key []byte, w WindowState[A]) error { return s.put(key, w, false) }

// PutNew is Put for a window the committed state lacks
// (store.Staged.PutNew): one the runtime held in memory.
func (s *WindowStates[K, A]) PutNew(key []byte, w WindowState[A]) error { return s.put(key, w, true) }

func (s *WindowStates[K, A]) put(key []byte, w WindowState[A], fresh bool) error {
	ab := w.enc
	if w.HasAgg && !s.elements && ab == nil {
		// Into a buffer the states keep: Put copies what it stores.
		b, err := serde.AppendEncode(s.vs, s.agg[:0], w.Agg)
		if err != nil {
			return fmt.Errorf("store %s: value: %w", s.name, err)
		}
		s.agg, ab = b, b
	}
	v := layout.WindowValue{
		End: w.Bounds.End, Count: w.Count, EventTimer: w.EventTimer, ProcTimer: w.ProcTimer,
		Seq: w.Seq, SinceFire: w.SinceFire, Records: w.HasAgg, Emitted: w.Emitted,
	}
	// The emitted result is stored only when it is not the aggregate:
	// between the firings of EarlyEvery, CountTrigger(n>1) and the like,
	// and after a purge.
	if w.Emitted && w.shown != nil && !s.elements && (!w.HasAgg || !bytes.Equal(w.shown, ab)) {
		v.Shown = w.shown
	}
	if !w.HasAgg || s.elements {
		ab = nil
	}
	// A constant capacity keeps val on the stack (Put copies it) for
	// small aggregates.
	val := layout.AppendWindowValue(make([]byte, 0, layout.WindowValueHeader+binary.MaxVarintLen64+16), v, ab)
	if fresh {
		return s.st.PutNew(key, val)
	}
	return s.st.Put(key, val)
}

// EncodeKey appends k's encoding to dst.
func (s *WindowStates[K, A]) EncodeKey(dst []byte, k K) ([]byte, error) {
	b, err := serde.AppendEncode(s.ks, dst, k)
	if err != nil {
		return b, fmt.Errorf("store %s: key: %w", s.name, err)
	}
	return b, nil
}

// Get reads the window stored under its data key.
func (s *WindowStates[K, A]) Get(key []byte) (WindowState[A], bool, error) {
	return s.get(key, false)
}

// GetForUpdate is Get for a window the caller stores next
// (store.Staged.GetForUpdate).
func (s *WindowStates[K, A]) GetForUpdate(key []byte) (WindowState[A], bool, error) {
	return s.get(key, true)
}

func (s *WindowStates[K, A]) get(key []byte, update bool) (WindowState[A], bool, error) {
	read := s.st.Get
	if update {
		read = s.st.GetForUpdate
	}
	val, ok, err := read(key)
	if err != nil || !ok {
		return WindowState[A]{}, false, err
	}
	w, err := s.Decode(layout.WindowStart(key), val)
	return w, err == nil, err
}

// Decode reads the value val of the window starting at start.
func (s *WindowStates[K, A]) Decode(start int64, val []byte) (WindowState[A], error) {
	v, ab, err := layout.ParseWindowValue(val)
	if err != nil {
		return WindowState[A]{}, fmt.Errorf("store %s: %w", s.name, err)
	}
	w := WindowState[A]{
		Bounds: window.Bounds{Start: start, End: v.End}, Count: v.Count,
		EventTimer: v.EventTimer, ProcTimer: v.ProcTimer, Seq: v.Seq, SinceFire: v.SinceFire,
		HasAgg: v.Records, Emitted: v.Emitted, shown: v.Shown, legacy: v.Legacy,
	}
	if w.legacy {
		// Written before the emitted flag was kept: EveryRecord emitted
		// every window that holds records; OnWatermark one whose firing
		// is no longer due. Other triggers' windows were never
		// retracted before either.
		w.Emitted = w.HasAgg && (s.trigger == window.EveryRecord() ||
			s.trigger == window.OnWatermark() && w.EventTimer == window.NoTimer)
	}
	w.shown = bytes.Clone(w.shown)
	if w.HasAgg && !s.elements {
		if w.Agg, err = s.vs.Decode(ab); err != nil {
			return w, fmt.Errorf("store %s: value: %w", s.name, err)
		}
		if w.Emitted && w.shown == nil && s.sessions {
			// What went out: keepShown needs it if the aggregate
			// changes. Copied, as the store may reuse val.
			w.enc = bytes.Clone(ab)
		}
	}
	return w, nil
}

// linkOut keeps out, the typed chain of the results (WindowTyped).
func (s *WindowStates[K, A]) linkOut(out func(K, window.Bounds, A) error) {
	s.out, s.send = out, s.sendResult
}

// Forward sends window w's result to the result children, stamped with
// the window's last timestamp: down the typed chain, if linked.
func (s *WindowStates[K, A]) Forward(k K, w WindowState[A]) error {
	if s.out == nil {
		return s.ForwardValue(k, w.Bounds, exec.Change{New: w.Agg})
	}
	s.pending.k, s.pending.b, s.pending.agg = k, w.Bounds, w.Agg
	return s.ctx.ForwardTyped(s.stamp(w.Bounds), s.send)
}

// sendResult passes the result Forward keeps down the typed chain.
func (s *WindowStates[K, A]) sendResult() error {
	r := &s.pending
	return s.out(r.k, r.b, r.agg)
}

// stamp is the timestamp of window b's results: its last.
func (s *WindowStates[K, A]) stamp(b window.Bounds) int64 {
	if s.global {
		return max(0, s.ctx.StreamTime()) // the window has no end to stamp
	}
	return b.End - 1
}

// ForwardValue sends v, keyed by window b of k, to the result children.
func (s *WindowStates[K, A]) ForwardValue(k K, b window.Bounds, v any) error {
	r := exec.Record{Key: s.windowed(k, b), Value: v, Timestamp: s.stamp(b)}
	for _, c := range s.results {
		if err := s.ctx.ForwardTo(c, r); err != nil {
			return err
		}
	}
	return nil
}

// Late counts a record that came after its windows closed and forwards it
// to the late-records child, if there is one.
func (s *WindowStates[K, A]) Late(r exec.Record) error {
	s.ctx.CountLate()
	if s.lateChild == "" {
		return nil
	}
	return s.ctx.ForwardTo(s.lateChild, r)
}
