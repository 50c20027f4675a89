package layout

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// everyKey returns the keys the layout tests run with: raw bytes of every
// length (testkeys.Bytes), then UTF-8 keys of every length and UUIDs
// (testkeys.All).
func everyKey() [][]byte {
	keys := testkeys.Bytes()
	for _, k := range testkeys.All() {
		keys = append(keys, []byte(k))
	}
	return keys
}

// joinRangeErrors checks a builder of join ranges over keys of every
// length: the range of [from, to] must hold exactly the join records of
// the key with timestamps in it. It returns one line per key that fails.
func joinRangeErrors(build func(kb []byte, seg, from, to int64) (start, end []byte)) []string {
	keys := everyKey()
	var bad []string
	const seg, from, to = 0, 100, 200
	for _, kb := range keys {
		start, end := build(kb, seg, from, to)
		for _, ts := range []int64{from - 1, from, 150, to, to + 1} {
			k := JoinKey(kb, seg, ts, 7)
			in := bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0
			if want := ts >= from && ts <= to; in != want {
				bad = append(bad, fmt.Sprintf("key of %d bytes: record at %d in range %v, want %v", len(kb), ts, in, want))
				break
			}
		}
	}
	return bad
}

func TestJoinRangeEveryKeyLength(t *testing.T) {
	if bad := joinRangeErrors(JoinRange); len(bad) > 0 {
		t.Fatalf("%d keys: %v", len(bad), bad)
	}
}

// TestJoinRangeCheckCatchesSharedPrefix is the negative control: the
// bounds built as before the fix, both appended to one prefix, fail the
// check for the key lengths whose prefix has spare capacity, the 36-byte
// UUID among them.
func TestJoinRangeCheckCatchesSharedPrefix(t *testing.T) {
	shared := func(kb []byte, seg, from, to int64) ([]byte, []byte) {
		pre := appendJoinPrefix(make([]byte, 0, joinKeyLen(kb)), kb, seg)
		// lint:ignore appendalias the defect this control reintroduces
		return AppendTime(pre, from), AppendTime(pre, to+1)
	}
	bad := joinRangeErrors(shared)
	if len(bad) == 0 {
		t.Fatal("the check passes bounds that share a prefix's array")
	}
	uuid := false
	for _, b := range bad {
		uuid = uuid || bytes.HasPrefix([]byte(b), []byte("key of 36 bytes"))
	}
	if !uuid {
		t.Fatalf("the check misses 36-byte keys; it caught %v", bad)
	}
	t.Logf("caught %d keys, e.g. %s", len(bad), bad[0])
}

// TestAppendJoinKeyReusesBuffer builds every key's join record in one
// buffer reused from the key before, as the stream join does, longest
// keys first so that each build overwrites a longer one: each must equal
// the key built in a buffer of its own, parse back to its key and time,
// and leave what the buffer held before it alone.
func TestAppendJoinKeyReusesBuffer(t *testing.T) {
	keys := everyKey()
	var buf []byte
	for i := len(keys) - 1; i >= 0; i-- {
		kb := keys[i]
		seg, ts := int64(-120_000), int64(-60_001-i)
		buf = AppendJoinKey(buf[:0], kb, seg, ts, int64(i))
		if want := JoinKey(kb, seg, ts, int64(i)); !bytes.Equal(buf, want) {
			t.Fatalf("key of %d bytes: built in a reused buffer %x, want %x", len(kb), buf, want)
		}
		gotKey, gotTS, err := ParseJoinKey(buf)
		if err != nil || !bytes.Equal(gotKey, kb) || gotTS != ts || JoinSeq(buf) != int64(i) {
			t.Fatalf("key of %d bytes: parsed %x at %d seq %d (%v)", len(kb), gotKey, gotTS, JoinSeq(buf), err)
		}
		head := []byte("head")
		if got := AppendJoinKey(head, kb, seg, ts, 0); !bytes.HasPrefix(got, []byte("head")) || !bytes.Equal(got[4:], JoinKey(kb, seg, ts, 0)) {
			t.Fatalf("key of %d bytes: appended after %q as %x", len(kb), head, got)
		}
	}
}

