package topology

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// Windowed is the key of a windowed result: the record key and its window.
type Windowed[K any] struct {
	Key    K
	Window window.Bounds
}

// Windows is a window definition a stream can be windowed by:
// window.Tumbling, window.Hopping, window.InactivityGap, window.Global,
// window.TumblingCount, window.SlidingCount or window.Sliding.
type Windows interface {
	Validate() error
}

// WindowOption configures a windowed aggregation.
type WindowOption func(*windowConfig)

type windowConfig struct {
	lateness int64 // ms
	trigger  window.Trigger
	// trim > 0 drops a window's kept records beyond the last trim as
	// records arrive: sliding count windows with a trigger of one's own,
	// which may fire too rarely for the evictor to bound them.
	trim int64
}

// AllowedLateness keeps a window's state for d after the watermark passed
// its end (Flink's allowedLateness, Kafka Streams' grace): a record for the
// window arriving in that time updates it and, once the window has fired,
// fires it again with the updated result. A record whose every window is
// past its lateness is late: it goes to LateRecords, and is counted. The
// default is 0, so a window closes as soon as the watermark passes its end.
func AllowedLateness(d time.Duration) WindowOption {
	return func(c *windowConfig) { c.lateness = d.Milliseconds() }
}

// EmitEveryUpdate forwards a window's result on every record it takes
// (Kafka Streams' default), instead of when the watermark passes the
// window's end. Sessions merged into a new one are retracted (a tombstone
// for their key, downstream of ToStream), as with every trigger: any
// session that went out, and only those.
func EmitEveryUpdate() WindowOption { return WithTrigger(window.EveryRecord()) }

// EmitFinal forwards each window's result exactly once, when the window
// closes: when the watermark passes its end plus the allowed lateness
// (Kafka Streams' suppress(untilWindowCloses)). Records within the lateness
// update the result silently.
func EmitFinal() WindowOption { return WithTrigger(window.AtClose()) }

// WithTrigger sets when windows fire: window.OnWatermark() (the default),
// AtClose, EveryRecord, CountTrigger, ProcessingTime, EarlyEvery,
// EarlyEveryInterval, Purging(...) of any of them, or a Trigger of one's
// own. Global windows need one: the default never fires them. Count
// windows given one keep their bound: a tumbling one still fires and
// purges every size records, a sliding one keeps only its last size.
func WithTrigger(t window.Trigger) WindowOption {
	return func(c *windowConfig) { c.trigger = t }
}

// WindowedStream is a grouped stream cut into windows, ready for an
// aggregation.
type WindowedStream[K, V any] struct {
	g    GroupedStream[K, V]
	w    Windows
	cfg  windowConfig
	late *lateLink
	// evictCount > 0 keeps only the last evictCount records of a window:
	// sliding count windows.
	evictCount int64
}

// lateLink connects the aggregation of a windowed stream to the stream of
// its late records, whichever is made first.
type lateLink struct {
	agg  *exec.Node // the aggregation, once made
	node *exec.Node // the late-records node, once asked for
}

// WindowedBy cuts each key's records into windows. With the default
// trigger, a window's result is forwarded once the watermark passes its end
// (the end is exclusive: the watermark must reach End-1), and again for each
// record within the allowed lateness; EmitEveryUpdate and EmitFinal change
// that.
func WindowedBy[K, V any](g GroupedStream[K, V], w Windows, opts ...WindowOption) WindowedStream[K, V] {
	ws := WindowedStream[K, V]{g: g, w: w, late: &lateLink{}}
	for _, o := range opts {
		o(&ws.cfg)
	}
	t := g.s.t
	if c, ok := w.(window.Count); ok {
		// Count windows are Flink's: the global window, fired every
		// slide records, holding the last size of them.
		if err := c.Validate(); err != nil {
			t.errorf(ErrInvalidWindow, "%v", err)
		}
		ws.w = window.Global()
		switch {
		case ws.cfg.trigger == nil && c.Slide() == c.Size():
			ws.cfg.trigger = window.Purging(window.CountTrigger(c.Slide()))
		case ws.cfg.trigger == nil:
			ws.cfg.trigger = window.CountTrigger(c.Slide())
			ws.evictCount = c.Size()
		case c.Slide() == c.Size():
			// A trigger of one's own decides the firings in between;
			// the window still completes, fires and purges every size
			// records, so it holds no more than them.
			ws.cfg.trigger = completeEvery{t: ws.cfg.trigger, n: c.Size()}
		default:
			// The evictor stays (as in Flink), and the records past
			// the last size go as they arrive: the trigger may fire
			// too rarely for the evictor to bound the state.
			ws.evictCount, ws.cfg.trim = c.Size(), c.Size()
		}
		w = ws.w
	}
	if ws.cfg.trigger == nil {
		if _, ok := w.(window.GlobalWindows); ok {
			t.errorf(ErrInvalidWindow, "global windows need a trigger (WithTrigger): the watermark never completes them")
		}
		ws.cfg.trigger = window.OnWatermark()
	}
	switch w.(type) {
	case window.Time, window.Sessions, window.GlobalWindows, window.SlidingWindows:
		if err := w.Validate(); err != nil {
			t.errorf(ErrInvalidWindow, "%v", err)
		}
	default:
		t.errorf(ErrInvalidWindow, "windows of type %T cannot be aggregated yet", w)
	}
	if ws.cfg.lateness < 0 {
		t.errorf(ErrInvalidWindow, "allowed lateness %dms must not be negative", ws.cfg.lateness)
	}
	return ws
}

