package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// Sliding windows (window.Sliding) are aggregated by their own node: their
// windows are made by the records (Kafka Streams'
// KStreamSlidingWindowAggregate), so there is nothing to Assign, and the
// aggregate of a window made after its records arrived must be folded from
// those records, since an aggregate cannot be split. Each key's records
// are therefore kept, for as long as a window that can still fire may hold
// them, and a record costs time linear in the key's records within d of
// it (read, and folded into each window it makes).
//
// The windows of d (see window.SlidingWindows) and their records, as a
// record r at ts with watermark wm arrives:
//
//   - r is late when its left window is closed: ts + lateness <= wm. It
//     goes to LateRecords, is counted, and changes nothing (Kafka Streams
//     drops it). The left window closes first of all the windows holding
//     r, so an on-time record finds all of them open, and every window it
//     makes is open too.
//   - Otherwise every window of the key holding ts (KS's inclusive
//     [s, s+d] with ts-d <= s <= ts) takes r into its aggregate, in
//     arrival order; then the windows r makes appear — its left window,
//     the right window of each record in [ts-d, ts), and its own right
//     window if a record lies in (ts, ts+d] — each folded from the
//     records it covers, in timestamp order (arrival order within a
//     timestamp).
//   - A window emits as its emit option says: by default when the
//     watermark reaches End-1 = s+d, and again at once when a record
//     changes it after that, within the lateness; with EmitFinal once,
//     when the watermark reaches its close, End-1+lateness; with
//     EmitEveryUpdate each time a record changes or makes it, the changed
//     windows in order of start. Results are stamped End-1, like every
//     window's.
//   - A window is removed at its close; a record once no window that can
//     still change holds it: ts + d + lateness <= the watermark.
//
// Store layout, beside window.go's: windows use its d, f and x entries
// with its value encoding (layout.WindowValue), so WindowView reads a sliding store
// like any window store; records and their expiry index have letters of
// their own:
//
//	d uvarint(len(key)) key start  → the window's state (its count, fire timer, aggregate)
//	f at <d-suffix>                → 1   emit the window (default emit) at End-1
//	x at <d-suffix>                → 1   remove the window (EmitFinal: emit it first) at End-1+lateness
//	r uvarint(len(key)) key ts seq → the record's value, in the stream's value serde
//	y at <r-suffix>                → 1   delete the record at ts+d+lateness
//
// seq (8 bytes big-endian) numbers a key's records of one timestamp in
// arrival order, so byte order is (ts, arrival) order.
const (
	prefixRecord       = 'r'
	prefixRecordExpire = 'y'
)

// slidingEmit is when sliding windows emit: the three behaviours of
// WindowedBy's options that sliding windows support.
type slidingEmit int

const (
	slidingOnWatermark slidingEmit = iota // the default trigger, window.OnWatermark
	slidingFinal                          // EmitFinal, window.AtClose
	slidingEveryUpdate                    // EmitEveryUpdate, window.EveryRecord
)

// slidingNode adds the node of AggregateWindows, CountWindows or
// ReduceWindows over sliding windows.
func slidingNode[K, V, A any](ws WindowedStream[K, V], kind string, m Materialization[K, A], fn func(K, V, A, bool) A) Table[Windowed[K], A] {
	t := ws.g.s.t
	sw, _ := ws.w.(window.SlidingWindows)
	var emit slidingEmit
	switch ws.cfg.trigger {
	case window.OnWatermark():
		emit = slidingOnWatermark
	case window.AtClose():
		emit = slidingFinal
	case window.EveryRecord():
		emit = slidingEveryUpdate
	default:
		// A general trigger would need per-window counts and timers for
		// windows that appear after their records; not supported yet.
		t.errorf(ErrInvalidWindow, "sliding windows emit on the watermark (the default), with EmitFinal or with EmitEveryUpdate only, not with trigger %v", ws.cfg.trigger)
	}
	vs := ws.g.s.vs
	if vs == nil {
		vs = ws.g.g.Val
	}
	if vs == nil {
		t.errorf(ErrMissingSerde, "sliding windows keep their records and need the stream's value serde (give one in Grouped)")
	}
	if !m.register(t) {
		return Table[Windowed[K], A]{t: t, n: ws.g.s.n}
	}
	if ws.late.agg != nil {
		t.errorf(ErrDuplicateName, "windowed stream aggregated twice (stores %q and %q); window it again for a second aggregation", ws.late.agg.Stores[0], m.Name())
	}
	d, lateness := sw.TimeDifference(), ws.cfg.lateness
	m.spec.Windowed = true
	m.spec.Query = windowQuery(m) // its windows are laid out as window.go's
	// As window.go's retention: the longest a record or window is kept,
	// plus a day.
	m.spec.Retention = time.Duration(d+lateness)*time.Millisecond + 24*time.Hour
	s := ws.g.prepare(m.Name(), m.ks)
	late := ws.late
	n := t.add(&exec.Node{
		Name:   t.name(m.Name()+"-sliding-"+kind, "SLIDING-"+kind),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New: func() exec.Processor {
			p := &slidingProc[K, V, A]{m: m, vs: vs, d: d, lateness: lateness, emit: emit, fn: fn}
			if late.node != nil {
				p.lateChild = late.node.Name
			}
			return p
		},
	}, s.n)
	late.agg = n
	return Table[Windowed[K], A]{t: t, n: n, ks: WindowedSerde(m.ks), vs: m.vs}
}