// TestJoinSegment checks segment starts at the ends of time and at widths
// that do not divide 2^64: the segment holds ts (ts-start < seg, in
// uint64 arithmetic, which does not overflow), starts are seg apart, and
// byte order of the starts is time order (AppendTime).
func TestJoinSegment(t *testing.T) {
	times := []int64{math.MinInt64, math.MinInt64 + 1, -60_001, -1, 0, 1, 59_999, 60_000, math.MaxInt64 - 1, math.MaxInt64}
	widths := []int64{1, 2, 3, 7, 60_000, 1 << 40, math.MaxInt64}
	for _, seg := range widths {
		for _, ts := range times {
			start := JoinSegment(ts, seg)
			if start > ts || uint64(ts-start) >= uint64(seg) {
				t.Fatalf("width %d: %d is in the segment at %d", seg, ts, start)
			}
			if again := JoinSegment(start, seg); again != start {
				t.Fatalf("width %d: the segment at %d starts at %d", seg, start, again)
			}
			// The next segment, if time goes on that far, starts seg later.
			if uint64(math.MaxInt64-start) >= uint64(seg) {
				if next := JoinSegment(start+seg, seg); next != start+seg {
					t.Fatalf("width %d: the segment after %d starts at %d", seg, start, next)
				}
			}
			if ts > math.MinInt64 && JoinSegment(ts-1, seg) > start {
				t.Fatalf("width %d: %d is in a later segment than %d", seg, ts-1, ts)
			}
		}
	}
}

// TestAppendJoinRangeReusesBuffers builds every key's range in two
// buffers kept from the key before, as the stream join does: each range
// holds exactly the key's records in it.
func TestAppendJoinRangeReusesBuffers(t *testing.T) {
	var start, end []byte
	reused := func(kb []byte, seg, from, to int64) ([]byte, []byte) {
		start, end = AppendJoinRange(start[:0], end[:0], kb, seg, from, to)
		return start, end
	}
	if bad := joinRangeErrors(reused); len(bad) > 0 {
		t.Fatalf("%d keys: %v", len(bad), bad)
	}
}

// TestSplitJoinKeyRoundTrips splits the join keys of every key, at times
// and sequence numbers at the edges, and makes each again from its parts;
// keys not in the shortest form, and no j keys, do not split.
func TestSplitJoinKeyRoundTrips(t *testing.T) {
	for _, kb := range everyKey() {
		for _, seg := range []int64{math.MinInt64, -120_000, 0, 120_000} {
			for _, ts := range []int64{seg, seg + 119_999} {
				for _, seq := range []int64{0, 1, math.MaxInt64, -1} {
					k := JoinKey(kb, seg, ts, seq)
					gotSeg, part, gotTs, gotSeq, ok := SplitJoinKey(k)
					if !ok || gotSeg != seg || gotTs != ts || gotSeq != uint64(seq) {
						t.Fatalf("key of %d bytes: split %v: %d %d %d, want %d %d %d", len(kb), ok, gotSeg, gotTs, gotSeq, seg, ts, seq)
					}
					if again := AppendJoinKeyPart(nil, gotSeg, string(part), gotTs, gotSeq); !bytes.Equal(again, k) {
						t.Fatalf("key of %d bytes: made again as %x, want %x", len(kb), again, k)
					}
				}
			}
		}
	}
	long := append(AppendTime([]byte{JoinRecord}, 0), 0x81, 0x00, 'k') // 1 in two bytes
	long = append(AppendTime(long, 0), make([]byte, 8)...)
	for _, k := range [][]byte{nil, {JoinRecord}, long, JoinKey([]byte("k"), 0, 0, 0)[1:], append(JoinKey([]byte("k"), 0, 0, 0), 0)} {
		if _, _, _, _, ok := SplitJoinKey(k); ok {
			t.Fatalf("%x split", k)
		}
	}
}