// completeEvery is a trigger given to tumbling count windows: t's
// decisions, and a firing that purges once the window holds n records.
type completeEvery struct {
	t window.Trigger
	n int64
}

func (c completeEvery) OnElement(tc window.TriggerContext, ts int64) window.TriggerResult {
	r := c.t.OnElement(tc, ts)
	if tc.Count >= c.n {
		r.Fire, r.Purge = true, true
	}
	return r
}

func (c completeEvery) OnEventTime(tc window.TriggerContext) window.TriggerResult {
	return c.t.OnEventTime(tc)
}

func (c completeEvery) OnProcessingTime(tc window.TriggerContext) window.TriggerResult {
	return c.t.OnProcessingTime(tc)
}

func (c completeEvery) String() string { return fmt.Sprintf("%v, purged every %d", c.t, c.n) }

// LateRecords is the stream of records that arrived after every window
// they belong to had closed (past the allowed lateness), unchanged: route
// it to a topic or process it. Without it late records are only counted.
// Call it after the aggregation of ws.
func LateRecords[K, V any](ws WindowedStream[K, V]) Stream[K, V] {
	t := ws.g.s.t
	if ws.late.agg == nil {
		t.errorf(ErrNoAggregation, "LateRecords must follow an aggregation of the windowed stream")
		return ws.g.s
	}
	if ws.late.node == nil {
		ws.late.node = t.add(&exec.Node{Name: t.name(ws.late.agg.Stores[0]+"-late", "LATE"), Kind: exec.KindProcessor, New: newFn(func(c exec.Context, r exec.Record) error {
			return c.Forward(r)
		})}, ws.late.agg)
	}
	return Stream[K, V]{t: t, n: ws.late.node, ks: ws.g.s.ks, vs: ws.g.s.vs}
}

// AggregateWindows folds each window's records into an accumulator,
// starting from init(), kept in the window store m. For session windows
// use AggregateSessions, which also merges sessions.
func AggregateWindows[K, V, A any](ws WindowedStream[K, V], init func() A, add func(K, V, A) A, m Materialization[K, A]) Table[Windowed[K], A] {
	if _, ok := ws.w.(window.Sessions); ok {
		ws.g.s.t.errorf(ErrInvalidWindow, "session windows need AggregateSessions, which merges sessions")
	}
	if init == nil || add == nil {
		ws.g.s.t.errorf(ErrNilFunction, "AggregateWindows needs init and add functions")
	}
	return windowed(ws, "aggregate", m, initAdd(init, add), nil)
}

// AggregateSessions folds each session's records into an accumulator,
// starting from init(); when a record bridges sessions, their accumulators
// are combined with merge (Kafka Streams' session merger).
func AggregateSessions[K, V, A any](ws WindowedStream[K, V], init func() A, add func(K, V, A) A, merge func(K, A, A) A, m Materialization[K, A]) Table[Windowed[K], A] {
	if _, ok := ws.w.(window.Sessions); !ok {
		ws.g.s.t.errorf(ErrInvalidWindow, "AggregateSessions needs session windows (window.InactivityGap)")
	}
	if init == nil || add == nil || merge == nil {
		ws.g.s.t.errorf(ErrNilFunction, "AggregateSessions needs init, add and merge functions")
	}
	return windowed(ws, "aggregate", m, initAdd(init, add), merge)
}

func initAdd[K, V, A any](init func() A, add func(K, V, A) A) func(K, V, A, bool) A {
	return func(k K, v V, agg A, ok bool) A {
		if !ok {
			agg = init()
		}
		return add(k, v, agg)
	}
}

// CountWindows counts the records per key and window (time or session).
func CountWindows[K, V any](ws WindowedStream[K, V], m Materialization[K, int64]) Table[Windowed[K], int64] {
	return windowed(ws, "count", m, func(_ K, _ V, n int64, _ bool) int64 { return n + 1 },
		func(_ K, a, b int64) int64 { return a + b })
}

// ReduceWindows combines the values per key and window (time or session)
// with fn.
func ReduceWindows[K, V any](ws WindowedStream[K, V], fn func(V, V) V, m Materialization[K, V]) Table[Windowed[K], V] {
	if fn == nil {
		ws.g.s.t.errorf(ErrNilFunction, "ReduceWindows needs a function")
	}
	return windowed(ws, "reduce", m, func(_ K, v V, old V, ok bool) V {
		if ok {
			return fn(old, v)
		}
		return v
	}, func(_ K, a, b V) V { return fn(a, b) })
}

