package ops

import (
	"fmt"
	"math"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// StreamJoinConfig configures one side of a stream–stream join
// (NewStreamJoinSide). Own is the side's value type, Other the other
// side's.
type StreamJoinConfig[K, Own, Other, V any] struct {
	// OwnStore and OtherStore name the sides' window stores (layout.JoinKey).
	OwnStore, OtherStore string
	Key                  serde.Serde[K]
	OwnValue             serde.Serde[Own]
	OtherValue           serde.Serde[Other]
	// An own record at ts joins the other side's records with timestamps
	// in [ts-Hi, ts-Lo]: for the left side Hi = before and Lo = -after.
	Lo, Hi int64
	// An own record at ts is late once ts+LateAfter is reached, and is
	// removed at ts+CloseAfter.
	LateAfter, CloseAfter int64
	// Outer emits the own records that joined nothing when they are
	// removed, with ok=false.
	Outer bool
	Join  func(k K, own Own, other Other, ok bool) V
}

// StreamJoinSide is the runtime of one side of a stream–stream join: it
// stores each own record, joins it with the other side's stored records in
// range, and, at the watermark, removes the records no on-time record can
// join any more, emitting the unjoined ones of an outer side.
type StreamJoinSide[K, Own, Other, V any] struct {
	cfg StreamJoinConfig[K, Own, Other, V]

	ctx       exec.Context
	st, ost   *store.Staged
	nextClose int64

	// sweepStep is how far the watermark moves between sweeps of the
	// own store's joinKeys.
	sweepStep int64
}

// NewStreamJoinSide returns the runtime of the join side cfg.
func NewStreamJoinSide[K, Own, Other, V any](cfg StreamJoinConfig[K, Own, Other, V]) *StreamJoinSide[K, Own, Other, V] {
	return &StreamJoinSide[K, Own, Other, V]{cfg: cfg}
}

func (p *StreamJoinSide[K, Own, Other, V]) Init(ctx exec.Context) error {
	p.ctx, p.st, p.ost = ctx, ctx.Store(p.cfg.OwnStore), ctx.Store(p.cfg.OtherStore)
	// A sweep passes every entry of the own store's joinKeys, once per
	// half a lateness bound of event time: an entry stays a lateness
	// bound or the join's span, and half a bound more, so it costs a few
	// visits over its life.
	p.sweepStep = max(p.cfg.LateAfter/2, 1)
	var err error
	p.nextClose, err = FirstIndex(p.st, layout.WindowExpire, math.MinInt64)
	return err
}

// seqAt is the sequence number of a new own record of the key whose
// encoding is kb, at ts: one past the largest stored, so that the records
// of a key and timestamp keep their arrival order. It depends on the
// stored records only, not on a counter in memory, so that the replay of
// an aborted transaction, or a restart, numbers them as the first run did
// (a key's records of one timestamp are removed together).
//
// Nearly every record is the first of its key at its timestamp, so the
// store's joinKeys answers first, and then a point read of sequence number
// 0: absent, no record of the key and timestamp is stored (they are stored
// from 0 up and removed together), and the record gets 0 without the
// iterator a range needs, which cost more than the rest of storing the
// record.
func (p *StreamJoinSide[K, Own, Other, V]) seqAt(kb []byte, ts int64) (int64, error) {
	own, err := keysOf(p.st, p.cfg.OwnStore)
	if err != nil {
		return 0, err
	}
	k0 := layout.JoinKey(kb, ts, 0)
	if !own.add(kb, k0[:len(k0)-8], ts) {
		return 0, nil
	}
	if _, ok, err := p.st.Get(k0); err != nil || !ok {
		return 0, err
	}
	seq := int64(0)
	start, end := layout.JoinRange(kb, ts, ts)
	err = p.st.Range(start, end, func(k, _ []byte) error {
		seq = layout.JoinSeq(k) + 1
		return nil
	})
	return seq, err
}

func (p *StreamJoinSide[K, Own, Other, V]) Close() error { return nil }

func (p *StreamJoinSide[K, Own, Other, V]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		return nil // a delete has no value to join
	}
	ts := r.Timestamp
	if ts+p.cfg.LateAfter <= p.ctx.Watermark() {
		p.ctx.CountLate()
		return nil
	}
	k := r.Key.(K)
	kb, err := p.cfg.Key.Encode(k)
	if err != nil {
		return fmt.Errorf("store %s: key: %w", p.cfg.OwnStore, err)
	}
	vb, err := p.cfg.OwnValue.Encode(r.Value.(Own))
	if err != nil {
		return fmt.Errorf("store %s: value: %w", p.cfg.OwnStore, err)
	}
	// The other side's records of the key in range, in (ts, seq) order.
	from, to := ts-p.cfg.Hi, ts-p.cfg.Lo // other.ts in [ts-hi, ts-lo]
	type match struct {
		key []byte
		val []byte
	}
	var matches []match
	other, err := keysOf(p.ost, p.cfg.OtherStore)
	if err != nil {
		return err
	}
	if other.mayHold(kb) {
		start, end := layout.JoinRange(kb, from, to)
		if err := p.ost.Range(start, end, func(ok, ov []byte) error {
			matches = append(matches, match{append([]byte(nil), ok...), append([]byte(nil), ov...)})
			return nil
		}); err != nil {
			return err
		}
	}
	flags := byte(0)
	own := r.Value.(Own)
	for _, m := range matches {
		if len(m.val) < 1 {
			return fmt.Errorf("store %s: %w: join record of %d bytes", p.cfg.OtherStore, window.ErrCorrupt, len(m.val))
		}
		ov, err := p.cfg.OtherValue.Decode(m.val[1:])
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.cfg.OtherStore, err)
		}
		flags = layout.JoinJoined
		if m.val[0]&layout.JoinJoined == 0 {
			m.val[0] |= layout.JoinJoined
			if err := p.ost.Put(m.key, m.val); err != nil {
				return err
			}
		}
		out := r
		out.Value = p.cfg.Join(k, own, ov, true)
		out.Timestamp = max(ts, layout.JoinTime(m.key))
		if err := p.ctx.Forward(out); err != nil {
			return err
		}
	}
	seq, err := p.seqAt(kb, ts)
	if err != nil {
		return err
	}
	key := layout.JoinKey(kb, ts, seq)
	closes := ts + p.cfg.CloseAfter
	if err := p.st.Put(key, append([]byte{flags}, vb...)); err != nil {
		return err
	}
	p.nextClose = min(p.nextClose, closes)
	return p.st.Put(layout.IndexKey(layout.WindowExpire, closes, key), layout.IndexValue)
}

