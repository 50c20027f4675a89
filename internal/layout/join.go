package layout

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/sluice-streams/sluice/window"
)

// Stream-join buffer layout: each side of a stream–stream join keeps its
// records in a window store of its own, with window.go's d prefix and its
// x index:
//
//	d uvarint(len(key)) key ts seq → flags, value
//	x close <d-suffix>             → 1   remove (outer: emit unjoined) at the watermark
//
// ts is the record's timestamp (AppendTime) and seq (8 bytes big-endian)
// numbers a key's records of one timestamp in arrival order, so byte order
// is (key, ts, arrival) order and a key's records in a time range are one
// range scan (JoinRange). The value is one flags byte (JoinJoined) and the
// record's value in the side's value serde.
const (
	// JoinJoined is the flag bit of a join record that joined a record of
	// the other side: an outer side does not emit it unjoined.
	JoinJoined = 1
)

// JoinKey is the key of the join record seq of the key whose encoding is
// kb, at ts.
func JoinKey(kb []byte, ts, seq int64) []byte {
	b := AppendTime(WindowKeyPrefix(kb), ts)
	return binary.BigEndian.AppendUint64(b, uint64(seq))
}

// JoinRange returns the bounds [start, end) of the join records of the key
// whose encoding is kb with timestamps in [from, to]. Each bound is built
// in a buffer of its own: two appends to one prefix that has spare
// capacity write into one array, and the range comes out [x, x), empty
// (a 36-byte UUID key's prefix has 10 bytes spare).
func JoinRange(kb []byte, from, to int64) (start, end []byte) {
	pre := slices.Clip(WindowKeyPrefix(kb))
	return AppendTime(pre, from), AppendTime(pre, to+1)
}

// JoinTime is the timestamp of the join record with key k.
func JoinTime(k []byte) int64 { return ReadTime(k[len(k)-16:]) }

// JoinSeq is the sequence number of the join record with key k.
func JoinSeq(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[len(k)-8:])) }

// ParseJoinKey splits a join record's key into the key's encoding, and the
// timestamp.
func ParseJoinKey(k []byte) ([]byte, int64, error) {
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || uint64(len(k)) != 1+uint64(w)+n+16 {
		return nil, 0, fmt.Errorf("%w: join store key of %d bytes", window.ErrCorrupt, len(k))
	}
	return k[1+w : 1+w+int(n)], JoinTime(k), nil
}
