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

// JoinPacking packs a stream join's store's changelog records by segment
// (store.WithPacking): the buffer takes a write a record, and one Kafka
// record per write cost the join about as much as the rest of its work.
// A segment's records go by its range drop, which suits packs.
var JoinPacking = store.Packing{Group: layout.JoinPackGroup, Mark: layout.JoinPackMark}

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
	// removed, with ok=false; OtherOuter says whether the other side
	// does, and so needs to know which of its records joined.
	Outer, OtherOuter bool
	Join              func(k K, own Own, other Other, ok bool) V
}

// StreamJoinSide is the runtime of one side of a stream–stream join: it
// stores each own record, joins it with the other side's stored records in
// range, and, at the watermark, removes the records no on-time record can
// join any more, emitting the unjoined ones of an outer side.
type StreamJoinSide[K, Own, Other, V any] struct {
	cfg StreamJoinConfig[K, Own, Other, V]

	ctx     exec.Context
	st, ost *store.Staged

	// seg is the width of the stores' segments (joinSegment).
	seg int64
	// firstSeg is the start of the own store's first segment,
	// math.MaxInt64 if it has none, math.MinInt64 if not known.
	firstSeg int64
	// nextClose is the earliest time an x entry of an outer side is due.
	nextClose int64
	// handled is the watermark the last OnWatermark removed everything
	// due at, if handledOK: at it nothing else comes due, since a record
	// stored since is not late, and so neither due nor in a due segment
	// (the task calls OnWatermark after every record). An abort forgets
	// it.
	handled   int64
	handledOK bool

	// key, kb and val are the buffers a record's own key, the
	// encoding of its key and its value are built in: the store copies
	// what it is given. matches holds the other side's records a record
	// joins (collected by match, p.collect), kept from record to record.
	// kb, val and matches are nil while in use, so that a re-entrant
	// call makes its own.
	key, kb, val []byte
	matches      []joinMatch
	match        func(k, v []byte) error
	// headers are those of the record the erased path brought (Process),
	// which its joined records keep (fwd, p.forward).
	headers []exec.Header
	fwd     func(K, V, int64) error
	// start and end are the buffers the bounds of a record's range over
	// the other side are built in (used within the range alone).
	start, end []byte
}

// joinMatch is an other side's record a record joins: its timestamp and
// value (a copy: the joiner may keep it), and its key (a copy) if the
// other side is outer, which marks the record joined.
type joinMatch struct {
	ts       int64
	key, val []byte
}

// NewStreamJoinSide returns the runtime of the join side cfg.
func NewStreamJoinSide[K, Own, Other, V any](cfg StreamJoinConfig[K, Own, Other, V]) *StreamJoinSide[K, Own, Other, V] {
	return &StreamJoinSide[K, Own, Other, V]{cfg: cfg}
}

func (p *StreamJoinSide[K, Own, Other, V]) Init(ctx exec.Context) error {
	p.ctx, p.st, p.ost = ctx, ctx.Store(p.cfg.OwnStore), ctx.Store(p.cfg.OtherStore)
	p.match, p.fwd = p.collect, p.forward
	p.seg = joinSegment(p.cfg.CloseAfter)
	p.firstSeg, p.nextClose = math.MinInt64, math.MinInt64
	return nil
}

// joinSegment is the width of a join store's segments, for records removed
// closeAfter after their timestamp: as wide as that span, so that a
// record's range over the other side (at most the span wide) meets at
// most two segments, and a record stays at most twice the span.
func joinSegment(closeAfter int64) int64 { return max(closeAfter, 1) }

// keys returns the joinKeys of the own and the other store.
func (p *StreamJoinSide[K, Own, Other, V]) keys() (own, other *joinKeys, err error) {
	if own, err = keysOf(p.st, p.cfg.OwnStore, p.cfg.CloseAfter, p.cfg.Outer); err != nil {
		return nil, nil, err
	}
	other, err = keysOf(p.ost, p.cfg.OtherStore, p.cfg.CloseAfter, p.cfg.OtherOuter)
	return own, other, err
}

// keyAt is the key of a new own record of the key whose encoding is kb,
// at ts, in the segment at segStart. Its sequence number is one past the
// largest stored, so that the records of a key and timestamp keep their
// arrival order. It depends on the stored records only, not on a counter
// in memory, so that the replay of an aborted transaction, or a restart,
// numbers them as the first run did (a key's records of one timestamp are
// in one segment, and removed together).
//
// Nearly every record is the first of its key at its timestamp, so the
// store's joinKeys answers first, and then a point read of sequence number
// 0: absent, no record of the key and timestamp is stored (they are stored
// from 0 up and removed together), and the record gets 0 without the
// iterator a range needs, which cost more than the rest of storing the
// record.
func (p *StreamJoinSide[K, Own, Other, V]) keyAt(own *joinKeys, kb []byte, segStart, ts int64) ([]byte, error) {
	p.key = layout.AppendJoinKey(p.key[:0], kb, segStart, ts, 0)
	k0 := p.key
	if !own.add(kb, ts) {
		return k0, nil
	}
	if _, ok, err := p.st.Get(k0); err != nil || !ok {
		return k0, err
	}
	seq := int64(0)
	start, end := layout.JoinRange(kb, segStart, ts, ts)
	err := p.st.Range(start, end, func(k, _ []byte) error {
		seq = layout.JoinSeq(k) + 1
		return nil
	})
	return layout.JoinKey(kb, segStart, ts, seq), err
}

