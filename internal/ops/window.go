package ops

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

// WindowConfig is what a window runtime is built from: topology's
// WindowedBy and its aggregations, validated.
type WindowConfig[K, V, A any] struct {
	// Store names the window store; Keys encodes the record keys in it,
	// Values the aggregates (unused with Elements).
	Store  string
	Keys   serde.Serde[K]
	Values serde.Serde[A]
	// Windowed makes the key of a result: topology.Windowed[K].
	Windowed func(K, window.Bounds) any
	// Windows is window.Time, window.Sessions or window.GlobalWindows
	// (count windows are global windows with a trigger and Trim or an
	// evictor).
	Windows interface{ Validate() error }
	// Lateness is the allowed lateness in ms.
	Lateness int64
	Trigger  window.Trigger
	// Trim > 0 drops a window's kept elements beyond the last Trim as
	// records arrive: sliding count windows with a trigger of one's own,
	// which may fire too rarely for the evictor to bound them.
	Trim int64
	// Add folds a record into an aggregate (ok: there was one); Merge
	// combines two sessions' aggregates. Unused with Elements.
	Add   func(K, V, A, bool) A
	Merge func(K, A, A) A
	// Elements, when set, keeps each window's records instead of an
	// aggregate, for a full-window function (ProcessWindows).
	Elements *WindowElements[K, V]
	// LateChild names the child that takes late records, "" for none.
	LateChild string
}

// Window is a windowed aggregation in one task: it keeps each window's
// aggregate, record count and trigger timers in the window store, asks the
// trigger what to do on each record and timer, and removes windows as the
// watermark passes their close time, so state stays bounded.
//
// How a window fires: Process adds a record to each window it belongs to
// and asks the trigger (OnElement); the trigger's timers are kept in the
// f (event time) and p (processing time) indexes, and the window's close
// time (its max timestamp plus the allowed lateness) in the x index; in a
// store laid out by start (Init), in the g and q indexes, and the windows'
// keys themselves are in the order of their closes.
// OnWatermark runs the due event timers and closes the due windows in one
// time order, OnProcessingTime the due processing-time timers; each
// firing forwards the window's result (apply).
type Window[K, V, A any] struct {
	s          *WindowStates[K, A]
	lateness   int64
	trigger    window.Trigger
	trim       int64
	fn         func(K, V, A, bool) A
	merge      func(K, A, A) A
	time       window.Time
	sessions   window.Sessions
	isSessions bool
	global     bool
	elements   *WindowElements[K, V]
	// held holds the windows opened in the transaction (window_held.go);
	// nil for sessions, the global window and windows that keep their
	// elements.
	held *heldWindows[A]
	// data is the store's layout of windows (see Init):
	// layout.WindowByStart, whose windows due are one range and which
	// has no expiry index, or layout.WindowData; fire and proc are its
	// timer indexes' prefixes.
	data, fire, proc byte
	// dropping says that the transaction's due expiry entries go in one
	// range delete at the flush, from the index's prefix to closedTo, the
	// latest close of a window the transaction closed, held or stored
	// (see OnWatermark): a time the records set, not how often the
	// watermark was heard.
	dropping bool
	closedTo int64
	// By start, the windows of one start close together, and go in a
	// range delete of their own at the flush (dropStarts) once the
	// changelog has heard of one of them: dropsStart says whether it has
	// for the start last expired, lastStart.
	dropStarts []int64
	lastStart  int64
	dropsStart bool

	ctx exec.Context
	// nextEvent and nextProc are at most the earliest time in the event
	// (fire and expiry) and processing-time indexes; a stale low value
	// costs one scan.
	nextEvent, nextProc int64
	scratch             []window.Bounds
	// kb, key and ik are Process's scratch for the record key's encoding,
	// a window's key and its index entry's, rk remove's and expire's (the
	// stage copies what it keeps; nothing decodes a key from them).
	kb, key, ik, rk []byte
	// scan is OnWatermark's scratch for the scan of the windows due.
	scan rangeScratch
	// stored says, in a store laid out by start, for each start asked
	// about, whether the store may hold windows of it: not when a range
	// over the start found none and the runtime wrote none since
	// (markStored), so that a window opened held needs no read to know
	// the store lacks it. A transaction opens windows of a few starts,
	// mostly of its latest, so a list searched from its end beats a map.
	// Forgotten at each flush and abort.
	stored []startStored
}

// startStored says whether the store may hold windows of start.
type startStored struct {
	start int64
	may   bool
}