// slidingProc is a sliding-window aggregation in one task.
type slidingProc[K, V, A any] struct {
	m           Materialization[K, A]
	vs          serde.Serde[V] // the records'
	d, lateness int64
	emit        slidingEmit
	fn          func(K, V, A, bool) A
	// codec reads and writes window states and forwards results and late
	// records exactly as the window runtime does.
	codec *ops.WindowStates[K, A]

	ctx       exec.Context
	st        *store.Staged
	lateChild string
	// next is at most the earliest time in the f, x and y indexes; a
	// stale low value costs one scan.
	next int64
	recs []slidingRecord[V] // scratch
}

// slidingRecord is a kept record, its value decoded when first needed.
type slidingRecord[V any] struct {
	ts, seq int64
	raw     []byte
	v       V
	decoded bool
}

func (p *slidingProc[K, V, A]) Init(ctx exec.Context) error {
	p.ctx, p.st = ctx, ctx.Store(p.m.Name())
	p.codec = ops.NewWindowStates(p.m.Name(), p.m.ks, p.m.vs, windowedKey[K], p.lateChild)
	p.codec.Init(ctx)
	return p.findNext()
}

func (p *slidingProc[K, V, A]) Close() error { return nil }

// inRange reports whether every time derived from ts fits in an int64:
// ts-d, and ts+d+lateness+2 (the end of its right window's range scan).
func (p *slidingProc[K, V, A]) inRange(ts int64) bool {
	return ts >= math.MinInt64+p.d && ts <= math.MaxInt64-p.d-p.lateness-2
}

func (p *slidingProc[K, V, A]) Process(r exec.Record) error {
	k, v, ts := r.Key.(K), r.Value.(V), r.Timestamp
	if !p.inRange(ts) {
		return fmt.Errorf("store %s: timestamp %d is out of range for sliding windows of %dms", p.m.Name(), ts, p.d)
	}
	wm := p.ctx.Watermark()
	if ts+p.lateness <= wm {
		return p.codec.Late(r) // its left window has closed
	}
	kb, err := p.m.ks.Encode(k)
	if err != nil {
		return fmt.Errorf("store %s: key: %w", p.m.Name(), err)
	}
	// Every window r changes or makes starts in [ts-d, ts+1], and covers
	// records in [ts-d, ts+d+1]. None of them can have been removed, nor
	// any of those records: all close after ts+lateness > wm.
	recs, err := p.records(kb, ts-p.d, ts+p.d+1)
	if err != nil {
		return err
	}
	existing, err := p.windows(kb, ts-p.d, ts+1)
	if err != nil {
		return err
	}
	seq := int64(0)
	at := len(recs) // where r goes in (ts, seq) order
	for i, q := range recs {
		if q.ts == ts {
			seq = q.seq + 1
		}
		if q.ts > ts && at == len(recs) {
			at = i
		}
	}
	if err := p.keep(kb, ts, seq, v); err != nil {
		return err
	}
	recs = slices.Insert(recs, at, slidingRecord[V]{ts: ts, seq: seq, v: v, decoded: true})
	p.recs = recs

	// The starts of the windows r changes (those holding ts) and of those
	// it makes, in order.
	starts := []int64{ts - p.d} // r's left window
	for s := range existing {
		if s <= ts {
			starts = append(starts, s)
		}
	}
	for _, q := range recs {
		switch {
		case q.ts < ts:
			starts = append(starts, q.ts+1) // q's right window now holds r
		case q.ts > ts && q.ts <= ts+p.d:
			starts = append(starts, ts+1) // r's right window holds q
		}
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)

	for _, s := range starts {
		w, old := existing[s]
		if old && s > ts {
			continue // r's right window, already made by a later record: r is not in it
		}
		if old {
			w.Agg, w.HasAgg = p.fn(k, v, w.Agg, w.HasAgg), true
			w.Count++
		} else {
			w = ops.NewWindowState[A](window.Bounds{Start: s, End: s + p.d + 1})
			if err := p.fold(k, &w, recs); err != nil {
				return err
			}
		}
		if err := p.changed(k, kb, w, !old, wm); err != nil {
			return err
		}
	}
	return nil
}

