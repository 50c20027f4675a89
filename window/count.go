package window

import "fmt"

// Count windows group the records of one key by their number rather than
// their time, with Flink's semantics (countWindow: GlobalWindows with a
// CountTrigger and, when sliding, a CountEvictor). They are small pure
// functions of a per-key counter, seen: the number of the key's records
// processed so far, the current one included. Records are numbered from 0
// in the order the task processes them, so the seen-th record has index
// seen-1; as that order is the committed input order, count windows are
// deterministic under replay but, unlike time windows, depend on arrival
// order rather than on timestamps.
//
// Record ranges are half-open, [from, to), like every window here.
type Count struct {
	size, slide int64
}

// TumblingCount returns windows of n records: every n-th record of a key
// fires the window of the n records before it, and that window is purged.
func TumblingCount(n int64) Count { return Count{size: n, slide: n} }

// SlidingCount returns a window of a key's last size records that fires
// every slide records. As in Flink, the first windows, before size records
// have arrived, hold fewer than size: with size 3 and slide 2 the firings
// cover records [0,2), [1,4), [3,6), ...
func SlidingCount(size, slide int64) Count { return Count{size: size, slide: slide} }

// Validate reports a size or slide that is not positive, or a slide larger
// than the size (which would leave records in no window, as with Hopping).
func (w Count) Validate() error {
	switch {
	case w.size <= 0:
		return fmt.Errorf("%w: count window size %d must be positive", ErrInvalid, w.size)
	case w.slide <= 0:
		return fmt.Errorf("%w: count window slide %d must be positive", ErrInvalid, w.slide)
	case w.slide > w.size:
		return fmt.Errorf("%w: count window slide %d exceeds size %d, so records between windows would be lost", ErrInvalid, w.slide, w.size)
	}
	return nil
}

// Size returns the number of records a full window holds.
func (w Count) Size() int64 { return w.size }

// Slide returns the number of records between firings.
func (w Count) Slide() int64 { return w.slide }

// Fires reports whether the seen-th record of a key fires a window.
func (w Count) Fires(seen int64) bool { return seen > 0 && seen%w.slide == 0 }

// Window returns the indices [from, to) of the records in the window that
// the seen-th record fires: the last size records, or all of them while
// fewer have arrived. ok is false, and the range empty, when nothing
// fires.
func (w Count) Window(seen int64) (from, to int64, ok bool) {
	if !w.Fires(seen) {
		return seen, seen, false
	}
	return max(0, seen-w.size), seen, true
}

// Retain returns the index of the oldest record that a window firing after
// the seen-th record can still hold: a key's buffer may evict every record
// below it once the seen-th record is processed (and its window, if any,
// fired). For tumbling windows it equals seen right after a firing: the
// purge.
func (w Count) Retain(seen int64) int64 {
	// The next firing is at the next multiple of slide above seen, and
	// covers the size records before it. Written so it cannot overflow:
	// next - size = seen - seen%slide - (size - slide).
	return max(0, seen-seen%w.slide-(w.size-w.slide))
}