// NewWindow returns the runtime of c, for one task.
func NewWindow[K, V, A any](c WindowConfig[K, V, A]) *Window[K, V, A] {
	p := &Window[K, V, A]{
		s:       &WindowStates[K, A]{name: c.Store, ks: c.Keys, vs: c.Values, windowed: c.Windowed, trigger: c.Trigger, elements: c.Elements != nil, lateChild: c.LateChild},
		trigger: c.Trigger, lateness: c.Lateness, trim: c.Trim,
		fn: c.Add, merge: c.Merge, elements: c.Elements,
	}
	switch w := c.Windows.(type) {
	case window.Time:
		p.time = w
	case window.Sessions:
		p.sessions, p.isSessions = w, true
	case window.GlobalWindows:
		p.global = true
	}
	p.s.sessions, p.s.global = p.isSessions, p.global
	if holds(c) && !p.isSessions && !p.global {
		p.held = newHeldWindows[A]()
	}
	return p
}

// Init lays the store out by start if its windows have a fixed size and
// keep an aggregate, and it holds no window laid out by key: one that a
// version before the layout by start wrote, or WindowsByStart off. Such a
// store keeps its layout until its windows are gone.
func (p *Window[K, V, A]) Init(ctx exec.Context) error {
	p.ctx = ctx
	p.forgetDrops()
	p.forgetStored()
	p.s.Init(ctx)
	p.data, p.fire, p.proc = layout.WindowData, layout.WindowFire, layout.WindowProc
	if WindowsByStart && !p.isSessions && !p.global && p.elements == nil {
		_, _, byKey, err := p.s.st.First([]byte{layout.WindowData}, []byte{layout.WindowData + 1})
		if err != nil {
			return err
		}
		if !byKey {
			p.data, p.fire, p.proc = layout.WindowByStart, layout.WindowFireByStart, layout.WindowProcByStart
		}
	}
	return p.findNext(math.MinInt64, math.MinInt64)
}

// WindowsByStart lets stores of fixed-size windows be laid out by start;
// tests turn it off to run the layout by key.
var WindowsByStart = true

// byStart says whether the store is laid out by start.
func (p *Window[K, V, A]) byStart() bool { return p.data == layout.WindowByStart }

// windowKey appends to dst the data key of the window starting at start
// of the key encoded as kb, in the store's layout.
func (p *Window[K, V, A]) windowKey(dst, kb []byte, start int64) []byte {
	if p.byStart() {
		return layout.StartKey(dst, kb, start)
	}
	return layout.WindowKey(dst, kb, start)
}

// untilClose is the time from a window's start to its close, in a store
// laid out by start: its size less one, plus the allowed lateness.
func (p *Window[K, V, A]) untilClose() int64 { return p.time.Size() - 1 + p.lateness }

// closeOfStart is when the window starting at start closes.
func (p *Window[K, V, A]) closeOfStart(start int64) int64 {
	if d := p.untilClose(); start <= math.MaxInt64-d {
		return start + d
	}
	return math.MaxInt64
}

// startsDue is the end of the keys, laid out by start, of the windows
// that close at or before close.
func (p *Window[K, V, A]) startsDue(close int64) []byte {
	d := p.untilClose()
	switch {
	case close == math.MaxInt64:
		return []byte{layout.WindowByStart + 1}
	case close < math.MinInt64+d:
		return []byte{layout.WindowByStart}
	}
	return layout.DueEnd(layout.WindowByStart, close-d)
}

// openFrom is the earliest close of a window laid out by start that the
// transaction has not closed, given that none closes before from: the
// windows up to closedTo closed (each watermark closes all those due), and
// while the transaction drops them their keys stay until the flush's
// range delete, to be passed over, not closed again.
func (p *Window[K, V, A]) openFrom(from int64) int64 {
	if p.closedTo == math.MaxInt64 {
		return math.MaxInt64
	}
	return max(from, p.closedTo+1)
}

// startsFrom is the first key, laid out by start, of a window that closes
// at or after close.
func (p *Window[K, V, A]) startsFrom(close int64) int64 {
	if d := p.untilClose(); close >= math.MinInt64+d {
		return close - d
	}
	return math.MinInt64
}

func (p *Window[K, V, A]) Close() error { return nil }

// maxTimestamp is when the watermark completes window b: its last
// timestamp for a time window, its last record plus the gap for a session.
func (p *Window[K, V, A]) maxTimestamp(b window.Bounds) int64 {
	switch {
	case p.global:
		return b.End
	case p.isSessions:
		return b.End - 1 + p.sessions.Gap()
	}
	return b.End - 1
}

// closeAt is when window b closes: maxTimestamp plus the allowed lateness
// (never, for the global window).
func (p *Window[K, V, A]) closeAt(b window.Bounds) int64 {
	if p.global {
		return b.End
	}
	return p.maxTimestamp(b) + p.lateness
}

