package topology

import (
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

// WindowOption configures a windowed aggregation: AllowedLateness,
// EmitEveryUpdate, EmitFinal, WithTrigger.
type WindowOption interface {
	applyWindow(*windowConfig)
}

// windowOpt is a WindowOption.
type windowOpt func(*windowConfig)

func (o windowOpt) applyWindow(c *windowConfig) { o(c) }

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
	return windowOpt(func(c *windowConfig) { c.lateness = d.Milliseconds() })
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
	return windowOpt(func(c *windowConfig) { c.trigger = t })
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
		o.applyWindow(&ws.cfg)
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
			ws.cfg.trigger = ops.CompleteEvery(ws.cfg.trigger, c.Size())
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
		ws.late.node = t.add(&exec.Node{Name: t.name(ws.late.agg.Stores[0]+"-late", "LATE"), Kind: exec.KindProcessor, New: ops.NewFn(ops.Pass)}, ws.late.agg)
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
		tb := windowedElements[K, V, A](ws, kind, em, elementConfig[V]{}, true, func(k K, b window.Bounds, elems []ops.Element[V]) []any {
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
func windowedNode[K, V, A any](ws WindowedStream[K, V], kind string, m Materialization[K, A], fn func(K, V, A, bool) A, merge func(K, A, A) A, em *ops.WindowElements[K, V]) Table[Windowed[K], A] {
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
	spec := t.stores[m.Name()] // this topology's, not the shared m.spec
	spec.Windowed = true
	spec.Retention = retention(ws.w, ws.cfg)
	spec.Query = windowQuery(m)
	spec.Layout = layout.KindWindow
	if em != nil {
		// Windows that keep their elements hold them in the stream's
		// value serde beside the aggregate.
		spec.ValueSerde = serde.ID(m.vs) + "+elements:" + serde.ID(em.Values)
	}
	s := ws.g.prepare(m.Name(), m.ks)
	late := ws.late
	n := t.add(&exec.Node{
		Name:   t.name(m.Name()+"-window-"+kind, "WINDOW-"+kind),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New: func() exec.Processor {
			c := ops.WindowConfig[K, V, A]{
				Store: m.Name(), Keys: m.ks, Values: m.vs, Windowed: windowedKey[K], Windows: ws.w,
				Lateness: ws.cfg.lateness, Trigger: ws.cfg.trigger, Trim: ws.cfg.trim,
				Add: fn, Merge: merge, Elements: em,
			}
			if late.node != nil {
				c.LateChild = late.node.Name
			}
			return ops.NewWindow(c)
		},
	}, s.n)
	n.Typed = ops.WindowTyped[K, V, A](n, windowedResult[K])
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

// windowedResult is the key of a window's result, for the runtimes in
// internal/ops; windowedKey is it boxed, for the erased path.
func windowedResult[K any](k K, b window.Bounds) Windowed[K] { return Windowed[K]{Key: k, Window: b} }

func windowedKey[K any](k K, b window.Bounds) any { return windowedResult(k, b) }

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
	return layout.AppendWindow(b, w.Window), nil
}

// AppendEncode is serde.Appender: a sink then encodes a window's result
// key into its shared chunk, where Encode allocates the key's encoding and
// again to append the window to it.
func (s windowedSerde[K]) AppendEncode(dst []byte, w Windowed[K]) ([]byte, error) {
	b, err := serde.AppendEncode(s.ks, dst, w.Key)
	if err != nil {
		return dst, err
	}
	return layout.AppendWindow(b, w.Window), nil
}

func (s windowedSerde[K]) Decode(b []byte) (Windowed[K], error) {
	var w Windowed[K]
	kb, bounds, err := layout.SplitWindowed(b)
	if err != nil {
		return w, err
	}
	k, err := s.ks.Decode(kb)
	if err != nil {
		return w, err
	}
	w.Key, w.Window = k, bounds
	return w, nil
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
	return ops.WindowsOf(w.s, kb, func(key, val []byte) error {
		return w.each(key, val, func(_ Windowed[K], b window.Bounds, a A) error { return fn(b, a) })
	})
}

// All calls fn for each window kept, in the store's order: by key bytes,
// then start; in a store laid out by start (that of fixed-size windows
// that keep an aggregate, internal/layout), by start, then key bytes.
func (w *WindowStore[K, A]) All(fn func(Windowed[K], A) error) error {
	for _, prefix := range []byte{layout.WindowData, layout.WindowByStart} {
		err := w.s.Range([]byte{prefix}, []byte{prefix + 1}, func(key, val []byte) error {
			return w.each(key, val, func(wk Windowed[K], _ window.Bounds, a A) error { return fn(wk, a) })
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *WindowStore[K, A]) each(key, val []byte, fn func(Windowed[K], window.Bounds, A) error) error {
	kb, start, err := layout.ParseWindowKey(key)
	if err != nil {
		return err
	}
	st, ab, err := layout.ParseWindowValue(val)
	if err != nil || !st.Records {
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
	b := window.Bounds{Start: start, End: st.End}
	return fn(Windowed[K]{Key: k, Window: b}, b, a)
}
