package ops

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"math"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// joinKeys is what a stream join keeps in memory about the records one
// side's store holds, attached to the store (store.Staged.Attach) so that
// both sides read it: a hash of each stored record's key and segment, and
// of its key and timestamp: with the key and segment, the smallest and
// largest timestamps the key was stored at in the segment; with the pair,
// the timestamp.
//
//   - The other side asks it for the times of the records of a key the
//     store may hold in a segment (held) before it ranges over them: most
//     records of a join find none of their key in range on the other side,
//     and a range is the most costly step of a record (a seek through
//     every level of the store on disk). A record's range meets two
//     segments more often than not, and the key's records are in one of
//     them more often than in both.
//   - The side that owns the store asks it whether it may hold a record of
//     a key and timestamp before it reads the store for the record's
//     sequence number (StreamJoinSide.keyAt): nearly every record is the
//     first of its key and timestamp.
//
// It may hold keys and pairs that no stored record has (a unit rolled
// back; a hash shared by two keys: the caller then reads the store), never
// lack one of a stored record that a record to come can join or share a
// timestamp with (a record past the join's span may stay stored until its
// segment goes, out of every on-time record's range). A store's Abort and
// DropCache drop it: the next caller makes it anew with a scan of the
// store (keysOf), after a restore, which the task runs before any record.
// An entry leaves it when no record to come can ask for it (sweep): the
// watermark goes back only in an abort.
type joinKeys struct {
	seed  maphash.Seed
	seg   int64                // the store's segment width (joinSegment)
	keys  map[uint64]heldTimes // hash of a key and segment → the times of its records there
	pairs map[uint64]int64     // hash of a key and timestamp → the timestamp
	swept int64                // the watermark of the last sweep
}

// joinKeysOf is the key of a store's joinKeys (store.Staged.Attach).
type joinKeysOf struct{}

// keysOf returns the joinKeys of st, the join store named name, making it
// with a scan of st if st has none.
//
// The scan also puts the store's records in the layout the join reads
// (layout.RekeyJoin): the records of a store written before segments, or
// in segments of another width (the join's window changed), move to their
// keys in the segments of a join whose records are removed closeAfter
// after their timestamp (joinSegment). An outer side's x entries move to
// ts+closeAfter if they were due at another time (the window changed: a
// record must not go with its segment before its entry emits it); an
// inner side's, which only an outer side reads (written before segments,
// or while the side was outer), go. The moves are writes of the
// transaction, as a record's are; an abort drops them with the joinKeys,
// and the next scan makes them again.
func keysOf(st *store.Staged, name string, closeAfter int64, outer bool) (*joinKeys, error) {
	if jk, ok := st.Attached(joinKeysOf{}).(*joinKeys); ok {
		return jk, nil
	}
	seg := joinSegment(closeAfter)
	jk := &joinKeys{seed: maphash.MakeSeed(), seg: seg, keys: map[uint64]heldTimes{}, pairs: map[uint64]int64{}, swept: math.MinInt64}
	type move struct{ from, to, val []byte }
	var moves []move
	scan := func(prefix byte) error {
		return st.Range([]byte{prefix}, []byte{prefix + 1}, func(k, v []byte) error {
			kb, ts, err := layout.ParseJoinKey(k)
			if err != nil {
				return fmt.Errorf("store %s: %w", name, err)
			}
			nk, moved := layout.RekeyJoin(k, seg)
			if moved {
				moves = append(moves, move{bytes.Clone(k), nk, bytes.Clone(v)})
			}
			jk.add(kb, nk[:len(nk)-8], ts)
			return nil
		})
	}
	if err := scan(layout.WindowData); err != nil {
		return nil, err
	}
	if err := scan(layout.JoinRecord); err != nil {
		return nil, err
	}
	for _, m := range moves {
		if err := st.Delete(m.from); err != nil {
			return nil, err
		}
		if err := st.Put(m.to, m.val); err != nil {
			return nil, err
		}
	}
	index, err := DueIndex(st, layout.WindowExpire, math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	for _, ik := range index {
		if len(ik) < 9+1+16 {
			return nil, fmt.Errorf("store %s: %w: x entry of %d bytes", name, window.ErrCorrupt, len(ik))
		}
		due := layout.JoinTime(ik) + closeAfter
		if outer && layout.ReadTime(ik[1:9]) == due {
			continue
		}
		if err := st.Delete(ik); err != nil {
			return nil, err
		}
		if outer {
			if err := st.Put(layout.JoinIndexKey(due, ik), layout.IndexValue); err != nil {
				return nil, err
			}
		}
	}
	st.Attach(joinKeysOf{}, jk)
	return jk, nil
}

// heldTimes bounds the timestamps of a key's stored records in a segment:
// none is below lo or above hi. lo is the smallest added since the entry
// was made and is not raised when records go: those below the records a
// record to come joins are out of its range anyway.
type heldTimes struct{ lo, hi int64 }

// held returns the bounds of the timestamps of the records the store may
// hold of the key whose encoding is kb in the segment at segStart, and
// ok=false if it holds none there.
func (jk *joinKeys) held(kb []byte, segStart int64) (heldTimes, bool) {
	t, ok := jk.keys[segHash(maphash.Bytes(jk.seed, kb), segStart)]
	return t, ok
}

// segHash is the hash of a key and segment, from the key's hash h. Two
// pairs that share it share an entry, whose bounds then cover both: a
// read more, never a record missed.
func segHash(h uint64, segStart int64) uint64 {
	x := h ^ uint64(segStart)*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	return x ^ x>>29
}

// add notes a record of the key whose encoding is kb at ts, where at is
// its join key's prefix (layout.JoinKey without the sequence number), and
// says whether a record of that key and timestamp may have been stored
// before.
func (jk *joinKeys) add(kb, at []byte, ts int64) (before bool) {
	h := segHash(maphash.Bytes(jk.seed, kb), layout.JoinSegment(ts, jk.seg))
	if t, ok := jk.keys[h]; !ok {
		jk.keys[h] = heldTimes{ts, ts}
	} else if ts < t.lo || ts > t.hi {
		jk.keys[h] = heldTimes{min(t.lo, ts), max(t.hi, ts)}
	}
	h = maphash.Bytes(jk.seed, at)
	was, before := jk.pairs[h]
	if !before || was < ts {
		jk.pairs[h] = ts
	}
	return before
}

// sweep drops, once the watermark wm has moved step since the last sweep,
// the pairs no record can be stored at any more (late: ts+lateAfter <= wm)
// and the keys no record of the other side can join any more
// (ts+closeAfter <= wm, closeAfter being the whole span of the join window
// and its grace, so that ts is below every timestamp an on-time record of
// the other side joins).
func (jk *joinKeys) sweep(wm, step, lateAfter, closeAfter int64) {
	if wm < jk.swept+step {
		return
	}
	jk.swept = wm
	for h, ts := range jk.pairs {
		if ts+lateAfter <= wm {
			delete(jk.pairs, h)
		}
	}
	for h, t := range jk.keys {
		if t.hi+closeAfter <= wm {
			delete(jk.keys, h)
		}
	}
}