func (p *Window[K, V, A]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		p.ctx.CountIgnoredDelete() // windows ignore deletes, as aggregations do
		return nil
	}
	return p.process(r.Key.(K), r.Value.(V), r.Timestamp, r.Headers)
}

// WindowTyped is the exec.Typed of n, a node whose Processor is a
// *Window[K, V, A]: its entry takes the typed records, so that a record
// reaches its windows without being boxed into a Record. Its results, keyed
// by windowed (topology.Windowed[K], of type W), are a typed chain of
// changes when the node has no late-records child (whose records are not
// results) and its output takes them (WindowStates.Forward); otherwise they
// leave by the erased path. The entry is made whatever its output is, and
// the results take the chain whichever path brings the records (Emits).
func WindowTyped[K, V, A, W any](n *exec.Node, windowed func(K, window.Bounds) W) *exec.Typed {
	// An aggregate of interface type may be nil, which the erased path
	// (exec.Change) takes for no value: neither is a change's new value
	// here, as ToStream and the erased children see it.
	nilable := reflect.TypeFor[A]().Kind() == reflect.Interface
	return &exec.Typed{
		Link: func(f *exec.Frame, p exec.Processor, next any) any {
			w := p.(*Window[K, V, A])
			if out, ok := next.(func(W, exec.ChangeOf[A]) error); ok && w.s.lateChild == "" {
				w.s.linkOut(func(k K, b window.Bounds, agg A) error {
					return out(windowed(k, b), exec.ChangeOf[A]{New: agg, HasNew: !nilable || any(agg) != nil})
				})
			}
			return func(k K, v V) error {
				f.At(n, exec.Processing)
				return w.process(k, v, f.Timestamp, f.Headers)
			}
		},
		Out: changeOut[W, A],
		Fan: func(children []any) any {
			if e := exec.ChainFan[W, exec.ChangeOf[A]](children); e != nil {
				return e
			}
			return erasedOutput{} // a late-records child: the results go erased
		},
		Emits: true,
	}
}

// erasedOutput is the output of a node whose output takes no typed chain:
// an entry to link it with, never called.
type erasedOutput struct{}

// process adds a record, of key k and value v at ts with headers hs, to
// its windows.
func (p *Window[K, V, A]) process(k K, v V, ts int64, hs []exec.Header) error {
	kb, err := p.s.EncodeKey(p.kb[:0], k)
	if err != nil {
		return err
	}
	p.kb = kb
	wm := p.ctx.Watermark()
	if p.isSessions {
		return p.session(k, v, ts, hs, kb, wm)
	}
	if p.global {
		p.scratch = append(p.scratch[:0], window.GlobalBounds)
	} else {
		p.scratch = p.time.Assign(p.scratch[:0], ts)
	}
	onTime := false
	for _, b := range p.scratch {
		if p.closeAt(b) <= wm {
			continue // this window closed
		}
		onTime = true
		p.key = p.windowKey(p.key[:0], kb, b.Start)
		key := p.key
		if p.held != nil && p.held.holding() {
			held, err := p.processHeld(k, v, ts, b, key, wm)
			if err != nil {
				return err
			}
			if held {
				continue
			}
		}
		// For update: the window is written next, and a new window's
		// entry remembers that the engine lacks it, so that a window
		// opened and closed within one transaction reaches neither the
		// changelog nor the engine (store.Staged).
		w, ok, err := p.s.GetForUpdate(key)
		if err != nil {
			return err
		}
		if !ok {
			w = NewWindowState[A](b)
		}
		if err := p.add(k, v, ts, key, &w); err != nil {
			return err
		}
		if err := p.element(k, key, w, !ok, !ok, ts, wm); err != nil {
			return err
		}
	}
	if !onTime {
		return p.s.Late(exec.Record{Key: k, Value: v, Timestamp: ts, Headers: hs})
	}
	return nil
}

// add puts a record into window w (stored under key).
func (p *Window[K, V, A]) add(k K, v V, ts int64, key []byte, w *WindowState[A]) error {
	w.Count++
	w.SinceFire++
	if p.elements != nil {
		if err := p.addElement(key, w, v, ts); err != nil {
			return err
		}
		return p.trimElements(key, w)
	}
	if err := p.s.keepShown(w); err != nil {
		return err
	}
	w.Agg, w.HasAgg, w.enc = p.fn(k, v, w.Agg, w.HasAgg), true, nil
	return nil
}

func (p *Window[K, V, A]) tctx(w WindowState[A], wm int64) window.TriggerContext {
	return window.TriggerContext{
		Window: w.Bounds, MaxTimestamp: p.maxTimestamp(w.Bounds), Close: p.closeAt(w.Bounds),
		Count: w.Count, SinceFire: w.SinceFire, Watermark: wm, Now: p.ctx.WallClock(),
		EventTimer: w.EventTimer, ProcessingTimer: w.ProcTimer,
	}
}