// windowed is the node behind the windowed aggregations: incremental, or
// over the kept elements where count windows slide (their evictor needs
// the elements).
func windowed[K, V, A any](ws WindowedStream[K, V], kind string, m Materialization[K, A], fn func(K, V, A, bool) A, merge func(K, A, A) A) Table[Windowed[K], A] {
	if _, ok := ws.w.(window.SlidingWindows); ok {
		return slidingNode(ws, kind, m, fn) // sliding.go
	}
	if ws.evictCount > 0 {
		em := Materialization[K, V]{spec: m.spec, ks: m.ks, vs: ws.g.s.vs}
		if em.vs == nil {
			em.vs = ws.g.g.Val
		}
		if em.vs == nil {
			ws.g.s.t.errorf(ErrMissingSerde, "sliding count windows keep their records and need the stream's value serde (give one in Grouped)")
		}
		tb := windowedElements[K, V, A](ws, kind, em, elementConfig[V]{}, true, func(k K, b window.Bounds, elems []Element[V]) []any {
			var agg A
			ok := false
			for _, e := range elems {
				agg, ok = fn(k, e.Value, agg, ok), true
			}
			return []any{agg}
		})
		tb.vs = m.vs
		return tb
	}
	return windowedNode(ws, kind, m, fn, merge, nil)
}

// windowedNode adds the windowed node: an aggregation (fn, merge) or a
// full-window function (em).
func windowedNode[K, V, A any](ws WindowedStream[K, V], kind string, m Materialization[K, A], fn func(K, V, A, bool) A, merge func(K, A, A) A, em *elementMode[K, V]) Table[Windowed[K], A] {
	t := ws.g.s.t
	if _, ok := ws.w.(window.SlidingWindows); ok {
		t.errorf(ErrInvalidWindow, "sliding windows can be aggregated (AggregateWindows, CountWindows, ReduceWindows), not processed")
	}
	if !m.register(t) {
		return Table[Windowed[K], A]{t: t, n: ws.g.s.n}
	}
	if ws.late.agg != nil {
		t.errorf(ErrDuplicateName, "windowed stream aggregated twice (stores %q and %q); window it again for a second aggregation", ws.late.agg.Stores[0], m.Name())
	}
	m.spec.Windowed = true
	m.spec.Retention = retention(ws.w, ws.cfg)
	m.spec.Query = windowQuery(m)
	s := ws.g.prepare(m.Name(), m.ks)
	late := ws.late
	n := t.add(&exec.Node{
		Name:   t.name(m.Name()+"-window-"+kind, "WINDOW-"+kind),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New: func() exec.Processor {
			p := &windowProc[K, V, A]{m: m, cfg: ws.cfg, fn: fn, merge: merge, elements: em}
			switch w := ws.w.(type) {
			case window.Time:
				p.time = w
			case window.Sessions:
				p.sessions, p.isSessions = w, true
			case window.GlobalWindows:
				p.global = true
			}
			if late.node != nil {
				p.lateChild = late.node.Name
			}
			return p
		},
	}, s.n)
	late.agg = n
	return Table[Windowed[K], A]{t: t, n: n, ks: WindowedSerde(m.ks), vs: m.vs}
}

// retention is how long a windowed store's changelog keeps records: as in
// Kafka Streams, the longest a window can stay open plus a day; 0 (keep
// everything, compacted) for the global window, which never closes.
func retention(w Windows, c windowConfig) time.Duration {
	var span int64
	switch w := w.(type) {
	case window.GlobalWindows:
		return 0
	case window.Time:
		span = w.Size()
	case window.Sessions:
		span = w.Gap()
	}
	return time.Duration(span+c.lateness)*time.Millisecond + 24*time.Hour
}

// WindowedSerde encodes a windowed key as the key's bytes followed by the
// window's start and end, 8 bytes big-endian each.
func WindowedSerde[K any](ks serde.Serde[K]) serde.Serde[Windowed[K]] {
	return windowedSerde[K]{ks}
}

type windowedSerde[K any] struct{ ks serde.Serde[K] }

func (s windowedSerde[K]) Encode(w Windowed[K]) ([]byte, error) {
	b, err := s.ks.Encode(w.Key)
	if err != nil {
		return nil, err
	}
	b = binary.BigEndian.AppendUint64(b, uint64(w.Window.Start))
	return binary.BigEndian.AppendUint64(b, uint64(w.Window.End)), nil
}

func (s windowedSerde[K]) Decode(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	if len(b) < 16 {
		return w, fmt.Errorf("%w: windowed key of %d bytes", serde.ErrDecode, len(b))
	}
	k, err := s.ks.Decode(b[:len(b)-16])
	if err != nil {
		return w, err
	}
	w.Key = k
	w.Window.Start = int64(binary.BigEndian.Uint64(b[len(b)-16:]))
	w.Window.End = int64(binary.BigEndian.Uint64(b[len(b)-8:]))
	return w, nil
}

// windowProc is a windowed aggregation in one task: it keeps each window's
// aggregate, record count and trigger timers in the window store, asks the
// trigger what to do on each record and timer, and removes windows as the
// watermark passes their close time, so state stays bounded.
type windowProc[K, V, A any] struct {
	m          Materialization[K, A]
	cfg        windowConfig
	fn         func(K, V, A, bool) A
	merge      func(K, A, A) A
	time       window.Time
	sessions   window.Sessions
	isSessions bool
	global     bool
	// elements, when set, keeps each window's records instead of an
	// aggregate, for a full-window function (ProcessWindows).
	elements *elementMode[K, V]

	ctx       exec.Context
	st        *store.Staged
	lateChild string
	results   []string // children other than the late records'
	// nextEvent and nextProc are at most the earliest time in the event
	// (fire and expiry) and processing-time indexes; a stale low value
	// costs one scan.
	nextEvent, nextProc int64
	scratch             []window.Bounds
}

