package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
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
// window.Tumbling, window.Hopping or window.InactivityGap.
type Windows interface {
	Validate() error
}

// WindowOption configures a windowed aggregation.
type WindowOption func(*windowConfig)

type emitMode int

const (
	emitOnWatermark emitMode = iota
	emitEveryUpdate
	emitFinal
)

type windowConfig struct {
	lateness int64 // ms
	emit     emitMode
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
// window's end. Merged sessions are not retracted: the merged session is a
// new key.
func EmitEveryUpdate() WindowOption { return func(c *windowConfig) { c.emit = emitEveryUpdate } }

// EmitFinal forwards each window's result exactly once, when the window
// closes: when the watermark passes its end plus the allowed lateness
// (Kafka Streams' suppress(untilWindowCloses)). Records within the lateness
// update the result silently.
func EmitFinal() WindowOption { return func(c *windowConfig) { c.emit = emitFinal } }

// WindowedStream is a grouped stream cut into windows, ready for an
// aggregation.
type WindowedStream[K, V any] struct {
	g    GroupedStream[K, V]
	w    Windows
	cfg  windowConfig
	late *lateLink
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
	switch w.(type) {
	case window.Time, window.Sessions:
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

// windowed is the one node behind the windowed aggregations.
func windowed[K, V, A any](ws WindowedStream[K, V], kind string, m Materialization[K, A], fn func(K, V, A, bool) A, merge func(K, A, A) A) Table[Windowed[K], A] {
	t := ws.g.s.t
	if !m.register(t) {
		return Table[Windowed[K], A]{t: t, n: ws.g.s.n}
	}
	if ws.late.agg != nil {
		t.errorf(ErrDuplicateName, "windowed stream aggregated twice (stores %q and %q); window it again for a second aggregation", ws.late.agg.Stores[0], m.Name())
	}
	m.spec.Windowed = true
	m.spec.Retention = retention(ws.w, ws.cfg)
	s := ws.g.prepare(m.Name(), m.ks)
	late := ws.late
	n := t.add(&exec.Node{
		Name:   t.name(m.Name()+"-window-"+kind, "WINDOW-"+kind),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New: func() exec.Processor {
			p := &windowProc[K, V, A]{m: m, cfg: ws.cfg, fn: fn, merge: merge}
			switch w := ws.w.(type) {
			case window.Time:
				p.time = w
			case window.Sessions:
				p.sessions, p.isSessions = w, true
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
// Kafka Streams, the longest a window can stay open plus a day.
func retention(w Windows, c windowConfig) time.Duration {
	var span int64
	switch w := w.(type) {
	case window.Time:
		b := w.Assign(nil, 0)
		if len(b) > 0 {
			span = b[0].End - b[0].Start
		}
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

// Window store layout. Every key starts with a lower-case letter, so the
// task's time state (exec.TimeStateKey) cannot collide:
//
//	d uvarint(len(key)) key start → end, aggregate   a window's state
//	f at <d-suffix>               → 1                 fire the window when the watermark reaches at
//	x at <d-suffix>               → 1                 expire it when the watermark reaches at
//
// Times are 8 bytes big-endian with the sign bit flipped, so byte order is
// numeric order, and the indexes are scanned in time order.
const (
	prefixData   = 'd'
	prefixFire   = 'f'
	prefixExpire = 'x'
)

var indexValue = []byte{1}

func appendTime(b []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(ts)^(1<<63))
}

func readTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }

// dataKey is the key of a window of the key whose encoding is kb.
func dataKey(dst, kb []byte, start int64) []byte {
	dst = append(dst, prefixData)
	dst = binary.AppendUvarint(dst, uint64(len(kb)))
	dst = append(dst, kb...)
	return appendTime(dst, start)
}

// keyPrefix is the prefix of all of kb's windows.
func keyPrefix(kb []byte) []byte {
	return append(binary.AppendUvarint([]byte{prefixData}, uint64(len(kb))), kb...)
}

func indexKey(prefix byte, at int64, data []byte) []byte {
	b := appendTime(append(make([]byte, 0, 9+len(data)), prefix), at)
	return append(b, data[1:]...)
}

// parseData splits a data key into the key's encoding and the window start.
func parseData(k []byte) (kb []byte, start int64, err error) {
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || uint64(len(k)) != 1+uint64(w)+n+8 {
		return nil, 0, fmt.Errorf("%w: window store key of %d bytes", window.ErrCorrupt, len(k))
	}
	kb = k[1+w : 1+w+int(n)]
	return kb, readTime(k[len(k)-8:]), nil
}

// dataFromIndex turns an index key back into its data key.
func dataFromIndex(ik []byte) []byte {
	return append([]byte{prefixData}, ik[9:]...)
}

func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i]++; end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// windowProc is a windowed aggregation in one task: it keeps each window's
// aggregate and its fire and expiry entries in the window store, forwards
// results as the trigger says and removes windows as the watermark passes
// their end plus the allowed lateness, so state stays bounded.
type windowProc[K, V, A any] struct {
	m          Materialization[K, A]
	cfg        windowConfig
	fn         func(K, V, A, bool) A
	merge      func(K, A, A) A
	time       window.Time
	sessions   window.Sessions
	isSessions bool

	ctx       exec.Context
	st        *store.Staged
	lateChild string
	results   []string // children other than the late records'
	// nextDue is at most the earliest time in the fire and expiry
	// indexes (it may be lower: a stale low value costs one scan).
	nextDue int64
	scratch []window.Bounds
	key     []byte
}

func (p *windowProc[K, V, A]) Init(ctx exec.Context) error {
	p.ctx, p.st = ctx, ctx.Store(p.m.Name())
	for _, c := range ctx.Children() {
		if c != p.lateChild {
			p.results = append(p.results, c)
		}
	}
	var err error
	p.nextDue, err = p.earliestDue()
	return err
}

func (p *windowProc[K, V, A]) Close() error { return nil }

// fireAt is when the watermark completes window b: its last timestamp for
// a time window, its last record plus the gap for a session.
func (p *windowProc[K, V, A]) fireAt(b window.Bounds) int64 {
	if p.isSessions {
		return b.End - 1 + p.sessions.Gap()
	}
	return b.End - 1
}

// closeAt is when window b closes: fireAt plus the allowed lateness.
func (p *windowProc[K, V, A]) closeAt(b window.Bounds) int64 { return p.fireAt(b) + p.cfg.lateness }

type storedWindow[A any] struct {
	b   window.Bounds
	agg A
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
	onTime := false
	p.scratch = p.time.Assign(p.scratch[:0], r.Timestamp)
	for _, b := range p.scratch {
		if p.closeAt(b) <= wm {
			continue // this window closed
		}
		onTime = true
		p.key = dataKey(p.key[:0], kb, b.Start)
		old, ok, err := p.get(p.key)
		if err != nil {
			return err
		}
		w := storedWindow[A]{b: b, agg: p.fn(k, v, old.agg, ok)}
		if err := p.update(k, w, !ok, wm); err != nil {
			return err
		}
	}
	if !onTime {
		return p.lateRecord(r)
	}
	return nil
}

// session places a record among its key's sessions, merging those it
// bridges (Kafka Streams' session semantics, window.Sessions.Merge).
func (p *windowProc[K, V, A]) session(r exec.Record, k K, v V, kb []byte, wm int64) error {
	var existing []window.Bounds
	aggs := map[window.Bounds]A{}
	pre := keyPrefix(kb)
	err := p.st.Range(pre, prefixEnd(pre), func(key, val []byte) error {
		_, start, err := parseData(key)
		if err != nil {
			return err
		}
		w, err := p.decode(start, val)
		if err != nil {
			return err
		}
		existing = append(existing, w.b)
		aggs[w.b] = w.agg
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
	var acc A
	ok := false
	for _, b := range absorbed {
		if ok {
			acc = p.merge(k, acc, aggs[b])
		} else {
			acc, ok = aggs[b], true
		}
		if b == merged {
			continue // the record fell inside it: the session stays
		}
		if err := p.remove(kb, b, wm); err != nil {
			return err
		}
	}
	_, isOld := aggs[merged]
	return p.update(k, storedWindow[A]{b: merged, agg: p.fn(k, v, acc, ok)}, !isOld, wm)
}

// update stores window w of k, registers a new window in the indexes, and
// forwards its result if the trigger says so.
func (p *windowProc[K, V, A]) update(k K, w storedWindow[A], isNew bool, wm int64) error {
	kb, err := p.m.ks.Encode(k)
	if err != nil {
		return err
	}
	key := dataKey(nil, kb, w.b.Start)
	ab, err := p.m.vs.Encode(w.agg)
	if err != nil {
		return fmt.Errorf("store %s: value: %w", p.m.Name(), err)
	}
	val := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(ab)), uint64(w.b.End))
	if err := p.st.Put(key, append(val, ab...)); err != nil {
		return err
	}
	fire, closes := p.fireAt(w.b), p.closeAt(w.b)
	if isNew {
		switch p.cfg.emit {
		case emitFinal:
			err = p.index(prefixFire, closes, key)
		case emitOnWatermark:
			if fire > wm {
				err = p.index(prefixFire, fire, key)
			}
			err = errors.Join(err, p.index(prefixExpire, closes, key))
		case emitEveryUpdate:
			err = p.index(prefixExpire, closes, key)
		}
		if err != nil {
			return err
		}
	}
	if p.cfg.emit == emitEveryUpdate || p.cfg.emit == emitOnWatermark && fire <= wm {
		// Every update, or a late firing of a window that fired before.
		return p.forward(k, w)
	}
	return nil
}

func (p *windowProc[K, V, A]) index(prefix byte, at int64, data []byte) error {
	p.nextDue = min(p.nextDue, at)
	return p.st.Put(indexKey(prefix, at, data), indexValue)
}

// remove deletes window b of the key encoded as kb, with the index entries
// its trigger made.
func (p *windowProc[K, V, A]) remove(kb []byte, b window.Bounds, wm int64) error {
	key := dataKey(nil, kb, b.Start)
	err := p.st.Delete(key)
	switch p.cfg.emit {
	case emitFinal:
		err = errors.Join(err, p.st.Delete(indexKey(prefixFire, p.closeAt(b), key)))
	case emitOnWatermark:
		if p.fireAt(b) > wm {
			err = errors.Join(err, p.st.Delete(indexKey(prefixFire, p.fireAt(b), key)))
		}
		err = errors.Join(err, p.st.Delete(indexKey(prefixExpire, p.closeAt(b), key)))
	case emitEveryUpdate:
		err = errors.Join(err, p.st.Delete(indexKey(prefixExpire, p.closeAt(b), key)))
	}
	return err
}

func (p *windowProc[K, V, A]) get(key []byte) (storedWindow[A], bool, error) {
	val, ok, err := p.st.Get(key)
	if err != nil || !ok {
		return storedWindow[A]{}, false, err
	}
	w, err := p.decode(readTime(key[len(key)-8:]), val)
	return w, err == nil, err
}

func (p *windowProc[K, V, A]) decode(start int64, val []byte) (storedWindow[A], error) {
	if len(val) < 8 {
		return storedWindow[A]{}, fmt.Errorf("store %s: %w: window value of %d bytes", p.m.Name(), window.ErrCorrupt, len(val))
	}
	agg, err := p.m.vs.Decode(val[8:])
	if err != nil {
		return storedWindow[A]{}, fmt.Errorf("store %s: value: %w", p.m.Name(), err)
	}
	return storedWindow[A]{b: window.Bounds{Start: start, End: int64(binary.BigEndian.Uint64(val))}, agg: agg}, nil
}

// forward sends window w's result to the result children, stamped with the
// window's last timestamp.
func (p *windowProc[K, V, A]) forward(k K, w storedWindow[A]) error {
	r := exec.Record{Key: Windowed[K]{Key: k, Window: w.b}, Value: w.agg, Timestamp: w.b.End - 1}
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

// OnWatermark fires the windows whose time came, then removes those that
// closed.
func (p *windowProc[K, V, A]) OnWatermark(wm int64) error {
	if wm < p.nextDue {
		return nil
	}
	fires, err := p.due(prefixFire, wm)
	if err != nil {
		return err
	}
	for _, ik := range fires {
		key := dataFromIndex(ik)
		w, ok, err := p.get(key)
		if err != nil {
			return err
		}
		if err := p.st.Delete(ik); err != nil {
			return err
		}
		if !ok {
			continue
		}
		kb, _, err := parseData(key)
		if err != nil {
			return err
		}
		k, err := p.m.ks.Decode(kb)
		if err != nil {
			return fmt.Errorf("store %s: key: %w", p.m.Name(), err)
		}
		if err := p.forward(k, w); err != nil {
			return err
		}
		if p.cfg.emit == emitFinal {
			if err := p.st.Delete(key); err != nil {
				return err
			}
		}
	}
	expired, err := p.due(prefixExpire, wm)
	if err != nil {
		return err
	}
	for _, ik := range expired {
		if err := errors.Join(p.st.Delete(ik), p.st.Delete(dataFromIndex(ik))); err != nil {
			return err
		}
	}
	p.nextDue, err = p.earliestDue()
	return err
}

// due lists the index entries of one index at or before wm, in order.
func (p *windowProc[K, V, A]) due(prefix byte, wm int64) ([][]byte, error) {
	var keys [][]byte
	end := []byte{prefix + 1}
	if wm < 1<<63-1 {
		end = appendTime([]byte{prefix}, wm+1)
	}
	err := p.st.Range([]byte{prefix}, end, func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	return keys, err
}

// earliestDue is the earliest time in either index (math.MaxInt64 if
// both are empty).
func (p *windowProc[K, V, A]) earliestDue() (int64, error) {
	next := int64(1<<63 - 1)
	for _, prefix := range []byte{prefixFire, prefixExpire} {
		k, _, ok, err := p.st.First([]byte{prefix}, []byte{prefix + 1})
		if err != nil {
			return 0, err
		}
		if ok {
			next = min(next, readTime(k[1:9]))
		}
	}
	return next, nil
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
	pre := keyPrefix(kb)
	return w.s.Range(pre, prefixEnd(pre), func(key, val []byte) error {
		return w.each(key, val, func(_ Windowed[K], b window.Bounds, a A) error { return fn(b, a) })
	})
}

// All calls fn for each window kept, ordered by key bytes, then start.
func (w *WindowStore[K, A]) All(fn func(Windowed[K], A) error) error {
	return w.s.Range([]byte{prefixData}, []byte{prefixData + 1}, func(key, val []byte) error {
		return w.each(key, val, func(wk Windowed[K], _ window.Bounds, a A) error { return fn(wk, a) })
	})
}

func (w *WindowStore[K, A]) each(key, val []byte, fn func(Windowed[K], window.Bounds, A) error) error {
	kb, start, err := parseData(key)
	if err != nil {
		return err
	}
	if len(val) < 8 {
		return fmt.Errorf("%w: window value of %d bytes", window.ErrCorrupt, len(val))
	}
	k, err := w.ks.Decode(kb)
	if err != nil {
		return err
	}
	a, err := w.vs.Decode(val[8:])
	if err != nil {
		return err
	}
	b := window.Bounds{Start: start, End: int64(binary.BigEndian.Uint64(val))}
	return fn(Windowed[K]{Key: k, Window: b}, b, a)
}
