package window

import (
	"fmt"
	"time"
)

// SlidingWindows are Kafka Streams' sliding windows
// (SlidingWindows.ofTimeDifferenceAndGrace, aggregated by
// KStreamSlidingWindowAggregate): windows of a fixed time difference d
// that are not aligned to the epoch but placed by the records themselves,
// so that every distinct set of a key's records that fit within d of each
// other is aggregated exactly once, without the duplicates of a hopping
// window of advance 1ms.
//
// Kafka Streams writes its windows inclusively, [s, s+d]; here, as
// everywhere in this package, a window is half-open:
// Bounds{Start: s, End: s+d+1}. For each key, the windows that exist are
// exactly:
//
//   - the left window of every record r, Left(r.ts): KS [r.ts-d, r.ts],
//     Bounds{r.ts-d, r.ts+1}, ending at the record;
//   - the right window of a record r, Right(r.ts): KS
//     [r.ts+1, r.ts+1+d], Bounds{r.ts+1, r.ts+d+2}, starting just after
//     it, but only when some record of the key has a timestamp in
//     (r.ts, r.ts+d]: only then does it hold a set of records that no left
//     window holds.
//
// A window's aggregate covers every record of the key whose timestamp is
// inside it, wherever the window came from; a window is identified by its
// bounds, so records with equal timestamps share their windows, and a
// right window that equals another record's left window is one window.
//
// Where Kafka Streams differs: it clamps windows at the epoch, folding the
// left windows of records earlier than d into the one window [0, d]
// (processEarly); sluice has no floor on event time, so those records
// have left windows with negative starts like any other. How long a
// window stays open for late records (KS's grace) is the caller's
// explicit choice, as with every window here.
type SlidingWindows struct{ diff int64 }

// Sliding returns sliding windows of time difference d: two records fall
// in one window when their timestamps are at most d apart (inclusive, as
// in Kafka Streams' SlidingWindows.ofTimeDifferenceAndGrace). d is
// truncated to whole milliseconds and must be positive.
func Sliding(d time.Duration) SlidingWindows { return SlidingWindows{diff: d.Milliseconds()} }

// TimeDifference returns d in milliseconds: a window spans d+1
// milliseconds, End - Start.
func (s SlidingWindows) TimeDifference() int64 { return s.diff }

// Validate reports a time difference that is not positive, which Kafka
// Streams rejects too.
func (s SlidingWindows) Validate() error {
	if s.diff <= 0 {
		return fmt.Errorf("%w: sliding window time difference %dms must be positive", ErrInvalid, s.diff)
	}
	return nil
}

// Left returns the left window of a record at ts: the d+1 milliseconds
// ending with it. The caller keeps ts within range: ts-d must not
// underflow, nor ts+1 overflow.
func (s SlidingWindows) Left(ts int64) Bounds { return Bounds{Start: ts - s.diff, End: ts + 1} }

// Right returns the right window of a record at ts: the d+1 milliseconds
// starting just after it. It exists only while a record of the same key
// lies in (ts, ts+d]. The caller keeps ts+d+2 within range.
func (s SlidingWindows) Right(ts int64) Bounds { return Bounds{Start: ts + 1, End: ts + s.diff + 2} }