// stored is one window's state. Its value in the store:
//
//	end int64, count int64, event timer int64, processing timer int64,
//	next element seq int64, flags uint8,
//	[uvarint since-fire]           (flags bit 2)
//	[uvarint len, emitted result]  (flags bit 3)
//	aggregate                      (flags bit 0)
//
// Flags: bit 0 the window holds records; bit 1 a result of the window (its
// bounds) went downstream and was not retracted since; bit 2 the entry has
// the since-fire count and bit 1 is meaningful (every entry written now);
// bit 3 the emitted result differs from the aggregate, and is stored
// before it (with bit 1 set and bit 3 clear, what went out is the
// aggregate; only sessions keep a differing one, for their retraction).
// An entry without bit 2 was written before these facts were kept: its
// since-fire count is its count, and whether it was emitted is inferred
// (legacy).
//
// hasAgg says the window holds records: an aggregate or, with elements,
// element entries, numbered from 0 to seq-1 (some maybe evicted).
type stored[A any] struct {
	b                           window.Bounds
	count, eventTimer, procTime int64
	seq                         int64
	sinceFire                   int64
	hasAgg                      bool
	agg                         A
	// emitted says a result of the window went downstream (and was not
	// retracted); shown is that result encoded, nil when it is the
	// aggregate as encoded in enc or in the store (or not kept: only
	// sessions, which merges retract, keep it).
	emitted bool
	shown   []byte
	// legacy: the entry was written without the since-fire count and
	// the emitted flag (see decode).
	legacy bool
	// enc caches the encoded aggregate, nil when unknown.
	enc []byte
}

const (
	flagHasAgg   = 1 << 0
	flagEmitted  = 1 << 1
	flagKept     = 1 << 2
	flagShown    = 1 << 3
	flagsDefined = flagHasAgg | flagEmitted | flagKept | flagShown
)

const windowHeader = 8 + 8 + 8 + 8 + 8 + 1

func (p *windowProc[K, V, A]) Init(ctx exec.Context) error {
	p.ctx, p.st = ctx, ctx.Store(p.m.Name())
	for _, c := range ctx.Children() {
		if c != p.lateChild {
			p.results = append(p.results, c)
		}
	}
	return p.findNext()
}

func (p *windowProc[K, V, A]) Close() error { return nil }