// element asks the trigger about a record window w (stored under key)
// just took. A new window (isNew) gets its expiry entry; fresh says the
// caller read the window with GetForUpdate and did not find it, so the
// committed state holds neither the window nor, written and deleted with
// it, its expiry entry: PutNew lets that entry's delete at the close stay
// out of the changelog, as the window's own does.
//
// The window is stored before its expiry entry: the stage then finds the
// window's entry, which the caller's read just made, without a lookup.
func (p *Window[K, V, A]) element(k K, key []byte, w WindowState[A], isNew, fresh bool, ts, wm int64) error {
	if err := p.apply(k, key, w, p.trigger.OnElement(p.tctx(w, wm), ts)); err != nil {
		return err
	}
	if !isNew || p.global {
		return nil
	}
	return p.expiry(key, w.Bounds, fresh)
}

// expiry writes the expiry entry of window b, stored under key, unless the
// store is laid out by start; fresh: the committed state lacks it
// (PutNew).
func (p *Window[K, V, A]) expiry(key []byte, b window.Bounds, fresh bool) error {
	p.nextEvent = min(p.nextEvent, p.closeAt(b))
	if p.byStart() {
		return nil // the window's key is its expiry entry
	}
	p.ik = layout.AppendIndexKey(p.ik[:0], layout.WindowExpire, p.closeAt(b), key)
	if fresh {
		return p.s.st.PutNew(p.ik, layout.IndexValue)
	}
	return p.s.st.Put(p.ik, layout.IndexValue)
}

// processHeld adds a record, of key k and value v at ts, to window b
// (data key key) if the runtime holds the window or the store lacks it, in
// which case the window is opened held, and says whether it did; if not,
// the store has the window.
func (p *Window[K, V, A]) processHeld(k K, v V, ts int64, b window.Bounds, key []byte, wm int64) (bool, error) {
	h := p.held.get(key)
	w := NewWindowState[A](b)
	if h != nil {
		w = h.w
	} else if ok, err := p.storeHas(b.Start, key); err != nil || ok {
		return false, err
	}
	if err := p.add(k, v, ts, key, &w); err != nil {
		return true, err
	}
	res := p.trigger.OnElement(p.tctx(w, wm), ts)
	if p.needsIndex(w, res) {
		// The window goes to the store as the store path would have
		// kept it, and stays there.
		if h != nil {
			p.held.leave(h)
		}
		w, err := p.decide(k, key, w, res)
		if err != nil {
			return true, err
		}
		p.markStored(b.Start)
		if err := p.s.PutNew(key, w); err != nil {
			return true, err
		}
		return true, p.expiry(key, w.Bounds, true)
	}
	w, err := p.decide(k, key, w, res)
	if err != nil {
		return true, err
	}
	if h != nil {
		p.held.change(h, w)
		return true, nil
	}
	p.held.open(key, p.closeAt(b), w)
	p.nextEvent = min(p.nextEvent, p.closeAt(b))
	return true, nil
}

// needsIndex says whether carrying out res for window w writes its fire or
// processing-time index (timer): what a held window cannot have. An event
// timer at the close needs no entry (see timer), and a held window has
// no other timer to delete.
func (p *Window[K, V, A]) needsIndex(w WindowState[A], res window.TriggerResult) bool {
	set := func(want, old, closes int64) bool {
		return want != window.NoTimer && want != old && want != window.ClearTimer && want != closes
	}
	return set(res.EventTimer, w.EventTimer, p.closeAt(w.Bounds)) || set(res.ProcessingTimer, w.ProcTimer, noClose)
}

// closeHeld closes held window h (taken from the held windows), as expire
// closes one in the store.
func (p *Window[K, V, A]) closeHeld(h *heldWindow[A], wm int64) error {
	p.closedTo = max(p.closedTo, h.close)
	if h.w.EventTimer != h.close {
		return nil
	}
	kb, _, err := layout.ParseWindowKey(h.key)
	if err != nil {
		return err
	}
	_, err = p.fireAtClose(kb, h.key, h.w, wm)
	return err
}

// fireAtClose runs the event timer of window w (key kb, data key key) set
// at its close, which has no index entry of its own, as the window closes,
// and returns the window's state after it.
func (p *Window[K, V, A]) fireAtClose(kb, key []byte, w WindowState[A], wm int64) (WindowState[A], error) {
	k, err := p.s.ks.Decode(kb)
	if err != nil {
		return w, fmt.Errorf("store %s: key: %w", p.s.name, err)
	}
	w.EventTimer = window.NoTimer
	res := p.trigger.OnEventTime(p.tctx(w, wm))
	res.EventTimer, res.ProcessingTimer = window.NoTimer, window.ClearTimer
	return p.decide(k, key, w, res)
}

