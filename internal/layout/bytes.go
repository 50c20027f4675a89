package layout

import "encoding/binary"

// PrefixEnd is the smallest key greater than every key that begins with p,
// the exclusive upper bound of a range scan over the prefix p; nil, which
// the stores read as no upper bound, if there is none (p is empty or all
// 0xff). The result has its own backing array: p is not modified.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i]++; end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// AppendTime appends ts as 8 bytes big-endian with the sign bit flipped, so
// that byte order is numeric order.
func AppendTime(b []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(ts)^(1<<63))
}

// ReadTime reads a time written by AppendTime from the first 8 bytes of b.
func ReadTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)) }