// maxTimestamp is when the watermark completes window b: its last
// timestamp for a time window, its last record plus the gap for a session.
func (p *windowProc[K, V, A]) maxTimestamp(b window.Bounds) int64 {
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
func (p *windowProc[K, V, A]) closeAt(b window.Bounds) int64 {
	if p.global {
		return b.End
	}
	return p.maxTimestamp(b) + p.cfg.lateness
}

func (p *windowProc[K, V, A]) Process(r exec.Record) error {
	k, v := r.Key.(K), r.Value.(V)
	kb, err := p.m.ks.Encode(k)
	if err != nil {
		return fmt.Errorf("store %s: key: %w", p.m.Name(), err)
	}
	wm := p.ctx.Watermark()
	if p.isSessions {
		return p.session(r, k, v, kb, wm)
	}
	if p.global {
		p.scratch = append(p.scratch[:0], window.GlobalBounds)
	} else {
		p.scratch = p.time.Assign(p.scratch[:0], r.Timestamp)
	}
	onTime := false
	for _, b := range p.scratch {
		if p.closeAt(b) <= wm {
			continue // this window closed
		}
		onTime = true
		key := layout.WindowKey(nil, kb, b.Start)
		w, ok, err := p.get(key)
		if err != nil {
			return err
		}
		if !ok {
			w = p.fresh(b)
		}
		if err := p.add(k, v, r.Timestamp, key, &w); err != nil {
			return err
		}
		if err := p.element(k, kb, w, !ok, r.Timestamp, wm); err != nil {
			return err
		}
	}
	if !onTime {
		return p.lateRecord(r)
	}
	return nil
}

func (p *windowProc[K, V, A]) fresh(b window.Bounds) stored[A] {
	return stored[A]{b: b, eventTimer: window.NoTimer, procTime: window.NoTimer}
}

// session places a record among its key's sessions, merging those it
// bridges (Kafka Streams' session semantics, window.Sessions.Merge).
func (p *windowProc[K, V, A]) session(r exec.Record, k K, v V, kb []byte, wm int64) error {
	var existing []window.Bounds
	all := map[window.Bounds]stored[A]{}
	pre := layout.WindowKeyPrefix(kb)
	err := p.st.Range(pre, layout.PrefixEnd(pre), func(key, val []byte) error {
		w, err := p.decode(layout.ReadTime(key[len(key)-8:]), val)
		if err != nil {
			return err
		}
		if p.closeAt(w.b) <= wm {
			// Closed for this record, if not yet removed: whether it
			// still is depends on how far the task's own watermark
			// got, which depends on commits and on how writers
			// interleave; the record's watermark does not (invariant 5).
			return nil
		}
		existing = append(existing, w.b)
		all[w.b] = w
		return nil
	})
	if err != nil {
		return err
	}
	merged, absorbed := p.sessions.Merge(existing, r.Timestamp)
	if p.closeAt(merged) <= wm {
		// Only a new session can be closed already: one that absorbs a
		// stored (so still open) session closes no earlier than it.
		return p.lateRecord(r)
	}
	key := layout.WindowKey(nil, kb, merged.Start)
	w, isOld := all[merged]
	if !isOld {
		w = p.fresh(merged)
		for _, b := range absorbed {
			a := all[b]
			// The absorbed session starting where the merged one does
			// has its key: its elements stay where they are.
			same := a.b.Start == merged.Start
			if p.elements != nil {
				if same {
					w.seq, w.hasAgg = max(w.seq, a.seq), w.hasAgg || a.hasAgg
				} else if err := p.moveElements(layout.WindowKey(nil, kb, a.b.Start), key, &w); err != nil {
					return err
				}
			} else {
				switch {
				case !a.hasAgg:
				case w.hasAgg:
					w.agg = p.merge(k, w.agg, a.agg)
				default:
					w.agg, w.hasAgg = a.agg, true
				}
			}
			w.count += a.count
			w.sinceFire += a.sinceFire
			if err := p.remove(kb, a, same); err != nil {
				return err
			}
			if err := p.retract(k, a); err != nil {
				return err
			}
		}
	}
	if err := p.add(k, v, r.Timestamp, key, &w); err != nil {
		return err
	}
	return p.element(k, kb, w, !isOld, r.Timestamp, wm)
}

// retract tells downstream that session a, merged into another, is gone,
// if a result of it went out: what its stored flags say, for every
// trigger, whatever watermark the merging record carries. (Its elements'
// results, with ProcessWindows, are a stream, which has nothing to
// retract.)
func (p *windowProc[K, V, A]) retract(k K, a stored[A]) error {
	if p.elements != nil {
		return nil
	}
	if !a.emitted {
		return nil
	}
	old := any(a.agg)
	if a.shown != nil {
		v, err := p.m.vs.Decode(a.shown)
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.m.Name(), err)
		}
		old = v
	}
	return p.forwardValue(k, a.b, exec.Change{Old: old})
}

// add puts a record into window w (stored under key).
func (p *windowProc[K, V, A]) add(k K, v V, ts int64, key []byte, w *stored[A]) error {
	w.count++
	w.sinceFire++
	if p.elements != nil {
		if err := p.addElement(key, w, v, ts); err != nil {
			return err
		}
		return p.trimElements(key, w)
	}
	if err := p.keepShown(w); err != nil {
		return err
	}
	w.agg, w.hasAgg, w.enc = p.fn(k, v, w.agg, w.hasAgg), true, nil
	return nil
}

// keepShown pins down what session w emitted before its aggregate
// changes: if that is the aggregate, its encoding. Only a session can be
// retracted (when merged), so only a session's is kept.
func (p *windowProc[K, V, A]) keepShown(w *stored[A]) error {
	if !w.emitted || w.shown != nil || p.elements != nil || !p.isSessions {
		return nil
	}
	if w.enc == nil {
		if !w.hasAgg {
			return nil
		}
		ab, err := p.m.vs.Encode(w.agg)
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.m.Name(), err)
		}
		w.enc = ab
	}
	w.shown = w.enc
	return nil
}

func (p *windowProc[K, V, A]) tctx(w stored[A], wm int64) window.TriggerContext {
	return window.TriggerContext{
		Window: w.b, MaxTimestamp: p.maxTimestamp(w.b), Close: p.closeAt(w.b),
		Count: w.count, SinceFire: w.sinceFire, Watermark: wm, Now: p.ctx.WallClock(),
		EventTimer: w.eventTimer, ProcessingTimer: w.procTime,
	}
}

// element asks the trigger about a record window w just took.
func (p *windowProc[K, V, A]) element(k K, kb []byte, w stored[A], isNew bool, ts, wm int64) error {
	key := layout.WindowKey(nil, kb, w.b.Start)
	if isNew && !p.global {
		p.nextEvent = min(p.nextEvent, p.closeAt(w.b))
		if err := p.st.Put(layout.IndexKey(layout.WindowExpire, p.closeAt(w.b), key), layout.IndexValue); err != nil {
			return err
		}
	}
	return p.apply(k, key, w, p.cfg.trigger.OnElement(p.tctx(w, wm), ts))
}

