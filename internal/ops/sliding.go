package ops

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// Sliding windows (window.Sliding) are aggregated by their own runtime:
// their windows are made by the records (Kafka Streams'
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
// The store layout is layout/sliding.go's.

// SlidingEmit is when sliding windows emit: the three behaviours of
// WindowedBy's options that sliding windows support.
type SlidingEmit int

const (
	SlidingOnWatermark SlidingEmit = iota // the default trigger, window.OnWatermark
	SlidingFinal                          // EmitFinal, window.AtClose
	SlidingEveryUpdate                    // EmitEveryUpdate, window.EveryRecord
)

// SlidingConfig configures a sliding-window aggregation (NewSliding).
type SlidingConfig[K, V, A any] struct {
	Store string
	Key   serde.Serde[K]
	// Value is the records' serde: they are kept.
	Value       serde.Serde[V]
	D, Lateness int64
	Emit        SlidingEmit
	// Fn folds a record into an aggregate (has: the aggregate holds
	// records already).
	Fn func(k K, v V, agg A, has bool) A
	// Agg is the aggregates' serde.
	Agg serde.Serde[A]
	// Windowed makes the key of a result (topology.Windowed[K]).
	Windowed func(K, window.Bounds) any
	// LateChild names the child that takes late records, "" for none.
	LateChild string
}

// Sliding is a sliding-window aggregation in one task.
type Sliding[K, V, A any] struct {
	cfg SlidingConfig[K, V, A]
	// codec reads and writes window states and forwards results and
	// late records exactly as the window runtime does, so a sliding
	// store reads like any window store.
	codec *WindowStates[K, A]

	ctx exec.Context
	st  *store.Staged
	// next is at most the earliest time in the f, x and y indexes; a
	// stale low value costs one scan.
	next int64
	recs []slidingRecord[V] // scratch
}

// NewSliding returns the runtime of the aggregation cfg.
func NewSliding[K, V, A any](cfg SlidingConfig[K, V, A]) *Sliding[K, V, A] {
	return &Sliding[K, V, A]{cfg: cfg}
}

// slidingRecord is a kept record, its value decoded when first needed.
type slidingRecord[V any] struct {
	ts, seq int64
	raw     []byte
	v       V
	decoded bool
}

func (p *Sliding[K, V, A]) Init(ctx exec.Context) error {
	p.ctx, p.st = ctx, ctx.Store(p.cfg.Store)
	p.codec = NewWindowStates(p.cfg.Store, p.cfg.Key, p.cfg.Agg, p.cfg.Windowed, p.cfg.LateChild)
	p.codec.Init(ctx)
	return p.findNext(math.MinInt64)
}

func (p *Sliding[K, V, A]) Close() error { return nil }

// inRange reports whether every time derived from ts fits in an int64:
// ts-d, and ts+d+lateness+2 (the end of its right window's range scan).
func (p *Sliding[K, V, A]) inRange(ts int64) bool {
	return ts >= math.MinInt64+p.cfg.D && ts <= math.MaxInt64-p.cfg.D-p.cfg.Lateness-2
}