func (p *StreamJoinSide[K, Own, Other, V]) Close() error { return nil }

func (p *StreamJoinSide[K, Own, Other, V]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		p.ctx.CountIgnoredDelete() // a delete has no value to join
		return nil
	}
	p.headers = r.Headers
	err := p.process(r.Key.(K), r.Value.(Own), r.Timestamp, p.fwd)
	p.headers = nil
	return err
}

// forward is the erased path's output: a joined record with the headers
// of the record that joined (Process).
func (p *StreamJoinSide[K, Own, Other, V]) forward(k K, v V, ts int64) error {
	return p.ctx.Forward(exec.Record{Key: k, Value: v, Timestamp: ts, Headers: p.headers})
}

// StreamJoinTyped is the exec.Typed of a stream join's side, whose
// records have values Own, and whose output values V: a typed chain hands
// it the key and value, unboxed (the erased path boxed two values a
// record). Its output goes on through the chain's next entry: the node
// after both sides, which has two parents, takes it erased.
func StreamJoinTyped[K, Own, Other, V any](n *exec.Node) *exec.Typed {
	return &exec.Typed{
		Link: func(f *exec.Frame, p exec.Processor, next any) any {
			emit, ok := next.(func(K, V) error)
			if !ok {
				return nil
			}
			s := p.(*StreamJoinSide[K, Own, Other, V])
			// A joined record goes out at its own time, with the
			// record's headers (the frame's). Once it is out, the
			// frame is the record's again, at this node, where the
			// rest of its processing is blamed; an error is left where
			// it arose.
			out := func(k K, v V, ts int64) error {
				own := f.Timestamp
				f.Timestamp = ts
				if err := emit(k, v); err != nil {
					return err
				}
				f.Timestamp = own
				f.At(n, exec.Processing)
				return nil
			}
			return func(k K, v Own) error {
				f.At(n, exec.Processing)
				return s.process(k, v, f.Timestamp, out)
			}
		},
		Out: exec.ChainOut[K, V],
		Fan: exec.ChainFan[K, V],
	}
}

// process joins and stores a record of key k and value ownV at ts,
// passing what it joins to out.
func (p *StreamJoinSide[K, Own, Other, V]) process(k K, ownV Own, ts int64, out func(K, V, int64) error) error {
	if ts+p.cfg.LateAfter <= p.ctx.Watermark() {
		p.ctx.CountLate()
		return nil
	}
	// The key's and the value's encodings are made in buffers kept from
	// record to record, the value's after its flags byte, set once the
	// record has joined. Like matches, they are taken while in use (nil:
	// a re-entrant call makes its own) and given back at the end; an
	// error leaves them to the next record to make anew.
	kb, err := serde.AppendEncode(p.cfg.Key, p.kb[:0], k)
	if err != nil {
		return fmt.Errorf("store %s: key: %w", p.cfg.OwnStore, err)
	}
	p.kb = nil
	val, err := serde.AppendEncode(p.cfg.OwnValue, append(p.val[:0], 0), ownV)
	if err != nil {
		return fmt.Errorf("store %s: value: %w", p.cfg.OwnStore, err)
	}
	p.val = nil
	own, other, err := p.keys()
	if err != nil {
		return err
	}
	// The other side's records of the key in range, in (ts, seq) order,
	// collected into p.matches by p.match (made once: a closure here
	// would be made anew, on the heap, for every record).
	from, to := ts-p.cfg.Hi, ts-p.cfg.Lo // other.ts in [ts-hi, ts-lo]
	// Only the segments that may hold records of the key in range, and
	// in each only the times it may hold them at.
	last := layout.JoinSegment(to, p.seg)
	p.matches = p.matches[:0] // (an error may have left some)
	for seg := layout.JoinSegment(from, p.seg); ; seg += p.seg {
		if held, ok := other.held(kb, seg); ok && held.lo <= to && held.hi >= from {
			p.start, p.end = layout.AppendJoinRange(p.start[:0], p.end[:0], kb, seg, max(from, held.lo), min(to, held.hi))
			if err := p.ost.Range(p.start, p.end, p.match); err != nil {
				return err
			}
		}
		if seg >= last { // (not seg <= last in the loop's head: seg+p.seg may wrap)
			break
		}
	}
	matches := p.matches
	p.matches = nil
	for _, m := range matches {
		if len(m.val) < 1 {
			return fmt.Errorf("store %s: %w: join record of %d bytes", p.cfg.OtherStore, window.ErrCorrupt, len(m.val))
		}
		ov, err := p.cfg.OtherValue.Decode(m.val[1:])
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.cfg.OtherStore, err)
		}
		// Only an outer side reads the flag: an inner side's records
		// keep 0, and are not written again when they join.
		if p.cfg.Outer {
			val[0] = layout.JoinJoined
		}
		if p.cfg.OtherOuter && m.val[0]&layout.JoinJoined == 0 {
			m.val[0] |= layout.JoinJoined
			if err := p.ost.Put(m.key, m.val); err != nil {
				return err
			}
		}
		if err := out(k, p.cfg.Join(k, ownV, ov, true), max(ts, m.ts)); err != nil {
			return err
		}
	}
	clear(matches) // the values are the joiner's now
	p.matches = matches[:0]
	segStart := layout.JoinSegment(ts, p.seg)
	key, err := p.keyAt(own, kb, segStart, ts)
	if err != nil {
		return err
	}
	if err := p.st.Put(key, val); err != nil {
		return err
	}
	p.kb, p.val = kb[:0], val[:0]
	p.firstSeg = min(p.firstSeg, segStart)
	if !p.cfg.Outer {
		return nil
	}
	closes := ts + p.cfg.CloseAfter
	p.nextClose = min(p.nextClose, closes)
	return p.st.Put(layout.JoinIndexKey(closes, key), layout.IndexValue)
}

