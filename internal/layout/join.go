package layout

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/window"
)

// Stream-join buffer layout: each side of a stream–stream join keeps its
// records in a store of its own, in segments of event time:
//
//	j seg uvarint(len(key)) key ts seq → flags, value
//	x close uvarint(len(key)) key ts seq → 1   an outer side's record: remove it (emit it unjoined) at the watermark
//	d uvarint(len(key)) key ts seq       → flags, value   a record of the layout before segments
//
// ts is the record's timestamp (AppendTime) and seq (8 bytes big-endian)
// numbers a key's records of one timestamp in arrival order. seg is the
// start of the segment ts falls in (JoinSegment), so that a key's records
// in a time range are one range scan per segment the range meets
// (JoinRange), in (ts, arrival) order segment after segment, and the
// records of a segment whose every record is due are one range of keys:
// an inner side removes them so, with no index entry of its own. An outer
// side, which emits a record unjoined when it is due, also has x, Kafka
// Streams' time-ordered outer store: the time the record is due, then its
// j key's part after the segment's start.
//
// The value is one flags byte (JoinJoined, kept on an outer side only) and
// the record's value in the side's value serde. A store written before
// segments holds d records; the stream join moves them to j when it first
// reads the store.
const (
	// JoinRecord is the prefix byte of a join record.
	JoinRecord = 'j'
	// JoinJoined is the flag bit of a join record that joined a record of
	// the other side: an outer side does not emit it unjoined.
	JoinJoined = 1
)

// JoinSegment is the start of the segment of width seg (at least 1) that
// ts falls in. Segments are counted from math.MinInt64, in the order of
// AppendTime's bytes, so that no start overflows.
func JoinSegment(ts, seg int64) int64 {
	u := uint64(ts) ^ 1<<63
	return int64((u - u%uint64(seg)) ^ 1<<63)
}

// JoinKey is the key of the join record seq of the key whose encoding is
// kb, at ts, in the segment that starts at segStart (JoinSegment).
func JoinKey(kb []byte, segStart, ts, seq int64) []byte {
	return AppendJoinKey(make([]byte, 0, joinKeyLen(kb)), kb, segStart, ts, seq)
}

// AppendJoinKey appends JoinKey(kb, segStart, ts, seq) to b: a caller that
// writes a key per record builds it in a buffer it keeps.
func AppendJoinKey(b, kb []byte, segStart, ts, seq int64) []byte {
	b = AppendTime(appendJoinPrefix(b, kb, segStart), ts)
	return binary.BigEndian.AppendUint64(b, uint64(seq))
}

// joinKeyLen is the most bytes a join key of kb takes.
func joinKeyLen(kb []byte) int { return 1 + 8 + binary.MaxVarintLen64 + len(kb) + 16 }

func appendJoinPrefix(b, kb []byte, segStart int64) []byte {
	b = AppendTime(append(b, JoinRecord), segStart)
	return append(binary.AppendUvarint(b, uint64(len(kb))), kb...)
}

// JoinRange returns the bounds [start, end) of the join records of the key
// whose encoding is kb with timestamps in [from, to] in the segment that
// starts at segStart. Each bound is built in a buffer of its own: two
// appends to one prefix that has spare capacity write into one array,
// and the range comes out [x, x), empty.
func JoinRange(kb []byte, segStart, from, to int64) (start, end []byte) {
	return AppendJoinRange(nil, nil, kb, segStart, from, to)
}

// AppendJoinRange is JoinRange, its bounds appended to start and end: a
// caller that ranges for every record builds them in buffers it keeps.
func AppendJoinRange(start, end, kb []byte, segStart, from, to int64) ([]byte, []byte) {
	start = AppendTime(appendJoinPrefix(start, kb, segStart), from)
	end = AppendTime(appendJoinPrefix(end, kb, segStart), to+1)
	return start, end
}

// JoinTime is the timestamp of the join record with key k.
func JoinTime(k []byte) int64 { return ReadTime(k[len(k)-16:]) }

// JoinSeq is the sequence number of the join record with key k.
func JoinSeq(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[len(k)-8:])) }

