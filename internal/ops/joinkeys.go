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
// both sides read it. It is kept by segment, as the store is: for each
// segment, a hash of each key stored in it, with the smallest and largest
// timestamps the key was stored at there, and, for the keys stored there
// at two timestamps or more, a hash of each key and timestamp (a key
// stored at one timestamp has it in both bounds).
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
// lack one of a stored record. A store's Abort and DropCache drop it: the
// next caller makes it anew with a scan of the store (keysOf), after a
// restore, which the task runs before any record. A segment's entries
// leave it with the segment's records (sweep), once no record to come can
// join them or be stored beside them: the watermark goes back only in an
// abort. Until then an entry whose records are past a record's range
// costs that record nothing: the bounds leave them out.
//
// It is bounded, as the store's read cache is and within the same bound
// (store.Sized): an entry that would take it past the store's
// ReadCacheLimit gives up the segment it was for. A segment given up
// (full) forgets its entries and says it may hold any key at any time:
// its records are found by reading the store, as they would be without
// joinKeys, until it leaves with them. A join whose window holds more
// keys than the memory budget allows slows down; it does not grow past
// the budget.
type joinKeys struct {
	seed maphash.Seed
	seg  int64              // the store's segment width (joinSegment)
	segs map[int64]*segKeys // a segment's start → what it holds
	// shift is the unit of the times kept (packTimes): 1<<shift ms, the
	// least that puts every offset within a segment in 32 bits (0 for
	// segments up to 49 days wide).
	shift uint
	// size is how many keys and pairs the segment swept last held: a new
	// segment's maps are made that large, not grown to it entry by entry.
	size struct{ keys, pairs int }
	// bytes estimates the memory of the segments' entries; limit bounds
	// it.
	bytes, limit int
	// nothing says it keeps nothing: every segment may hold any key at
	// any time, and every record may have been stored before.
	nothing bool
}

// segKeys is what joinKeys knows of one segment.
type segKeys struct {
	keys map[uint64]uint64 // hash of a key → the times of its records (packTimes)
	// pairs holds the hash (pairHash) of each key and timestamp of the
	// keys whose times' bounds differ (in units wider than a millisecond,
	// of every key).
	pairs map[uint64]struct{}
	bytes int // the entries' part of joinKeys.bytes
	// full says the segment was given up: it may hold any key at any
	// time, and its maps are nil.
	full bool
}

// keyBytes and pairBytes estimate the memory of an entry of a segment's
// keys and pairs (the slot, its share of the map's control words and
// tables) at the peak of a map grown by doubling, measured: just after it
// grew, a map holds its entries at under half its room. Between peaks the
// maps hold from about 0.6 of this (TestJoinKeysBytesEstimate).
const (
	keyBytes  = 40
	pairBytes = 40
)

// Bytes returns the estimated memory of the entries (store.Sized).
func (jk *joinKeys) Bytes() int { return jk.bytes }

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
	jk := newJoinKeys(seg, st.ReadCacheLimit())
	// Over a Direct engine (JoinMemory) it keeps nothing: the engine
	// answers a key's records from its maps at the cost of joinKeys' own
	// lookups, which it then need not make.
	if _, direct := st.Engine().(store.Direct); direct {
		jk.nothing = true
	}
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
			jk.add(kb, ts)
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

// newJoinKeys returns an empty joinKeys of a store of segments seg wide,
// bounded by limit bytes.
func newJoinKeys(seg int64, limit int) *joinKeys {
	jk := &joinKeys{seed: maphash.MakeSeed(), seg: seg, segs: map[int64]*segKeys{}, limit: limit}
	for uint64(seg-1)>>jk.shift > math.MaxUint32 {
		jk.shift++
	}
	return jk
}

// packTimes packs the bounds of a key's times in a segment into the
// value its entry holds: the lower bound's offset from the segment's start
// in the high 32 bits, the upper's in the low, in units of 1<<shift ms
// (lo rounded down, hi up: the bounds still hold). An entry is 16 bytes,
// not the 24 of two timestamps.
func packTimes(lo, hi uint32) uint64 { return uint64(lo)<<32 | uint64(hi) }

// offset is ts's offset from segStart, its segment's start, in units.
func (jk *joinKeys) offset(segStart, ts int64) uint32 {
	return uint32(uint64(ts-segStart) >> jk.shift)
}

// times unpacks an entry's bounds in the segment at segStart.
func (jk *joinKeys) times(segStart int64, v uint64) heldTimes {
	lo := uint64(v>>32) << jk.shift
	hi := uint64(uint32(v))<<jk.shift | (1<<jk.shift - 1)
	return heldTimes{addOffset(segStart, lo), addOffset(segStart, hi)}
}

