package layout

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/window"
)

// Element entries: the records a window keeps instead of an aggregate
// (full-window functions, sliding count windows), in the window's store
// beside its data key:
//
//	e <d-suffix> seq → timestamp int64, value
//
// <d-suffix> is the window's data key without its prefix byte, so the
// elements of a window are one range (ElementPrefix). seq, 8 bytes
// big-endian, numbers the window's elements in arrival order, from 0 to
// the window's WindowValue.Seq-1 (some maybe evicted); timestamp is 8 bytes
// big-endian (two's complement) and value is the element in the stream's
// value serde.
const WindowElement = 'e'

// ElementPrefix is the prefix of the elements of the window whose data key
// is data.
func ElementPrefix(data []byte) []byte {
	return append([]byte{WindowElement}, data[1:]...)
}

// ElementKey is the key of element seq of the window whose data key is
// data.
func ElementKey(data []byte, seq int64) []byte {
	return binary.BigEndian.AppendUint64(ElementPrefix(data), uint64(seq))
}

// ElementSeq reads the seq of an element key; ok is false when the key is
// too short to hold one.
func ElementSeq(k []byte) (seq int64, ok bool) {
	if len(k) < 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k[len(k)-8:])), true
}

// AppendElement appends the value of an element entry, the record's
// timestamp and its encoded value vb, to dst.
func AppendElement(dst []byte, ts int64, vb []byte) []byte {
	return append(binary.BigEndian.AppendUint64(dst, uint64(ts)), vb...)
}

// ParseElement splits an element entry's value into the record's timestamp
// and its encoded value (sharing val's bytes).
func ParseElement(val []byte) (ts int64, vb []byte, err error) {
	if len(val) < 8 {
		return 0, nil, fmt.Errorf("%w: element of %d bytes", window.ErrCorrupt, len(val))
	}
	return int64(binary.BigEndian.Uint64(val)), val[8:], nil
}