// Mark, Rollback, Spill, Held and Drop make the runtime an exec.Holder of
// its held windows.

func (p *Window[K, V, A]) Mark() {
	if p.held != nil {
		p.held.mark()
	}
}

func (p *Window[K, V, A]) Rollback() {
	if p.held != nil {
		p.held.rollback()
	}
}

func (p *Window[K, V, A]) Drop() {
	p.forgetDrops()
	p.forgetStored()
	if p.held != nil {
		p.held.drop()
	}
}

func (p *Window[K, V, A]) Held() int {
	if p.held == nil {
		return 0
	}
	return p.held.bytes
}

// forgetDrops forgets the range deletes the transaction would make.
func (p *Window[K, V, A]) forgetDrops() {
	p.dropping, p.closedTo = false, math.MinInt64
	p.dropStarts, p.lastStart, p.dropsStart = p.dropStarts[:0], math.MinInt64, false
}

// startRange is the range of the keys, laid out by start, of the windows
// that start at start.
func startRange(start int64) (from, to []byte) {
	from = layout.AppendTime([]byte{layout.WindowByStart}, start)
	if start == math.MaxInt64 {
		return from, []byte{layout.WindowByStart + 1}
	}
	return from, layout.AppendTime([]byte{layout.WindowByStart}, start+1)
}

// Spill drops the expiry entries due (by start, the windows due), if the
// transaction drops them (see OnWatermark), and writes the held windows to
// the store, with their expiry entries, in the order they were opened.
func (p *Window[K, V, A]) Spill() error {
	if p.dropping {
		if err := p.s.st.DropRange([]byte{layout.WindowExpire}, layout.DueEnd(layout.WindowExpire, p.closedTo)); err != nil {
			return err
		}
	}
	for _, start := range p.dropStarts {
		if err := p.s.st.DropRange(startRange(start)); err != nil {
			return err
		}
	}
	p.forgetDrops()
	if p.held == nil {
		return nil
	}
	held := p.held.takeAll()
	defer clear(held) // the windows, for the collector
	defer p.forgetStored()
	p.held.pace(len(held))
	for _, h := range held {
		if err := p.s.PutNew(h.key, h.w); err != nil {
			return err
		}
		if err := p.expiry(h.key, h.w.Bounds, true); err != nil {
			return err
		}
	}
	return nil
}

// apply carries out a trigger's decision for window w and stores it.
func (p *Window[K, V, A]) apply(k K, key []byte, w WindowState[A], res window.TriggerResult) error {
	w, err := p.decide(k, key, w, res)
	if err != nil {
		return err
	}
	return p.s.Put(key, w)
}

// storeHas says whether the store holds the window of start start under
// data key key. Laid out by start, a start whose windows the store lacks,
// as it lacks those of most starts a transaction opens held, is found
// out once, by a range, and then answers without a read.
func (p *Window[K, V, A]) storeHas(start int64, key []byte) (bool, error) {
	if p.byStart() {
		i := p.startStored(start)
		if i < 0 {
			_, _, ok, err := p.s.st.First(startRange(start))
			if err != nil {
				return false, err
			}
			i = len(p.stored)
			p.stored = append(p.stored, startStored{start, ok})
		}
		if !p.stored[i].may {
			return false, nil
		}
	}
	_, ok, err := p.s.st.Peek(key)
	return ok, err
}

// markStored notes that the runtime writes a window of start start to the
// store (storeHas). Only a held transaction asks storeHas, and in one only
// processHeld writes a window the store lacked: the store path (process)
// takes the windows the store has.
func (p *Window[K, V, A]) markStored(start int64) {
	if i := p.startStored(start); i >= 0 {
		p.stored[i].may = true
	}
}

// startStored returns where p.stored has start, -1 if nowhere.
func (p *Window[K, V, A]) startStored(start int64) int {
	for i := len(p.stored) - 1; i >= 0; i-- {
		if p.stored[i].start == start {
			return i
		}
	}
	return -1
}

// forgetStored forgets what p.stored says.
func (p *Window[K, V, A]) forgetStored() { p.stored = p.stored[:0] }