// apply carries out a trigger's decision for window w and stores it.
func (p *windowProc[K, V, A]) apply(k K, key []byte, w stored[A], res window.TriggerResult) error {
	var err error
	if w.eventTimer, err = p.timer(layout.WindowFire, key, w.eventTimer, res.EventTimer, p.closeAt(w.b), &p.nextEvent); err != nil {
		return err
	}
	if w.procTime, err = p.timer(layout.WindowProc, key, w.procTime, res.ProcessingTimer, noClose, &p.nextProc); err != nil {
		return err
	}
	if res.Fire {
		w.sinceFire = 0
	}
	if res.Fire && w.hasAgg {
		if p.elements != nil {
			err = p.fireElements(k, key, &w)
		} else {
			err = p.forward(k, w)
		}
		if err != nil {
			return err
		}
		// What went out is now the aggregate: kept as a stored fact, so
		// a later retraction depends on it and not on a watermark.
		w.emitted, w.shown = true, nil
	}
	if res.Purge {
		if p.elements != nil {
			if err := p.clearElements(key); err != nil {
				return err
			}
		} else if err := p.keepShown(&w); err != nil {
			return err
		}
		var zero A
		w.agg, w.hasAgg, w.count, w.sinceFire, w.enc = zero, false, 0, 0, nil
	}
	return p.put(key, w)
}

// noClose is the close time of processing-time timers: none.
const noClose = window.NoTimer