// ParseJoinKey splits a join record's key, j or d, into the key's
// encoding and the timestamp.
func ParseJoinKey(k []byte) ([]byte, int64, error) {
	skip := 1
	if len(k) > 0 && k[0] == JoinRecord {
		skip = 9
	}
	if len(k) < skip {
		return nil, 0, fmt.Errorf("%w: join store key of %d bytes", window.ErrCorrupt, len(k))
	}
	n, w := binary.Uvarint(k[skip:])
	if w <= 0 || uint64(len(k)) != uint64(skip+w)+n+16 {
		return nil, 0, fmt.Errorf("%w: join store key of %d bytes", window.ErrCorrupt, len(k))
	}
	return k[skip+w : skip+w+int(n)], JoinTime(k), nil
}

// JoinIndexKey is the key of the x entry that makes the join record with
// key k due at at; k may also be an x entry, of the same record.
func JoinIndexKey(at int64, k []byte) []byte {
	b := AppendTime(append(make([]byte, 0, len(k)), WindowExpire), at)
	return append(b, k[9:]...)
}

// JoinKeyOfIndex is the key of the join record that the x entry ik makes
// due, in segments of width seg.
func JoinKeyOfIndex(ik []byte, seg int64) []byte {
	return joinKeyOfSuffix(ik[9:], seg)
}

// RekeyJoin returns the key that the join record with key k, j or d, has
// in segments of width seg, and whether it is another key than k: a d
// record, or a j record of segments of another width (the join's window
// changed).
func RekeyJoin(k []byte, seg int64) ([]byte, bool) {
	if k[0] == JoinRecord && JoinSegment(JoinTime(k), seg) == ReadTime(k[1:9]) {
		return k, false
	}
	skip := 1
	if k[0] == JoinRecord {
		skip = 9
	}
	return joinKeyOfSuffix(k[skip:], seg), true
}

// joinKeyOfSuffix is the join key, in segments of width seg, whose part
// after the segment's start is suffix: uvarint(len(key)) key ts seq.
func joinKeyOfSuffix(suffix []byte, seg int64) []byte {
	b := AppendTime(append(make([]byte, 0, 9+len(suffix)), JoinRecord), JoinSegment(JoinTime(suffix), seg))
	return append(b, suffix...)
}

// SplitJoinKey splits k, a j key, into its segment's start, its key part
// (uvarint(len(key)) key), its timestamp and its sequence number, if k is
// exactly what AppendJoinKeyPart makes of them (the varint in its shortest
// form): an engine that keeps the parts rather than the key (a join's
// buffer in memory) makes k again from them. The key part aliases k.
func SplitJoinKey(k []byte) (segStart int64, part []byte, ts int64, seq uint64, ok bool) {
	if len(k) < 9+1+16 || k[0] != JoinRecord {
		return 0, nil, 0, 0, false
	}
	n, w := binary.Uvarint(k[9:])
	if w <= 0 || w != uvarintLen(n) || uint64(len(k)) != uint64(9+w)+n+16 {
		return 0, nil, 0, 0, false
	}
	return ReadTime(k[1:9]), k[9 : 9+w+int(n)], JoinTime(k), binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// AppendJoinKeyPart appends to b the j key of the segment at segStart, the
// key part (uvarint(len(key)) key), ts and seq: SplitJoinKey's inverse.
// Keys so made sort as (segStart, part's bytes, ts, seq), each signed but
// seq.
func AppendJoinKeyPart(b []byte, segStart int64, part string, ts int64, seq uint64) []byte {
	b = append(AppendTime(append(b, JoinRecord), segStart), part...)
	return binary.BigEndian.AppendUint64(AppendTime(b, ts), seq)
}

// JoinPackGroup returns the length of a join record key's segment prefix
// (j seg), by which the changelog packs the records' writes
// (store.Packing), or 0 for a key of no join record.
func JoinPackGroup(k []byte) int {
	if len(k) > 9 && k[0] == JoinRecord {
		return 9
	}
	return 0
}

// JoinPackMark follows a segment's prefix in the key of its changelog
// packs: 0 as a uvarint of two bytes, not in its shortest form, so no join
// key holds it there (SplitJoinKey).
var JoinPackMark = []byte{0x80, 0x00}

// uvarintLen is the length of n's shortest uvarint.
func uvarintLen(n uint64) int {
	w := 1
	for ; n >= 0x80; n >>= 7 {
		w++
	}
	return w
}