// keep stores record r of the key kb, with its expiry.
func (p *slidingProc[K, V, A]) keep(kb []byte, ts, seq int64, v V) error {
	vb, err := p.vs.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: value: %w", p.m.Name(), err)
	}
	rk := binary.BigEndian.AppendUint64(layout.AppendTime(recordPrefix(kb), ts), uint64(seq))
	if err := p.st.Put(rk, vb); err != nil {
		return err
	}
	drop := ts + p.d + p.lateness
	p.next = min(p.next, drop)
	return p.st.Put(layout.IndexKey(prefixRecordExpire, drop, rk), layout.IndexValue)
}

// fold computes new window w from the records it covers.
func (p *slidingProc[K, V, A]) fold(k K, w *ops.WindowState[A], recs []slidingRecord[V]) error {
	for i := range recs {
		q := &recs[i]
		if !w.Bounds.Contains(q.ts) {
			continue
		}
		if !q.decoded {
			v, err := p.vs.Decode(q.raw)
			if err != nil {
				return fmt.Errorf("store %s: record value: %w", p.m.Name(), err)
			}
			q.v, q.decoded = v, true
		}
		w.Agg, w.HasAgg = p.fn(k, q.v, w.Agg, w.HasAgg), true
		w.Count++
	}
	return nil
}

// changed files window w, just changed or made by a record judged against
// wm, and emits it if its emit option says so now.
func (p *slidingProc[K, V, A]) changed(k K, kb []byte, w ops.WindowState[A], isNew bool, wm int64) error {
	key := layout.WindowKey(nil, kb, w.Bounds.Start)
	if isNew {
		closeAt := w.Bounds.End - 1 + p.lateness
		p.next = min(p.next, closeAt)
		if err := p.st.Put(layout.IndexKey(layout.WindowExpire, closeAt, key), layout.IndexValue); err != nil {
			return err
		}
	}
	switch p.emit {
	case slidingEveryUpdate:
		if err := p.codec.Forward(k, w); err != nil {
			return err
		}
	case slidingOnWatermark:
		if fireAt := w.Bounds.End - 1; fireAt <= wm {
			// A late update (or a window made late): emit it now, and
			// drop a firing still due, which would repeat it.
			if err := p.codec.Forward(k, w); err != nil {
				return err
			}
			if w.EventTimer != window.NoTimer {
				if err := p.st.Delete(layout.IndexKey(layout.WindowFire, w.EventTimer, key)); err != nil {
					return err
				}
				w.EventTimer = window.NoTimer
			}
		} else if w.EventTimer == window.NoTimer {
			w.EventTimer = fireAt
			p.next = min(p.next, fireAt)
			if err := p.st.Put(layout.IndexKey(layout.WindowFire, fireAt, key), layout.IndexValue); err != nil {
				return err
			}
		}
	}
	return p.codec.Put(key, w)
}

func recordPrefix(kb []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(kb)+16)
	b = binary.AppendUvarint(append(b, prefixRecord), uint64(len(kb)))
	return append(b, kb...)
}

