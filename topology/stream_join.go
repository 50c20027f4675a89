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
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// JoinWindow bounds a stream-stream join (Kafka Streams' JoinWindows): a
// left record at ts joins the right records of its key with timestamps in
// [ts-before, ts+after], both ends inclusive. Grace is how long after that
// a record may still arrive; it defaults to 0 and is never hidden.
type JoinWindow struct {
	before, after, grace int64
}

// JoinWindows is a symmetric window: right records up to d before or after
// a left one.
func JoinWindows(d time.Duration) JoinWindow {
	return JoinWindow{before: d.Milliseconds(), after: d.Milliseconds()}
}

// JoinWindowsBetween is a window of right records from before a left
// record to after it.
func JoinWindowsBetween(before, after time.Duration) JoinWindow {
	return JoinWindow{before: before.Milliseconds(), after: after.Milliseconds()}
}

// WithGrace lets records arrive up to d late (after the watermark passed
// the end of the windows they could join).
func (w JoinWindow) WithGrace(d time.Duration) JoinWindow { w.grace = d.Milliseconds(); return w }

// StreamJoined names and types the stores of a stream-stream join: the
// records of each side wait in the window stores <name>-left and
// <name>-right (changelogs <application.id>-<name>-left-changelog and
// -right-changelog), and re-keyed sides repartition through
// <application.id>-<name>-left-repartition (and -right-).
type StreamJoined[K, VL, VR any] struct {
	Name string
	Key  serde.Serde[K]
	Left serde.Serde[VL]
	// Right is the right side's value serde.
	Right serde.Serde[VR]
}

// JoinStreams joins the records of two streams with equal keys whose
// timestamps are within the window (inner join): each pair is joined once,
// when the second of the two arrives.
func JoinStreams[K, VL, VR, V any](l Stream[K, VL], r Stream[K, VR], w JoinWindow, joiner func(K, VL, VR) V, j StreamJoined[K, VL, VR]) Stream[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "JoinStreams needs a joiner")
	}
	return streamJoin(l, r, w, j, "JOIN-STREAMS", false, false, func(k K, lv VL, _ bool, rv VR, _ bool) V { return joiner(k, lv, rv) })
}

// LeftJoinStreams is JoinStreams that also emits each left record that
// joined nothing, with ok=false, once no right record can join it any
// more: when the watermark passes ts+before+after+grace. No left record is
// ever emitted unjoined and then joined.
func LeftJoinStreams[K, VL, VR, V any](l Stream[K, VL], r Stream[K, VR], w JoinWindow, joiner func(k K, lv VL, rv VR, ok bool) V, j StreamJoined[K, VL, VR]) Stream[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "LeftJoinStreams needs a joiner")
	}
	return streamJoin(l, r, w, j, "LEFTJOIN-STREAMS", true, false, func(k K, lv VL, _ bool, rv VR, rok bool) V { return joiner(k, lv, rv, rok) })
}

// OuterJoinStreams is LeftJoinStreams for both sides.
func OuterJoinStreams[K, VL, VR, V any](l Stream[K, VL], r Stream[K, VR], w JoinWindow, joiner func(k K, lv VL, lok bool, rv VR, rok bool) V, j StreamJoined[K, VL, VR]) Stream[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "OuterJoinStreams needs a joiner")
	}
	return streamJoin(l, r, w, j, "OUTERJOIN-STREAMS", true, true, joiner)
}