// decide carries out a trigger's decision for window w, stored under key:
// its timers, its firing and its purge, and returns the window's state
// after it, which apply stores and expire, removing the window, does not.
func (p *Window[K, V, A]) decide(k K, key []byte, w WindowState[A], res window.TriggerResult) (WindowState[A], error) {
	var err error
	if w.EventTimer, err = p.timer(p.fire, key, w.EventTimer, res.EventTimer, p.closeAt(w.Bounds), &p.nextEvent); err != nil {
		return w, err
	}
	if w.ProcTimer, err = p.timer(p.proc, key, w.ProcTimer, res.ProcessingTimer, noClose, &p.nextProc); err != nil {
		return w, err
	}
	if res.Fire {
		w.SinceFire = 0
	}
	if res.Fire && w.HasAgg {
		if p.elements != nil {
			err = p.fireElements(k, key, &w)
		} else {
			err = p.s.Forward(k, w)
		}
		if err != nil {
			return w, err
		}
		// What went out is now the aggregate: kept as a stored fact, so
		// a later retraction depends on it and not on a watermark.
		w.Emitted, w.shown = true, nil
	}
	if res.Purge {
		if p.elements != nil {
			if err := p.clearElements(key); err != nil {
				return w, err
			}
		} else if err := p.s.keepShown(&w); err != nil {
			return w, err
		}
		var zero A
		w.Agg, w.HasAgg, w.Count, w.SinceFire, w.enc = zero, false, 0, 0, nil
	}
	return w, nil
}

// noClose is the close time of processing-time timers: none.
const noClose = window.NoTimer

// timer moves a window's timer in its index from old to the trigger's
// choice, and returns the timer now set. An event timer at the window's
// close time (AtClose, or OnWatermark without lateness) needs no index
// entry: the expiry index runs it before removing the window, which saves
// two changelog records per window.
func (p *Window[K, V, A]) timer(prefix byte, key []byte, old, want, closes int64, next *int64) (int64, error) {
	if want == window.NoTimer || want == old {
		return old, nil
	}
	if old != window.NoTimer && old != closes {
		if err := p.s.st.Delete(layout.IndexKey(prefix, old, key)); err != nil {
			return old, err
		}
	}
	if want == window.ClearTimer {
		return window.NoTimer, nil
	}
	*next = min(*next, want)
	if want == closes {
		return want, nil
	}
	return want, p.s.st.Put(layout.IndexKey(prefix, want, key), layout.IndexValue)
}

// remove deletes window w of the key encoded as kb, with its index entries
// (its expiry entry unless expired: the caller deleted it) and, unless
// keepElements, its elements.
func (p *Window[K, V, A]) remove(kb []byte, w WindowState[A], keepElements, expired bool) error {
	st := p.s.st
	p.rk = p.windowKey(p.rk[:0], kb, w.Bounds.Start)
	key := p.rk
	var err error
	if !expired || !p.byStart() || !p.dropsStart {
		// By start, the range delete of its start at the flush may
		// take an expired window.
		err = st.Delete(key)
	}
	if p.elements != nil && !keepElements {
		err = errors.Join(err, p.clearElements(key))
	}
	if !p.global && !expired && !p.byStart() {
		err = errors.Join(err, st.Delete(layout.IndexKey(layout.WindowExpire, p.closeAt(w.Bounds), key)))
	}
	if w.EventTimer != window.NoTimer && w.EventTimer != p.closeAt(w.Bounds) {
		err = errors.Join(err, st.Delete(layout.IndexKey(p.fire, w.EventTimer, key)))
	}
	if w.ProcTimer != window.NoTimer {
		err = errors.Join(err, st.Delete(layout.IndexKey(p.proc, w.ProcTimer, key)))
	}
	return err
}