// timer moves a window's timer in its index from old to the trigger's
// choice, and returns the timer now set. An event timer at the window's
// close time (AtClose, or OnWatermark without lateness) needs no index
// entry: the expiry index runs it before removing the window, which saves
// two changelog records per window.
func (p *windowProc[K, V, A]) timer(prefix byte, key []byte, old, want, closes int64, next *int64) (int64, error) {
	if want == window.NoTimer || want == old {
		return old, nil
	}
	if old != window.NoTimer && old != closes {
		if err := p.st.Delete(layout.IndexKey(prefix, old, key)); err != nil {
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
	return want, p.st.Put(layout.IndexKey(prefix, want, key), layout.IndexValue)
}

// remove deletes window w of the key encoded as kb, with its index entries
// and, unless keepElements, its elements.
func (p *windowProc[K, V, A]) remove(kb []byte, w stored[A], keepElements bool) error {
	key := layout.WindowKey(nil, kb, w.b.Start)
	err := p.st.Delete(key)
	if p.elements != nil && !keepElements {
		err = errors.Join(err, p.clearElements(key))
	}
	if !p.global {
		err = errors.Join(err, p.st.Delete(layout.IndexKey(layout.WindowExpire, p.closeAt(w.b), key)))
	}
	if w.eventTimer != window.NoTimer && w.eventTimer != p.closeAt(w.b) {
		err = errors.Join(err, p.st.Delete(layout.IndexKey(layout.WindowFire, w.eventTimer, key)))
	}
	if w.procTime != window.NoTimer {
		err = errors.Join(err, p.st.Delete(layout.IndexKey(layout.WindowProc, w.procTime, key)))
	}
	return err
}

func (p *windowProc[K, V, A]) put(key []byte, w stored[A]) error {
	ab := w.enc
	if w.hasAgg && p.elements == nil && ab == nil {
		var err error
		if ab, err = p.m.vs.Encode(w.agg); err != nil {
			return fmt.Errorf("store %s: value: %w", p.m.Name(), err)
		}
	}
	// A constant capacity keeps val on the stack (Put copies it) for
	// small aggregates.
	val := make([]byte, windowHeader, windowHeader+binary.MaxVarintLen64+16)
	binary.BigEndian.PutUint64(val, uint64(w.b.End))
	binary.BigEndian.PutUint64(val[8:], uint64(w.count))
	binary.BigEndian.PutUint64(val[16:], uint64(w.eventTimer))
	binary.BigEndian.PutUint64(val[24:], uint64(w.procTime))
	binary.BigEndian.PutUint64(val[32:], uint64(w.seq))
	flags := byte(flagKept)
	if w.hasAgg {
		flags |= flagHasAgg
	}
	if w.emitted {
		flags |= flagEmitted
	}
	val = binary.AppendUvarint(val, uint64(w.sinceFire))
	// The emitted result is stored only when it is not the aggregate:
	// between the firings of EarlyEvery, CountTrigger(n>1) and the like,
	// and after a purge.
	if w.emitted && w.shown != nil && p.elements == nil && (!w.hasAgg || !bytes.Equal(w.shown, ab)) {
		flags |= flagShown
		val = binary.AppendUvarint(val, uint64(len(w.shown)))
		val = append(val, w.shown...)
	}
	val[40] = flags
	if w.hasAgg && p.elements == nil {
		val = append(val, ab...)
	}
	return p.st.Put(key, val)
}

func (p *windowProc[K, V, A]) get(key []byte) (stored[A], bool, error) {
	val, ok, err := p.st.Get(key)
	if err != nil || !ok {
		return stored[A]{}, false, err
	}
	w, err := p.decode(layout.ReadTime(key[len(key)-8:]), val)
	return w, err == nil, err
}

func (p *windowProc[K, V, A]) decode(start int64, val []byte) (stored[A], error) {
	w, ab, err := decodeWindow[A](start, val)
	if err != nil {
		return w, fmt.Errorf("store %s: %w", p.m.Name(), err)
	}
	if w.legacy {
		// Written before the emitted flag was kept: EveryRecord emitted
		// every window that holds records; OnWatermark one whose firing
		// is no longer due. Other triggers' windows were never
		// retracted before either.
		w.emitted = w.hasAgg && (p.cfg.trigger == window.EveryRecord() ||
			p.cfg.trigger == window.OnWatermark() && w.eventTimer == window.NoTimer)
	}
	w.shown = bytes.Clone(w.shown)
	if w.hasAgg && p.elements == nil {
		if w.agg, err = p.m.vs.Decode(ab); err != nil {
			return w, fmt.Errorf("store %s: value: %w", p.m.Name(), err)
		}
		if w.emitted && w.shown == nil && p.isSessions {
			// What went out: keepShown needs it if the aggregate
			// changes. Copied, as the store may reuse val.
			w.enc = bytes.Clone(ab)
		}
	}
	return w, nil
}

// decodeWindow reads a window's header; ab is the encoded aggregate.
func decodeWindow[A any](start int64, val []byte) (w stored[A], ab []byte, err error) {
	corrupt := func() (stored[A], []byte, error) {
		return stored[A]{}, nil, fmt.Errorf("%w: window value of %d bytes", window.ErrCorrupt, len(val))
	}
	if len(val) < windowHeader {
		return corrupt()
	}
	flags := val[40]
	if flags&^flagsDefined != 0 || flags&flagKept == 0 && flags&^flagHasAgg != 0 {
		return corrupt()
	}
	w = stored[A]{
		b:          window.Bounds{Start: start, End: int64(binary.BigEndian.Uint64(val))},
		count:      int64(binary.BigEndian.Uint64(val[8:])),
		eventTimer: int64(binary.BigEndian.Uint64(val[16:])),
		procTime:   int64(binary.BigEndian.Uint64(val[24:])),
		seq:        int64(binary.BigEndian.Uint64(val[32:])),
		hasAgg:     flags&flagHasAgg != 0,
		emitted:    flags&flagEmitted != 0,
	}
	rest := val[windowHeader:]
	if flags&flagKept == 0 {
		w.sinceFire, w.legacy = w.count, true
		return w, rest, nil
	}
	since, n := binary.Uvarint(rest)
	if n <= 0 {
		return corrupt()
	}
	w.sinceFire, rest = int64(since), rest[n:]
	if flags&flagShown != 0 {
		l, n := binary.Uvarint(rest)
		if n <= 0 || uint64(len(rest)-n) < l {
			return corrupt()
		}
		w.shown, rest = rest[n:n+int(l)], rest[n+int(l):]
	}
	return w, rest, nil
}

// forward sends window w's result to the result children, stamped with the
// window's last timestamp.
func (p *windowProc[K, V, A]) forward(k K, w stored[A]) error {
	return p.forwardValue(k, w.b, exec.Change{New: w.agg})
}

func (p *windowProc[K, V, A]) forwardValue(k K, b window.Bounds, v any) error {
	r := exec.Record{Key: Windowed[K]{Key: k, Window: b}, Value: v, Timestamp: b.End - 1}
	if p.global {
		r.Timestamp = max(0, p.ctx.StreamTime()) // the window has no end to stamp
	}
	for _, c := range p.results {
		if err := p.ctx.ForwardTo(c, r); err != nil {
			return err
		}
	}
	return nil
}

func (p *windowProc[K, V, A]) lateRecord(r exec.Record) error {
	p.ctx.CountLate()
	if p.lateChild == "" {
		return nil
	}
	return p.ctx.ForwardTo(p.lateChild, r)
}

// OnWatermark runs the event timers the watermark reached and removes the
// windows that closed, all in one time order (then key and start; a timer
// before a close at the same time), so that how far the watermark jumps at
// once never changes the order of the results.
func (p *windowProc[K, V, A]) OnWatermark(wm int64) error {
	if wm < p.nextEvent {
		return nil
	}
	fires, err := dueIndex(p.st, layout.WindowFire, wm)
	if err != nil {
		return err
	}
	expired, err := dueIndex(p.st, layout.WindowExpire, wm)
	if err != nil {
		return err
	}
	for len(fires) > 0 || len(expired) > 0 {
		if len(expired) == 0 || len(fires) > 0 && layout.ReadTime(fires[0][1:9]) <= layout.ReadTime(expired[0][1:9]) {
			err = p.runTimer(layout.WindowFire, fires[0], wm, p.cfg.trigger.OnEventTime)
			fires = fires[1:]
		} else {
			err = p.expire(expired[0], wm)
			expired = expired[1:]
		}
		if err != nil {
			return err
		}
	}
	return p.findNext()
}

// expire removes a closed window, running first its event timer if that
// was at the close time (it has no index entry of its own).
func (p *windowProc[K, V, A]) expire(ik []byte, wm int64) error {
	key := layout.WindowKeyFromIndex(ik)
	w, ok, err := p.get(key)
	if err != nil {
		return err
	}
	if err := p.st.Delete(ik); err != nil || !ok {
		return err
	}
	kb, _, err := layout.ParseWindowKey(key)
	if err != nil {
		return err
	}
	if w.eventTimer == p.closeAt(w.b) {
		k, err := p.m.ks.Decode(kb)
		if err != nil {
			return fmt.Errorf("store %s: key: %w", p.m.Name(), err)
		}
		w.eventTimer = window.NoTimer
		res := p.cfg.trigger.OnEventTime(p.tctx(w, wm))
		res.EventTimer, res.ProcessingTimer = window.NoTimer, window.ClearTimer
		if err := p.apply(k, key, w, res); err != nil {
			return err
		}
		if w, _, err = p.get(key); err != nil {
			return err
		}
	}
	return p.remove(kb, w, false)
}

// OnProcessingTime runs the processing-time timers the clock reached.
func (p *windowProc[K, V, A]) OnProcessingTime(now int64) error {
	if now < p.nextProc {
		return nil
	}
	due, err := dueIndex(p.st, layout.WindowProc, now)
	if err != nil {
		return err
	}
	wm := p.ctx.Watermark()
	for _, ik := range due {
		if err := p.runTimer(layout.WindowProc, ik, wm, p.cfg.trigger.OnProcessingTime); err != nil {
			return err
		}
	}
	return p.findNext()
}

// runTimer runs one due timer (its index key ik) through the trigger.
func (p *windowProc[K, V, A]) runTimer(prefix byte, ik []byte, wm int64, on func(window.TriggerContext) window.TriggerResult) error {
	if err := p.st.Delete(ik); err != nil {
		return err
	}
	key := layout.WindowKeyFromIndex(ik)
	w, ok, err := p.get(key)
	if err != nil || !ok {
		return err
	}
	if prefix == layout.WindowFire {
		w.eventTimer = window.NoTimer
	} else {
		w.procTime = window.NoTimer
	}
	kb, _, err := layout.ParseWindowKey(key)
	if err != nil {
		return err
	}
	k, err := p.m.ks.Decode(kb)
	if err != nil {
		return fmt.Errorf("store %s: key: %w", p.m.Name(), err)
	}
	return p.apply(k, key, w, on(p.tctx(w, wm)))
}

// dueIndex lists, in order, the keys of the time index prefix (keys: the
// prefix, a time, anything) whose time is at or before now.
func dueIndex(st *store.Staged, prefix byte, now int64) ([][]byte, error) {
	return ops.DueIndex(st, prefix, now)
}

// firstIndex is the earliest time in the time index prefix,
// math.MaxInt64 if it is empty.
func firstIndex(st *store.Staged, prefix byte) (int64, error) {
	return ops.FirstIndex(st, prefix)
}

// OnAbort forgets the due-time bounds (exec.AbortListener): the aborted
// transaction may have raised them past firings its replay must make
// again. The next listener call finds them in the committed indexes.
func (p *windowProc[K, V, A]) OnAbort() {
	p.nextEvent, p.nextProc = math.MinInt64, math.MinInt64
}

// findNext sets nextEvent and nextProc from the indexes.
func (p *windowProc[K, V, A]) findNext() error {
	var errs [3]error
	var fire, expire int64
	fire, errs[0] = firstIndex(p.st, layout.WindowFire)
	expire, errs[1] = firstIndex(p.st, layout.WindowExpire)
	p.nextProc, errs[2] = firstIndex(p.st, layout.WindowProc)
	p.nextEvent = min(fire, expire)
	return errors.Join(errs[:]...)
}

// WindowStore is a typed read-only view of a window store.
type WindowStore[K, A any] struct {
	s  *store.Staged
	ks serde.Serde[K]
	vs serde.Serde[A]
}

// WindowView types a staged window store with the materialization's serdes,
// for drivers that reach a task's stores from outside.
func (m Materialization[K, V]) WindowView(s *store.Staged) *WindowStore[K, V] {
	return &WindowStore[K, V]{s: s, ks: m.ks, vs: m.vs}
}

// Fetch calls fn for each window of k that is still kept, oldest first.
func (w *WindowStore[K, A]) Fetch(k K, fn func(window.Bounds, A) error) error {
	kb, err := w.ks.Encode(k)
	if err != nil {
		return err
	}
	pre := layout.WindowKeyPrefix(kb)
	return w.s.Range(pre, layout.PrefixEnd(pre), func(key, val []byte) error {
		return w.each(key, val, func(_ Windowed[K], b window.Bounds, a A) error { return fn(b, a) })
	})
}

// All calls fn for each window kept, ordered by key bytes, then start.
func (w *WindowStore[K, A]) All(fn func(Windowed[K], A) error) error {
	return w.s.Range([]byte{layout.WindowData}, []byte{layout.WindowData + 1}, func(key, val []byte) error {
		return w.each(key, val, func(wk Windowed[K], _ window.Bounds, a A) error { return fn(wk, a) })
	})
}

func (w *WindowStore[K, A]) each(key, val []byte, fn func(Windowed[K], window.Bounds, A) error) error {
	kb, start, err := layout.ParseWindowKey(key)
	if err != nil {
		return err
	}
	st, ab, err := decodeWindow[A](start, val)
	if err != nil || !st.hasAgg {
		return err // a purged window holds nothing to show
	}
	k, err := w.ks.Decode(kb)
	if err != nil {
		return err
	}
	a, err := w.vs.Decode(ab)
	if err != nil {
		return err
	}
	return fn(Windowed[K]{Key: k, Window: st.b}, st.b, a)
}