func streamJoin[K, VL, VR, V any](l Stream[K, VL], r Stream[K, VR], w JoinWindow, j StreamJoined[K, VL, VR], kind string, leftOuter, rightOuter bool, joiner func(K, VL, bool, VR, bool) V) Stream[K, V] {
	t := l.t
	if l.t != r.t {
		t.errorf(ErrForeignHandle, "join of streams from two topologies")
	}
	if j.Name == "" || j.Key == nil || j.Left == nil || j.Right == nil {
		t.errorf(ErrMissingSerde, "%s needs StreamJoined with a name and serdes", kind)
		return Stream[K, V]{t: t, n: l.n}
	}
	if w.before < 0 || w.after < 0 || w.grace < 0 {
		t.errorf(ErrInvalidWindow, "join window bounds and grace must not be negative")
	}
	if l.keyChanged {
		l = repartition(l, j.Name+"-left", j.Key, j.Left)
	}
	if r.keyChanged {
		r = repartition(r, j.Name+"-right", j.Key, j.Right)
	}
	retention := time.Duration(w.before+w.after+w.grace)*time.Millisecond + 24*time.Hour
	lm := Materialized(j.Name+"-left", j.Key, j.Left)
	rm := Materialized(j.Name+"-right", j.Key, j.Right)
	for _, spec := range []*exec.Store{lm.spec, rm.spec} {
		spec.Windowed, spec.Retention = true, retention
		spec.Query = nil // records by time, not a key's value: not queryable
	}
	if !lm.register(t) || !rm.register(t) {
		return Stream[K, V]{t: t, n: l.n}
	}
	stores := []string{lm.Name(), rm.Name()}
	// A left record at ts may be late once ts+after+grace is reached: the
	// earliest right record it could join (ts-before) is then gone. It is
	// removed (and, unjoined in a left join, emitted) at
	// ts+before+after+grace, when no on-time right record can join it.
	span := w.before + w.after + w.grace
	left := t.add(&exec.Node{Name: t.name(j.Name+"-join-left", kind+"-LEFT"), Kind: exec.KindProcessor, Stores: stores, New: func() exec.Processor {
		return &joinSide[K, VL, VR, V]{own: lm, other: rm, lateAfter: w.after + w.grace, closeAfter: span,
			lo: -w.after, hi: w.before, outer: leftOuter,
			join: func(k K, own VL, other VR, ok bool) V { return joiner(k, own, true, other, ok) }}
	}}, l.n)
	right := t.add(&exec.Node{Name: t.name(j.Name+"-join-right", kind+"-RIGHT"), Kind: exec.KindProcessor, Stores: stores, New: func() exec.Processor {
		return &joinSide[K, VR, VL, V]{own: rm, other: lm, lateAfter: w.before + w.grace, closeAfter: span,
			lo: -w.before, hi: w.after, outer: rightOuter,
			join: func(k K, own VR, other VL, ok bool) V { return joiner(k, other, ok, own, true) }}
	}}, r.n)
	n := t.add(&exec.Node{Name: t.name("", kind), Kind: exec.KindProcessor, New: newFn(func(c exec.Context, r exec.Record) error {
		return c.Forward(r)
	})}, left, right)
	return Stream[K, V]{t: t, n: n, ks: j.Key, keyChanged: false}
}

// joinSide handles one side's records: it stores each one, joins it with
// the other side's stored records in range, and, at the watermark, removes
// the records no on-time record can join any more, emitting the unjoined
// ones of an outer side.
//
// Store layout (each side's window store):
//
//	d uvarint(len(key)) key ts seq → flags (bit 0: joined), value
//	x close <d-suffix>             → 1   remove at the watermark
type joinSide[K, Own, Other, V any] struct {
	own   Materialization[K, Own]
	other Materialization[K, Other]
	// An own record at ts joins the other side's records with timestamps
	// in [ts-hi, ts-lo]: for the left side hi = before and lo = -after.
	lo, hi                int64
	lateAfter, closeAfter int64
	outer                 bool
	join                  func(k K, own Own, other Other, ok bool) V

	ctx       exec.Context
	st, ost   *store.Staged
	nextClose int64
}

func (p *joinSide[K, Own, Other, V]) Init(ctx exec.Context) error {
	p.ctx, p.st, p.ost = ctx, ctx.Store(p.own.Name()), ctx.Store(p.other.Name())
	var err error
	p.nextClose, err = firstIndex(p.st, layout.WindowExpire)
	return err
}

// seqAt is the sequence number of a new own record of the key whose
// encoding is kb, at ts: one past the largest stored, so that the records
// of a key and timestamp keep their arrival order. It depends on the
// stored records only, not on a counter in memory, so that the replay of
// an aborted transaction, or a restart, numbers them as the first run did
// (a key's records of one timestamp are removed together).
func (p *joinSide[K, Own, Other, V]) seqAt(kb []byte, ts int64) (int64, error) {
	seq := int64(0)
	start, end := joinRange(kb, ts, ts)
	err := p.st.Range(start, end, func(k, _ []byte) error {
		seq = int64(binary.BigEndian.Uint64(k[len(k)-8:])) + 1
		return nil
	})
	return seq, err
}

func (p *joinSide[K, Own, Other, V]) Close() error { return nil }

func joinKey(kb []byte, ts, seq int64) []byte {
	b := layout.AppendTime(layout.WindowKeyPrefix(kb), ts)
	return binary.BigEndian.AppendUint64(b, uint64(seq))
}

// joinRange returns the bounds [start, end) of the join records of the key
// whose encoding is kb with timestamps in [from, to]. Each bound is built
// in a buffer of its own: two appends to one prefix that has spare
// capacity write into one array, and the range comes out [x, x), empty
// (a 36-byte UUID key's prefix has 10 bytes spare).
func joinRange(kb []byte, from, to int64) (start, end []byte) {
	pre := slices.Clip(layout.WindowKeyPrefix(kb))
	return layout.AppendTime(pre, from), layout.AppendTime(pre, to+1)
}