// OnWatermark runs the event timers the watermark reached and removes the
// windows that closed, all in one time order (then key and start; a timer
// before a close at the same time), so that how far the watermark jumps at
// once never changes the order of the results.
func (p *Window[K, V, A]) OnWatermark(wm int64) error {
	if wm < p.nextEvent {
		return nil
	}
	// No entry of either index lies below nextEvent: the scans start
	// there, not over the entries removed earlier in the transaction,
	// which the stage and the engine still hold as deletes (a scan from
	// the index's start would pass them all again at every watermark).
	fires, err := DueIndex(p.s.st, p.fire, p.nextEvent, wm)
	if err != nil {
		return err
	}
	// The windows due: their expiry entries, or by start their keys.
	var expiryFrom, expiryEnd []byte
	if p.byStart() {
		expiryFrom, expiryEnd = indexFrom(layout.WindowByStart, p.startsFrom(p.openFrom(p.nextEvent))), p.startsDue(wm)
	} else {
		expiryFrom, expiryEnd = indexFrom(layout.WindowExpire, p.nextEvent), layout.DueEnd(layout.WindowExpire, wm)
	}
	// By start the scan passes over the windows themselves, and expire
	// takes their values from it rather than reading each again, unless
	// a timer due here may change a window before it closes.
	expired, values, err := rangeEntries(p.s.st, expiryFrom, expiryEnd, p.byStart() && len(fires) == 0, &p.scan)
	if err != nil {
		return err
	}
	// The expiry entries due, each of which expire removes with its
	// window, go in one range delete at the flush (Spill: one changelog
	// record, one tombstone in the engine, however many watermarks found
	// some) once the changelog has heard of one of them in the
	// transaction, not in a tombstone each; until then, those it never
	// heard of go one by one, with deletes that are silent. So what the
	// changelog hears depends on what it heard before, not on which
	// windows were held nor on where the transactions ended. Until the
	// flush the entries stay in the stage, below nextEvent, where no scan
	// starts. The range starts at the index's prefix, so it only grows:
	// the watermark a task resumes from is the committed one. By start,
	// the windows due go the same way, a range for each start
	// (dropStart); the scan starts past the latest close made
	// (openFrom).
	if len(expired) > 0 && !p.dropping && !p.byStart() {
		if p.dropping, err = p.s.st.Logged(expiryFrom[:1], expiryEnd); err != nil {
			return err
		}
	}
	var held []*heldWindow[A]
	if p.held != nil {
		held = p.held.takeDue(wm)
	}
	// Every entry up to wm is in the three lists and removed below; a
	// timer set at or below wm while they run lowers the bound again
	// (timer). At the end of time wm+1 wraps to math.MinInt64: a scan
	// from the index's start, correct, only not bounded.
	p.nextEvent = wm + 1
	for len(fires) > 0 || len(expired) > 0 || len(held) > 0 {
		// The next expiry: the store's or a held window's, in the
		// expiry index's order (time, then data key); a timer before
		// an expiry at the same time.
		heldNext := len(held) > 0 && (len(expired) == 0 || p.heldFirst(held[0], expired[0]))
		var at int64
		switch {
		case heldNext:
			at = held[0].close
		case len(expired) > 0:
			at = p.dueAt(expired[0])
		}
		switch {
		case len(fires) > 0 && (len(expired) == 0 && len(held) == 0 || layout.ReadTime(fires[0][1:9]) <= at):
			err = p.runTimer(p.fire, fires[0], wm, p.trigger.OnEventTime)
			fires = fires[1:]
		case heldNext:
			err = p.closeHeld(held[0], wm)
			held = held[1:]
		default:
			var val []byte
			if values != nil {
				val, values = values[0], values[1:]
			}
			err = p.expire(expired[0], val, wm)
			expired = expired[1:]
		}
		if err != nil {
			return err
		}
	}
	return p.findNext(p.nextEvent, p.nextProc)
}

// expire removes a closed window, running first its event timer if that
// was at the close time (it has no index entry of its own). due is its
// expiry entry's key or, by start, its own (rangeEntries' copy); val, if
// not nil, is the window's value as the scan that found due read it,
// which nothing has written since.
//
// Laid out by key, the window is read and removed before its expiry entry
// is: the stage then finds the window's entry, which the read just found,
// without a second lookup.
func (p *Window[K, V, A]) expire(due, val []byte, wm int64) error {
	// The window's key is made in the place of the expiry entry's copy,
	// which nothing else reads: a key of its own without an allocation
	// per window, not a scratch buffer, since a key serde may decode
	// without copying (serde.Bytes) and the result forwarded holds the
	// decoded key past this window's expiry. The index key is made
	// again, in scratch, for its delete.
	at := p.dueAt(due)
	p.closedTo = max(p.closedTo, at)
	key := due
	if !p.byStart() {
		key = due[8:]
		key[0] = layout.WindowData
	} else if err := p.dropStart(layout.ReadTime(due[1:9])); err != nil {
		return err
	}
	var w WindowState[A]
	ok := true
	var err error
	if val != nil {
		w, err = p.s.Decode(layout.WindowStart(key), val)
	} else {
		w, ok, err = p.s.Get(key)
	}
	if err != nil || !ok {
		return errors.Join(err, p.deleteExpiry(at, key))
	}
	kb, _, err := layout.ParseWindowKey(key)
	if err != nil {
		return err
	}
	if w.EventTimer == p.closeAt(w.Bounds) {
		// Not stored: remove deletes the window right after.
		if w, err = p.fireAtClose(kb, key, w, wm); err != nil {
			return err
		}
	}
	// remove need not delete the expiry entry, deleted next, unless the
	// allowed lateness changed since the window was made.
	err = p.remove(kb, w, false, p.byStart() || at == p.closeAt(w.Bounds))
	return errors.Join(err, p.deleteExpiry(at, key))
}

