package layout

import (
	"encoding/binary"
	"slices"
)

// Sliding-window store layout, beside window.go's: windows use its d, f
// and x entries with its value encoding, so a sliding store reads like any
// window store; the records the windows are folded from, and their expiry
// index, have letters of their own:
//
//	d uvarint(len(key)) key start  → the window's state (its count, fire timer, aggregate)
//	f at <d-suffix>                → 1   emit the window (default emit) at End-1
//	x at <d-suffix>                → 1   remove the window (EmitFinal: emit it first) at End-1+lateness
//	r uvarint(len(key)) key ts seq → the record's value, in the stream's value serde
//	y at <r-suffix>                → 1   delete the record at ts+d+lateness
//
// seq (8 bytes big-endian) numbers a key's records of one timestamp in
// arrival order, so byte order is (ts, arrival) order. A y entry is an
// index key (IndexKey) of its record key, and turns back into it
// (SlidingRecordKeyFromIndex).
const (
	SlidingRecord       = 'r'
	SlidingRecordExpire = 'y'
)

// SlidingRecordPrefix is the prefix of the kept records of the key whose
// encoding is kb, with room for a time and a sequence number.
func SlidingRecordPrefix(kb []byte) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(kb)+16)
	b = binary.AppendUvarint(append(b, SlidingRecord), uint64(len(kb)))
	return append(b, kb...)
}

// SlidingRecordKey is the key of the kept record seq of the key whose
// encoding is kb, at ts.
func SlidingRecordKey(kb []byte, ts, seq int64) []byte {
	return binary.BigEndian.AppendUint64(AppendTime(SlidingRecordPrefix(kb), ts), uint64(seq))
}

// SlidingRecordRange returns the bounds [start, end) of the kept records
// of the key whose record prefix is pre (SlidingRecordPrefix) with
// timestamps in [from, to], each bound in a buffer of its own.
func SlidingRecordRange(pre []byte, from, to int64) (start, end []byte) {
	return AppendTime(slices.Clip(pre), from), AppendTime(slices.Clip(pre), to+1)
}

// SlidingRecordTime is the timestamp of a kept record's key.
func SlidingRecordTime(k []byte) int64 { return ReadTime(k[len(k)-16:]) }

// SlidingRecordSeq is the sequence number of a kept record's key.
func SlidingRecordSeq(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[len(k)-8:])) }

// SlidingRecordKeyFromIndex turns a y index key back into its record key.
func SlidingRecordKeyFromIndex(ik []byte) []byte {
	return append([]byte{SlidingRecord}, ik[9:]...)
}