func (p *joinSide[K, Own, Other, V]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		return nil // a delete has no value to join
	}
	ts := r.Timestamp
	if ts+p.lateAfter <= p.ctx.Watermark() {
		p.ctx.CountLate()
		return nil
	}
	k := r.Key.(K)
	kb, err := p.own.ks.Encode(k)
	if err != nil {
		return fmt.Errorf("store %s: key: %w", p.own.Name(), err)
	}
	vb, err := p.own.vs.Encode(r.Value.(Own))
	if err != nil {
		return fmt.Errorf("store %s: value: %w", p.own.Name(), err)
	}
	// The other side's records of the key in range, in (ts, seq) order.
	from, to := ts-p.hi, ts-p.lo // other.ts in [ts-hi, ts-lo]
	type match struct {
		key []byte
		val []byte
	}
	var matches []match
	start, end := joinRange(kb, from, to)
	if err := p.ost.Range(start, end, func(ok, ov []byte) error {
		matches = append(matches, match{append([]byte(nil), ok...), append([]byte(nil), ov...)})
		return nil
	}); err != nil {
		return err
	}
	flags := byte(0)
	own := r.Value.(Own)
	for _, m := range matches {
		if len(m.val) < 1 {
			return fmt.Errorf("store %s: %w: join record of %d bytes", p.other.Name(), window.ErrCorrupt, len(m.val))
		}
		ov, err := p.other.vs.Decode(m.val[1:])
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.other.Name(), err)
		}
		flags = 1
		if m.val[0]&1 == 0 {
			m.val[0] |= 1
			if err := p.ost.Put(m.key, m.val); err != nil {
				return err
			}
		}
		out := r
		out.Value = p.join(k, own, ov, true)
		out.Timestamp = max(ts, layout.ReadTime(m.key[len(m.key)-16:]))
		if err := p.ctx.Forward(out); err != nil {
			return err
		}
	}
	seq, err := p.seqAt(kb, ts)
	if err != nil {
		return err
	}
	key := joinKey(kb, ts, seq)
	closes := ts + p.closeAfter
	if err := p.st.Put(key, append([]byte{flags}, vb...)); err != nil {
		return err
	}
	p.nextClose = min(p.nextClose, closes)
	return p.st.Put(layout.IndexKey(layout.WindowExpire, closes, key), layout.IndexValue)
}

// OnWatermark removes the own records no on-time record can join any more,
// emitting the unjoined ones of an outer side, in (time, key) order.
func (p *joinSide[K, Own, Other, V]) OnWatermark(wm int64) error {
	if wm < p.nextClose {
		return nil
	}
	due, err := dueIndex(p.st, layout.WindowExpire, wm)
	if err != nil {
		return err
	}
	for _, ik := range due {
		key := layout.WindowKeyFromIndex(ik)
		val, ok, err := p.st.Get(key)
		if err != nil {
			return err
		}
		if err := errors.Join(p.st.Delete(ik), p.st.Delete(key)); err != nil {
			return err
		}
		if !ok || !p.outer || len(val) > 0 && val[0]&1 != 0 {
			continue
		}
		kb, _, err := parseJoinKey(key)
		if err != nil {
			return err
		}
		k, err := p.own.ks.Decode(kb)
		if err != nil {
			return fmt.Errorf("store %s: key: %w", p.own.Name(), err)
		}
		v, err := p.own.vs.Decode(val[1:])
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.own.Name(), err)
		}
		var none Other
		ts := layout.ReadTime(key[len(key)-16:])
		if err := p.ctx.Forward(exec.Record{Key: k, Value: p.join(k, v, none, false), Timestamp: ts}); err != nil {
			return err
		}
	}
	p.nextClose, err = firstIndex(p.st, layout.WindowExpire)
	return err
}

// OnAbort forgets the bound of the next removal, as windowProc.OnAbort
// does.
func (p *joinSide[K, Own, Other, V]) OnAbort() { p.nextClose = math.MinInt64 }

// parseJoinKey splits a join record's key into the key's encoding, and the
// timestamp.
func parseJoinKey(k []byte) ([]byte, int64, error) {
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || uint64(len(k)) != 1+uint64(w)+n+16 {
		return nil, 0, fmt.Errorf("%w: join store key of %d bytes", window.ErrCorrupt, len(k))
	}
	return k[1+w : 1+w+int(n)], layout.ReadTime(k[len(k)-16:]), nil
}