// dropStart decides, at the first window of start that expires, whether
// the windows of start go in a range delete at the flush: yes once the
// changelog has heard of one of them (store.Staged.Logged), as the
// expiry entries do (OnWatermark). Each start's range is its own record,
// keyed by its start, so that compaction, which keeps a key's last record,
// keeps every range: one from the prefix to the latest close, shortened
// by a larger allowed lateness in a later deployment, would drop an older
// longer one and bring back the windows only it deleted.
func (p *Window[K, V, A]) dropStart(start int64) error {
	if start == p.lastStart {
		return nil
	}
	p.lastStart = start
	var err error
	if p.dropsStart, err = p.s.st.Logged(startRange(start)); err == nil && p.dropsStart {
		p.dropStarts = append(p.dropStarts, start)
	}
	return err
}

// dueAt is when the window of due, an expiry entry's key or by start a
// window's, closes.
func (p *Window[K, V, A]) dueAt(due []byte) int64 {
	at := layout.ReadTime(due[1:9])
	if p.byStart() {
		return p.closeOfStart(at)
	}
	return at
}

// deleteExpiry deletes the expiry entry at time at of the window stored
// under key, unless the transaction drops the entries due at the flush or
// the store, laid out by start, has none.
func (p *Window[K, V, A]) deleteExpiry(at int64, key []byte) error {
	if p.dropping || p.byStart() {
		return nil
	}
	p.rk = layout.AppendIndexKey(p.rk[:0], layout.WindowExpire, at, key)
	return p.s.st.Delete(p.rk)
}

// OnProcessingTime runs the processing-time timers the clock reached.
func (p *Window[K, V, A]) OnProcessingTime(now int64) error {
	if now < p.nextProc {
		return nil
	}
	due, err := DueIndex(p.s.st, p.proc, p.nextProc, now)
	if err != nil {
		return err
	}
	p.nextProc = now + 1 // as OnWatermark's nextEvent
	wm := p.ctx.Watermark()
	for _, ik := range due {
		if err := p.runTimer(p.proc, ik, wm, p.trigger.OnProcessingTime); err != nil {
			return err
		}
	}
	return p.findNext(p.nextEvent, p.nextProc)
}

// runTimer runs one due timer (its index key ik) through the trigger.
func (p *Window[K, V, A]) runTimer(prefix byte, ik []byte, wm int64, on func(window.TriggerContext) window.TriggerResult) error {
	if err := p.s.st.Delete(ik); err != nil {
		return err
	}
	key := layout.DataKeyFromIndex(p.data, ik)
	w, ok, err := p.s.Get(key)
	if err != nil || !ok {
		return err
	}
	if prefix == p.fire {
		w.EventTimer = window.NoTimer
	} else {
		w.ProcTimer = window.NoTimer
	}
	kb, _, err := layout.ParseWindowKey(key)
	if err != nil {
		return err
	}
	k, err := p.s.ks.Decode(kb)
	if err != nil {
		return fmt.Errorf("store %s: key: %w", p.s.name, err)
	}
	return p.apply(k, key, w, on(p.tctx(w, wm)))
}

// OnAbort forgets the due-time bounds (exec.AbortListener): the aborted
// transaction may have raised them past firings its replay must make
// again. The next listener call finds them in the committed indexes.
func (p *Window[K, V, A]) OnAbort() {
	p.nextEvent, p.nextProc = math.MinInt64, math.MinInt64
}

// findNext sets nextEvent and nextProc from the indexes, given that no
// event index entry lies below event and no processing-time one below
// proc.
func (p *Window[K, V, A]) findNext(event, proc int64) error {
	var errs [3]error
	var fire, expire int64
	fire, errs[0] = FirstIndex(p.s.st, p.fire, event)
	if p.byStart() {
		start, err := FirstIndex(p.s.st, layout.WindowByStart, p.startsFrom(p.openFrom(event)))
		expire, errs[1] = p.closeOfStart(start), err
	} else {
		expire, errs[1] = FirstIndex(p.s.st, layout.WindowExpire, event)
	}
	p.nextProc, errs[2] = FirstIndex(p.s.st, p.proc, proc)
	p.nextEvent = min(fire, expire)
	if p.held != nil {
		p.nextEvent = min(p.nextEvent, p.held.first())
	}
	return errors.Join(errs[:]...)
}

// heldFirst says whether held window h closes before the window of due,
// an expiry entry's key or by start a window's: at an earlier time, or at
// the same time with a smaller data key (an expiry entry's key holds it
// without its prefix byte).
func (p *Window[K, V, A]) heldFirst(h *heldWindow[A], due []byte) bool {
	if at := p.dueAt(due); h.close != at {
		return h.close < at
	}
	if p.byStart() {
		return bytes.Compare(h.key, due) < 0
	}
	return bytes.Compare(h.key[1:], due[9:]) < 0
}
