package window

import (
	"fmt"
	"math"
	"time"
)

// Sessions are session windows: per key, a session holds records whose
// timestamps are no more than an inactivity gap apart, and is closed by a
// longer silence. The semantics are Kafka Streams' SessionWindows
// (KStreamSessionWindowAggregate): a session is the closed range
// [first, last] of its record timestamps; a record at ts is merged with
// every existing session for which
//
//	session.first - gap <= ts <= session.last + gap   (both inclusive)
//
// (Kafka Streams' findSessions(key, ts-gap, ts+gap)), and the merged
// session spans the record and all of them. One record can therefore bridge
// two sessions into one. A record matching no session starts the session
// [ts, ts].
//
// In this package a session is a Bounds like every other window, half-open:
// Bounds{Start: first, End: last + 1}, so Contains holds for exactly the
// timestamps of [first, last] and End - Start is the session's length plus
// one. A timestamp must therefore be below math.MaxInt64 (End saturates
// there).
type Sessions struct{ gap int64 }

// InactivityGap returns session windows with the given gap (Kafka Streams'
// SessionWindows.ofInactivityGapWithNoGrace: how late records may be is
// the caller's separate and explicit choice). The gap is truncated to whole
// milliseconds and must be positive.
func InactivityGap(gap time.Duration) Sessions { return Sessions{gap: gap.Milliseconds()} }

// Gap returns the inactivity gap in milliseconds.
func (s Sessions) Gap() int64 { return s.gap }

// Validate reports a gap that is not positive, which Kafka Streams rejects
// too.
func (s Sessions) Validate() error {
	if s.gap <= 0 {
		return fmt.Errorf("%w: inactivity gap %dms must be positive", ErrInvalid, s.gap)
	}
	return nil
}

// Merge places a record at ts among the key's existing sessions. It returns
// the session the record belongs to now and the existing sessions that
// session replaces, which the caller deletes from its store (their
// aggregates merged into the new one); absorbed is empty when the record
// starts a new session.
//
// existing may be all of the key's sessions or only those a store query
// for sessions overlapping [ts-gap, ts+gap] returned; any others are left
// alone. Merge does not allocate: it moves the absorbed sessions to the
// front of existing, in their original order, and returns that prefix
// (the order of the rest is unspecified).
//
// Merging is not transitive beyond the record: a session is absorbed only
// if the record itself is within the gap of it. For sessions made by Merge
// that is the same thing, since they are always more than a gap apart.
func (s Sessions) Merge(existing []Bounds, ts int64) (merged Bounds, absorbed []Bounds) {
	merged = Bounds{Start: ts, End: inc(ts)}
	k := 0
	for i, b := range existing {
		if !s.reaches(b, ts) {
			continue
		}
		merged.Start = min(merged.Start, b.Start)
		merged.End = max(merged.End, b.End)
		existing[k], existing[i] = existing[i], existing[k]
		k++
	}
	return merged, existing[:k]
}

// reaches reports whether b.Start - gap <= ts <= last + gap for the
// session's last timestamp last = b.End - 1, without overflow: the
// distance between two int64 always fits in a uint64.
func (s Sessions) reaches(b Bounds, ts int64) bool {
	switch last := b.End - 1; {
	case ts < b.Start:
		return uint64(b.Start)-uint64(ts) <= uint64(s.gap)
	case ts > last:
		return uint64(ts)-uint64(last) <= uint64(s.gap)
	}
	return true
}

// Closed reports whether session b is complete at the watermark wm: a
// record could still extend it only with a timestamp <= last + gap, and
// after wm no record at or below wm is expected. So it is closed once
// wm >= last + gap, where last = b.End - 1.
func (s Sessions) Closed(b Bounds, wm int64) bool {
	last := b.End - 1
	if last > math.MaxInt64-s.gap {
		return false // last + gap is beyond every watermark
	}
	return wm >= last+s.gap
}

// inc returns ts + 1, saturating at math.MaxInt64.
func inc(ts int64) int64 {
	if ts == math.MaxInt64 {
		return ts
	}
	return ts + 1
}
