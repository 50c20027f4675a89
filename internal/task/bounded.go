package task

import (
	"math"
	"time"

	"github.com/sluice-streams/sluice/internal/names"
)

// Bounded runs (processor.Bounded): the driver decides from offsets when a
// task's user inputs have ended; the task then raises their watermarks to
// EndOfTime, which fires every window and event-time timer, and announces
// EndOfTime downstream at its next flush. A repartition topic's writer that
// announced EndOfTime is that writer's end marker: it sends nothing after
// it, so a reader that saw it from every writer has read all there is.

// EndOfTime is the watermark of an input that has ended: the largest
// timestamp sluice accepts, so every window closes and every timer is due.
const EndOfTime = MaxTimestamp

// maxRecordMillis is the latest record timestamp kgo encodes correctly
// (it converts through UnixNano): a watermark record of the end of time
// carries this as its timestamp, its value the end of time itself.
const maxRecordMillis = math.MaxInt64 / int64(time.Millisecond)

// UserTopics lists the user topics the task reads (one partition of each,
// the task's), tables included.
func (t *Task) UserTopics() []string {
	var ts []string
	for _, src := range t.sub.Sources {
		if !src.Internal {
			ts = append(ts, src.Topics...)
		}
	}
	return ts
}

// InternalTopics lists the repartition topics the task reads, by their
// runtime names.
func (t *Task) InternalTopics() []string {
	var ts []string
	for _, src := range t.sub.Sources {
		if src.Internal {
			for _, topic := range src.Topics {
				ts = append(ts, names.Internal(t.appID, topic))
			}
		}
	}
	return ts
}

// EndUserInputs raises the watermark of every user input to EndOfTime and
// hands it to the listeners: everything windowed on those inputs fires.
// The raised tracker is time state like any other: it commits with the
// transaction and comes back with the time store (invariant 5).
func (t *Task) EndUserInputs() error {
	c := &t.clock
	for _, src := range t.sub.Sources {
		if src.Internal {
			continue
		}
		for _, topic := range src.Topics {
			c.tracker.Advance(c.base[topic], EndOfTime)
		}
	}
	return t.advance()
}

// InternalEnded reports whether every writer of every repartition topic
// the task reads announced EndOfTime (true when it reads none).
func (t *Task) InternalEnded() bool {
	c := &t.clock
	for _, topic := range t.InternalTopics() {
		base := c.base[topic]
		width := max(1, int(t.cfg.InternalPartitions[topic]))
		for w := range width {
			if c.tracker.InputWatermark(base+w) < EndOfTime {
				return false
			}
		}
	}
	return true
}
