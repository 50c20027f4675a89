package window

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is wrapped by errors about window definitions, watermark
// strategies and tracker configuration.
var ErrInvalid = errors.New("window: invalid definition")

// Bounds is one window: [Start, End) in milliseconds since the epoch.
type Bounds struct {
	Start, End int64
}

// Contains reports whether ts falls in [Start, End).
func (b Bounds) Contains(ts int64) bool { return b.Start <= ts && ts < b.End }

func (b Bounds) String() string { return fmt.Sprintf("[%d,%d)", b.Start, b.End) }

// Time windows of a fixed size that start every advance; tumbling windows
// are those whose advance equals their size.
type Time struct {
	size, advance int64
}

// Tumbling returns non-overlapping windows of the given size, aligned to the
// epoch.
func Tumbling(size time.Duration) Time {
	return Time{size: size.Milliseconds(), advance: size.Milliseconds()}
}

// Hopping returns windows of the given size starting every advance, aligned
// to the epoch; a record falls in size/advance of them.
func Hopping(size, advance time.Duration) Time {
	return Time{size: size.Milliseconds(), advance: advance.Milliseconds()}
}

// Size is a window's length in milliseconds.
func (w Time) Size() int64 { return w.size }

// Validate reports a size or advance that is not positive, or an advance
// larger than the size (which would leave gaps that drop records).
func (w Time) Validate() error {
	switch {
	case w.size <= 0:
		return fmt.Errorf("%w: size %dms must be positive", ErrInvalid, w.size)
	case w.advance <= 0:
		return fmt.Errorf("%w: advance %dms must be positive", ErrInvalid, w.advance)
	case w.advance > w.size:
		return fmt.Errorf("%w: advance %dms exceeds size %dms, so records between windows would be lost", ErrInvalid, w.advance, w.size)
	}
	return nil
}

// Assign returns the windows that contain ts, oldest first. It appends to
// dst, so a caller can reuse one slice.
func (w Time) Assign(dst []Bounds, ts int64) []Bounds {
	// The latest window start at or before ts, aligned to the epoch (floor
	// division, so negative timestamps work too).
	last := ts - mod(ts, w.advance)
	first := last - (w.size-1)/w.advance*w.advance
	for start := first; start <= last; start += w.advance {
		if b := (Bounds{start, start + w.size}); b.Contains(ts) {
			dst = append(dst, b)
		}
	}
	return dst
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
