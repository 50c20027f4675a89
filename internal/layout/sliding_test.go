package layout

import (
	"bytes"
	"testing"
)

// TestSlidingRecordRangeEveryKeyLength: over keys of every length and
// UUIDs, the range of [from, to] holds exactly the key's records with
// timestamps in it, none of another key's, and a record's expiry index
// key turns back into the record key.
func TestSlidingRecordRangeEveryKeyLength(t *testing.T) {
	keys := everyKey()
	const from, to = 100, 200
	for i, kb := range keys {
		start, end := SlidingRecordRange(SlidingRecordPrefix(kb), from, to)
		other := keys[(i+1)%len(keys)]
		for _, ts := range []int64{from - 1, from, 150, to, to + 1} {
			for _, seq := range []int64{0, 1 << 40} {
				k := SlidingRecordKey(kb, ts, seq)
				in := bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0
				if want := ts >= from && ts <= to; in != want {
					t.Fatalf("key of %d bytes: record at %d in range %v, want %v", len(kb), ts, in, want)
				}
				if SlidingRecordTime(k) != ts || SlidingRecordSeq(k) != seq {
					t.Fatalf("key of %d bytes: record %d/%d reads back %d/%d", len(kb), ts, seq, SlidingRecordTime(k), SlidingRecordSeq(k))
				}
				if ik := IndexKey(SlidingRecordExpire, ts+7, k); !bytes.Equal(SlidingRecordKeyFromIndex(ik), k) {
					t.Fatalf("key of %d bytes: index %x gives back %x", len(kb), ik, SlidingRecordKeyFromIndex(ik))
				}
				if o := SlidingRecordKey(other, ts, seq); !bytes.Equal(other, kb) && bytes.Compare(o, start) >= 0 && bytes.Compare(o, end) < 0 {
					t.Fatalf("key of %d bytes: the range holds a record of a key of %d bytes", len(kb), len(other))
				}
			}
		}
	}
}