// addOffset is s+off, or math.MaxInt64 past it (an upper bound rounded up
// in the last segment of time). off is below 1<<63.
func addOffset(s int64, off uint64) int64 {
	if s > 0 && off > uint64(math.MaxInt64-s) {
		return math.MaxInt64
	}
	return s + int64(off)
}

// heldTimes bounds the timestamps of a key's stored records in a segment:
// none is below lo or above hi. The bounds are not narrowed when records
// go before their segment (an outer side's, as each is due): they may
// cover times no record is left at.
type heldTimes struct{ lo, hi int64 }

// held returns the bounds of the timestamps of the records the store may
// hold of the key whose encoding is kb in the segment at segStart, and
// ok=false if it holds none there. A segment given up may hold the key at
// any time.
func (jk *joinKeys) held(kb []byte, segStart int64) (heldTimes, bool) {
	if jk.nothing {
		return heldTimes{math.MinInt64, math.MaxInt64}, true
	}
	sk := jk.segs[segStart]
	if sk == nil {
		return heldTimes{}, false
	}
	if sk.full {
		return heldTimes{math.MinInt64, math.MaxInt64}, true
	}
	v, ok := sk.keys[maphash.Bytes(jk.seed, kb)]
	if !ok {
		return heldTimes{}, false
	}
	return jk.times(segStart, v), true
}

// add notes a record of the key whose encoding is kb at ts, and says
// whether a record of that key and timestamp may have been stored before.
func (jk *joinKeys) add(kb []byte, ts int64) (before bool) {
	if jk.nothing {
		return true
	}
	segStart := layout.JoinSegment(ts, jk.seg)
	sk := jk.segs[segStart]
	if sk == nil {
		// Made as large as the last segment swept, or as the bound
		// allows, whichever is less.
		room := max(jk.limit-jk.bytes, 0)
		sk = &segKeys{keys: make(map[uint64]uint64, min(jk.size.keys, room/keyBytes)),
			pairs: make(map[uint64]struct{}, min(jk.size.pairs, room/pairBytes))}
		jk.segs[segStart] = sk
	}
	if sk.full {
		return true
	}
	h := maphash.Bytes(jk.seed, kb)
	v, ok := sk.keys[h]
	lo, hi, at := uint32(v>>32), uint32(v), jk.offset(segStart, ts)
	// A key's first record, or one at the time of a key stored at one
	// time alone, needs no pair: the bounds say. The key's second time
	// brings its first time's pair with its own. (In units wider than a
	// millisecond, bounds that meet may hold several times: every record
	// notes its pair.)
	var pairs [2]uint64
	n := 0
	switch {
	case !ok:
		if jk.shift > 0 {
			pairs[0], n = pairHash(h, ts), 1
		}
	case lo == hi && jk.shift == 0:
		if before = at == lo; !before {
			pairs[0], pairs[1], n = pairHash(h, segStart+int64(lo)), pairHash(h, ts), 2
		}
	default:
		pairs[0], n = pairHash(h, ts), 1
		_, before = sk.pairs[pairs[0]]
		if before {
			n = 0
		}
	}
	grow := n * pairBytes
	if !ok {
		grow += keyBytes
	}
	if grow > 0 && jk.bytes+grow > jk.limit {
		jk.giveUp(sk)
		return true
	}
	sk.bytes += grow
	jk.bytes += grow
	if !ok {
		sk.keys[h] = packTimes(at, at)
	} else if at < lo || at > hi {
		sk.keys[h] = packTimes(min(lo, at), max(hi, at))
	}
	for _, p := range pairs[:n] {
		sk.pairs[p] = struct{}{}
	}
	return before
}

// pairHash is the hash of a key and a timestamp in a segment's pairs, from
// the key's hash h: distinct for the timestamps of one key (the multiplier
// is odd); the map hashes it again with its own seed. Two keys may share
// one, which only sends a record to read the store.
func pairHash(h uint64, ts int64) uint64 { return h ^ uint64(ts)*0x9e3779b97f4a7c15 }

// giveUp forgets what joinKeys knows of the segment sk: from now on it may
// hold any key at any time.
func (jk *joinKeys) giveUp(sk *segKeys) {
	jk.bytes -= sk.bytes
	*sk = segKeys{full: true}
}

// sweep drops the segments whose every record is due at wm, as the store
// drops them (StreamJoinSide.drop): a record at ts is due at
// ts+closeAfter, when no on-time record of the other side can join it
// (closeAfter is the whole span of the join window and its grace) and
// none of its own side can be stored at ts (it would be late).
func (jk *joinKeys) sweep(wm, closeAfter int64) {
	for s, sk := range jk.segs {
		if segmentDue(s, jk.seg, closeAfter, wm) {
			if !sk.full {
				jk.size.keys, jk.size.pairs = len(sk.keys), len(sk.pairs)
			}
			jk.bytes -= sk.bytes
			delete(jk.segs, s)
		}
	}
}