func (p *Sliding[K, V, A]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		p.ctx.CountIgnoredDelete() // windows ignore deletes, as aggregations do
		return nil
	}
	k, v, ts := r.Key.(K), r.Value.(V), r.Timestamp
	d := p.cfg.D
	if !p.inRange(ts) {
		return fmt.Errorf("store %s: timestamp %d is out of range for sliding windows of %dms", p.cfg.Store, ts, d)
	}
	wm := p.ctx.Watermark()
	if ts+p.cfg.Lateness <= wm {
		return p.codec.Late(r) // its left window has closed
	}
	kb, err := p.cfg.Key.Encode(k)
	if err != nil {
		return fmt.Errorf("store %s: key: %w", p.cfg.Store, err)
	}
	// Every window r changes or makes starts in [ts-d, ts+1], and covers
	// records in [ts-d, ts+d+1]. None of them can have been removed, nor
	// any of those records: all close after ts+lateness > wm.
	recs, err := p.records(kb, ts-d, ts+d+1)
	if err != nil {
		return err
	}
	existing, err := p.windows(kb, ts-d, ts+1)
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
	starts := []int64{ts - d} // r's left window
	for s := range existing {
		if s <= ts {
			starts = append(starts, s)
		}
	}
	for _, q := range recs {
		switch {
		case q.ts < ts:
			starts = append(starts, q.ts+1) // q's right window now holds r
		case q.ts > ts && q.ts <= ts+d:
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
			w.Agg, w.HasAgg, w.enc = p.cfg.Fn(k, v, w.Agg, w.HasAgg), true, nil
			w.Count++
		} else {
			w = NewWindowState[A](window.Bounds{Start: s, End: s + d + 1})
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
func (p *Sliding[K, V, A]) keep(kb []byte, ts, seq int64, v V) error {
	vb, err := p.cfg.Value.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: value: %w", p.cfg.Store, err)
	}
	rk := layout.SlidingRecordKey(kb, ts, seq)
	if err := p.st.Put(rk, vb); err != nil {
		return err
	}
	drop := ts + p.cfg.D + p.cfg.Lateness
	p.next = min(p.next, drop)
	return p.st.Put(layout.IndexKey(layout.SlidingRecordExpire, drop, rk), layout.IndexValue)
}

// fold computes new window w from the records it covers.
func (p *Sliding[K, V, A]) fold(k K, w *WindowState[A], recs []slidingRecord[V]) error {
	for i := range recs {
		q := &recs[i]
		if !w.Bounds.Contains(q.ts) {
			continue
		}
		if !q.decoded {
			v, err := p.cfg.Value.Decode(q.raw)
			if err != nil {
				return fmt.Errorf("store %s: record value: %w", p.cfg.Store, err)
			}
			q.v, q.decoded = v, true
		}
		w.Agg, w.HasAgg, w.enc = p.cfg.Fn(k, q.v, w.Agg, w.HasAgg), true, nil
		w.Count++
	}
	return nil
}

// changed files window w, just changed or made by a record judged against
// wm, and emits it if its emit option says so now.
func (p *Sliding[K, V, A]) changed(k K, kb []byte, w WindowState[A], isNew bool, wm int64) error {
	key := layout.WindowKey(nil, kb, w.Bounds.Start)
	if isNew {
		closeAt := w.Bounds.End - 1 + p.cfg.Lateness
		p.next = min(p.next, closeAt)
		if err := p.st.Put(layout.IndexKey(layout.WindowExpire, closeAt, key), layout.IndexValue); err != nil {
			return err
		}
	}
	switch p.cfg.Emit {
	case SlidingEveryUpdate:
		if err := p.codec.Forward(k, w); err != nil {
			return err
		}
	case SlidingOnWatermark:
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

// records reads the kept records of the key kb with timestamps in
// [from, to], in (ts, seq) order, into the runtime's scratch slice.
func (p *Sliding[K, V, A]) records(kb []byte, from, to int64) ([]slidingRecord[V], error) {
	pre := layout.SlidingRecordPrefix(kb)
	recs := p.recs[:0]
	start, end := layout.SlidingRecordRange(pre, from, to)
	err := p.st.Range(start, end, func(k, v []byte) error {
		if len(k) != len(pre)+16 {
			return fmt.Errorf("store %s: %w: record key of %d bytes", p.cfg.Store, window.ErrCorrupt, len(k))
		}
		recs = append(recs, slidingRecord[V]{
			ts:  layout.SlidingRecordTime(k),
			seq: layout.SlidingRecordSeq(k),
			raw: append([]byte(nil), v...),
		})
		return nil
	})
	return recs, err
}

// windows reads the windows of the key kb starting in [from, to].
func (p *Sliding[K, V, A]) windows(kb []byte, from, to int64) (map[int64]WindowState[A], error) {
	ws := map[int64]WindowState[A]{}
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
func (p *Sliding[K, V, A]) OnWatermark(wm int64) error {
	if wm < p.next {
		return nil
	}
	// No entry of the three indexes lies below next: the scans start
	// there (see Window.OnWatermark), and what they find up to wm is
	// removed here, while nothing here adds an entry.
	from := p.next
	fires, err := DueIndex(p.st, layout.WindowFire, from, wm)
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
	closed, err := DueIndex(p.st, layout.WindowExpire, from, wm)
	if err != nil {
		return err
	}
	for _, ik := range closed {
		key := layout.WindowKeyFromIndex(ik)
		k, w, ok, err := p.window(key)
		if err != nil {
			return err
		}
		if ok && p.cfg.Emit == SlidingFinal {
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
	dropped, err := DueIndex(p.st, layout.SlidingRecordExpire, from, wm)
	if err != nil {
		return err
	}
	for _, ik := range dropped {
		rk := layout.SlidingRecordKeyFromIndex(ik)
		if err := errors.Join(p.st.Delete(ik), p.st.Delete(rk)); err != nil {
			return err
		}
	}
	// (At the end of time wm+1 wraps to math.MinInt64: a scan from the
	// index's start, correct, only not bounded.)
	return p.findNext(wm + 1)
}

// window reads the window stored under key, with its record key.
func (p *Sliding[K, V, A]) window(key []byte) (k K, w WindowState[A], ok bool, err error) {
	w, ok, err = p.codec.Get(key)
	if err != nil || !ok {
		return k, w, ok, err
	}
	kb, _, err := layout.ParseWindowKey(key)
	if err != nil {
		return k, w, false, err
	}
	if k, err = p.cfg.Key.Decode(kb); err != nil {
		return k, w, false, fmt.Errorf("store %s: key: %w", p.cfg.Store, err)
	}
	return k, w, true, nil
}

// OnAbort forgets the due-time bound, as the window runtime's OnAbort
// does: the aborted transaction may have raised it past what is due.
func (p *Sliding[K, V, A]) OnAbort() { p.next = math.MinInt64 }

// findNext sets next from the indexes, none of which has an entry below
// from.
func (p *Sliding[K, V, A]) findNext(from int64) error {
	p.next = math.MaxInt64
	for _, prefix := range []byte{layout.WindowFire, layout.WindowExpire, layout.SlidingRecordExpire} {
		t, err := FirstIndex(p.st, prefix, from)
		if err != nil {
			return err
		}
		p.next = min(p.next, t)
	}
	return nil
}