// OnWatermark removes the own records no on-time record can join any more,
// emitting the unjoined ones of an outer side, in (time, key) order.
func (p *StreamJoinSide[K, Own, Other, V]) OnWatermark(wm int64) error {
	if own, ok := p.st.Attached(joinKeysOf{}).(*joinKeys); ok {
		own.sweep(wm, p.sweepStep, p.cfg.LateAfter, p.cfg.CloseAfter)
	}
	if wm < p.nextClose {
		return nil
	}
	// No index entry lies below nextClose: the scans start there and,
	// once every entry up to wm is removed, past wm, not over the
	// entries removed earlier in the transaction, which the engine
	// still holds (a scan from the index's start would pass them all
	// again at every watermark).
	due, err := DueIndex(p.st, layout.WindowExpire, p.nextClose, wm)
	if err != nil {
		return err
	}
	for _, ik := range due {
		if err := p.st.Delete(ik); err != nil {
			return err
		}
		// The record's key is made in ik's place (DueIndex's copy,
		// deleted): a key of its own, which a key serde that decodes
		// without copying may hand on, without an allocation per
		// record.
		key := ik[8:]
		key[0] = layout.WindowData
		// An inner side emits nothing for its closed records: their
		// values need not be read.
		var val []byte
		ok := false
		if p.cfg.Outer {
			if val, ok, err = p.st.Get(key); err != nil {
				return err
			}
		}
		if err := p.st.Delete(key); err != nil {
			return err
		}
		if !ok || len(val) > 0 && val[0]&layout.JoinJoined != 0 {
			continue
		}
		kb, ts, err := layout.ParseJoinKey(key)
		if err != nil {
			return err
		}
		k, err := p.cfg.Key.Decode(kb)
		if err != nil {
			return fmt.Errorf("store %s: key: %w", p.cfg.OwnStore, err)
		}
		v, err := p.cfg.OwnValue.Decode(val[1:])
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.cfg.OwnStore, err)
		}
		var none Other
		if err := p.ctx.Forward(exec.Record{Key: k, Value: p.cfg.Join(k, v, none, false), Timestamp: ts}); err != nil {
			return err
		}
	}
	// (At the end of time wm+1 wraps to math.MinInt64: a scan from the
	// index's start, correct, only not bounded.)
	p.nextClose, err = FirstIndex(p.st, layout.WindowExpire, wm+1)
	return err
}

// OnAbort forgets the bound of the next removal, as the window runtime's
// OnAbort does: the aborted transaction may have lowered it. (The stores'
// Abort drops their joinKeys.)
func (p *StreamJoinSide[K, Own, Other, V]) OnAbort() { p.nextClose = math.MinInt64 }