// records reads the kept records of the key kb with timestamps in
// [from, to], in (ts, seq) order, into the processor's scratch slice.
func (p *slidingProc[K, V, A]) records(kb []byte, from, to int64) ([]slidingRecord[V], error) {
	pre := recordPrefix(kb)
	recs := p.recs[:0]
	err := p.st.Range(layout.AppendTime(slices.Clip(pre), from), layout.AppendTime(slices.Clip(pre), to+1), func(k, v []byte) error {
		if len(k) != len(pre)+16 {
			return fmt.Errorf("store %s: %w: record key of %d bytes", p.m.Name(), window.ErrCorrupt, len(k))
		}
		recs = append(recs, slidingRecord[V]{
			ts:  layout.ReadTime(k[len(k)-16:]),
			seq: int64(binary.BigEndian.Uint64(k[len(k)-8:])),
			raw: append([]byte(nil), v...),
		})
		return nil
	})
	return recs, err
}

// windows reads the windows of the key kb starting in [from, to].
func (p *slidingProc[K, V, A]) windows(kb []byte, from, to int64) (map[int64]ops.WindowState[A], error) {
	ws := map[int64]ops.WindowState[A]{}
	err := p.st.Range(layout.WindowKey(nil, kb, from), layout.WindowKey(nil, kb, to+1), func(k, v []byte) error {
		start := layout.ReadTime(k[len(k)-8:])
		w, err := p.codec.Decode(start, v)
		ws[start] = w
		return err
	})
	return ws, err
}

// OnWatermark emits the windows whose firing the watermark reached, then
// removes (with EmitFinal: emits, then removes) those that closed, then
// the records no open window holds; each in (time, key, start) order.
func (p *slidingProc[K, V, A]) OnWatermark(wm int64) error {
	if wm < p.next {
		return nil
	}
	fires, err := dueIndex(p.st, layout.WindowFire, wm)
	if err != nil {
		return err
	}
	for _, ik := range fires {
		if err := p.st.Delete(ik); err != nil {
			return err
		}
		key := layout.WindowKeyFromIndex(ik)
		k, w, ok, err := p.window(key)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		w.EventTimer = window.NoTimer
		if err := p.codec.Forward(k, w); err != nil {
			return err
		}
		if err := p.codec.Put(key, w); err != nil {
			return err
		}
	}
	closed, err := dueIndex(p.st, layout.WindowExpire, wm)
	if err != nil {
		return err
	}
	for _, ik := range closed {
		key := layout.WindowKeyFromIndex(ik)
		k, w, ok, err := p.window(key)
		if err != nil {
			return err
		}
		if ok && p.emit == slidingFinal {
			if err := p.codec.Forward(k, w); err != nil {
				return err
			}
		}
		err = errors.Join(p.st.Delete(ik), p.st.Delete(key))
		if ok && w.EventTimer != window.NoTimer {
			err = errors.Join(err, p.st.Delete(layout.IndexKey(layout.WindowFire, w.EventTimer, key)))
		}
		if err != nil {
			return err
		}
	}
	dropped, err := dueIndex(p.st, prefixRecordExpire, wm)
	if err != nil {
		return err
	}
	for _, ik := range dropped {
		rk := append([]byte{prefixRecord}, ik[9:]...)
		if err := errors.Join(p.st.Delete(ik), p.st.Delete(rk)); err != nil {
			return err
		}
	}
	return p.findNext()
}

// window reads the window stored under key, with its record key.
func (p *slidingProc[K, V, A]) window(key []byte) (k K, w ops.WindowState[A], ok bool, err error) {
	w, ok, err = p.codec.Get(key)
	if err != nil || !ok {
		return k, w, ok, err
	}
	kb, _, err := layout.ParseWindowKey(key)
	if err != nil {
		return k, w, false, err
	}
	if k, err = p.m.ks.Decode(kb); err != nil {
		return k, w, false, fmt.Errorf("store %s: key: %w", p.m.Name(), err)
	}
	return k, w, true, nil
}

// OnAbort forgets the due-time bound, as the window runtime (ops.Window) does.
func (p *slidingProc[K, V, A]) OnAbort() { p.next = math.MinInt64 }

// findNext sets next from the indexes.
func (p *slidingProc[K, V, A]) findNext() error {
	p.next = math.MaxInt64
	for _, prefix := range []byte{layout.WindowFire, layout.WindowExpire, prefixRecordExpire} {
		t, err := firstIndex(p.st, prefix)
		if err != nil {
			return err
		}
		p.next = min(p.next, t)
	}
	return nil
}