// collect collects a record of the other side in a record's range into
// p.matches (Process).
func (p *StreamJoinSide[K, Own, Other, V]) collect(ok, ov []byte) error {
	m := joinMatch{ts: layout.JoinTime(ok), val: append([]byte(nil), ov...)}
	if p.cfg.OtherOuter {
		m.key = append([]byte(nil), ok...)
	}
	p.matches = append(p.matches, m)
	return nil
}

// OnWatermark removes the own records no on-time record can join any more:
// an outer side's as each is due, emitting the unjoined ones in (time,
// key) order, then every side's segments whose every record is due.
func (p *StreamJoinSide[K, Own, Other, V]) OnWatermark(wm int64) error {
	if p.handledOK && wm == p.handled {
		return nil
	}
	own, _, err := p.keys()
	if err != nil {
		return err
	}
	own.sweep(wm, p.cfg.CloseAfter)
	if p.cfg.Outer {
		if err := p.close(wm); err != nil {
			return err
		}
	}
	if err := p.drop(wm); err != nil {
		return err
	}
	p.handled, p.handledOK = wm, true
	return nil
}

// close removes the records of an outer side that are due at wm, emitting
// the ones that joined nothing.
func (p *StreamJoinSide[K, Own, Other, V]) close(wm int64) error {
	if p.nextClose == math.MinInt64 {
		var err error
		if p.nextClose, err = FirstIndex(p.st, layout.WindowExpire, math.MinInt64); err != nil {
			return err
		}
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
		// A key of its own, which a key serde that decodes without
		// copying may hand on.
		key := layout.JoinKeyOfIndex(ik, p.seg)
		val, ok, err := p.st.Get(key)
		if err != nil {
			return err
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
		if len(val) < 1 {
			return fmt.Errorf("store %s: %w: join record of %d bytes", p.cfg.OwnStore, window.ErrCorrupt, len(val))
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

// drop removes the own store's segments whose every record is due at wm:
// those that start at or before wm-CloseAfter-(seg-1).
func (p *StreamJoinSide[K, Own, Other, V]) drop(wm int64) error {
	if p.firstSeg == math.MinInt64 {
		var err error
		if p.firstSeg, err = FirstIndex(p.st, layout.JoinRecord, math.MinInt64); err != nil {
			return err
		}
	}
	if p.firstSeg == math.MaxInt64 || !segmentDue(p.firstSeg, p.seg, p.cfg.CloseAfter, wm) {
		return nil
	}
	cut := wm - p.cfg.CloseAfter - (p.seg - 1) // at or after firstSeg
	// The due segments are one range of keys, from the prefix on: the
	// changelog hears of it in one record, not a tombstone a record (as
	// Kafka Streams drops a segment), and a restore or a standby replays
	// it as the range delete it is. Its start stays the prefix, so the
	// range only grows and compaction may keep the last record alone.
	if err := p.st.DropRange([]byte{layout.JoinRecord}, layout.DueEnd(layout.JoinRecord, cut)); err != nil {
		return err
	}
	var err error
	p.firstSeg, err = FirstIndex(p.st, layout.JoinRecord, cut+1)
	return err
}

// segmentDue reports whether every record of the segment at segStart, of
// width seg, is due at wm: whether wm has reached the segment's last
// timestamp, segStart+seg-1, plus closeAfter. It is computed as a
// difference from wm, which cannot overflow once wm is past segStart.
func segmentDue(segStart, seg, closeAfter, wm int64) bool {
	return wm >= segStart && uint64(wm-segStart) >= uint64(closeAfter)+uint64(seg-1)
}

// OnAbort forgets the first segment and the next removal, as the window
// runtime's OnAbort does: the aborted transaction may have lowered them.
// (The stores' Abort drops their joinKeys.)
func (p *StreamJoinSide[K, Own, Other, V]) OnAbort() {
	p.firstSeg, p.nextClose = math.MinInt64, math.MinInt64
	p.handledOK = false
}
