package layout

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/window"
)

// Time state layout: one entry, in the sub-topology's time store (its
// first windowed store, or a store of its own, see exec.SubTopology), of
// the task's committed event time, so that a restarted or replaying task
// decides as the first run did (invariant 5):
//
//	T → version(1) streamTime(8, big-endian, two's complement) tracker
//
// where tracker is window.Tracker's binary form (AppendBinary). Every
// other key of a time store begins with a lower-case letter (window.go),
// so the upper-case T cannot collide.
const TimeStateVersion = 1

// TimeStateKey is the key of the time state.
var TimeStateKey = []byte("T")

// AppendTimeState appends the time state of a task whose stream time is
// streamTime and whose watermarks tr tracks.
func AppendTimeState(dst []byte, streamTime int64, tr *window.Tracker) []byte {
	dst = append(dst, TimeStateVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(streamTime))
	dst, _ = tr.AppendBinary(dst) // it never fails
	return dst
}

// ParseTimeState splits a time state into the stream time and the
// tracker's binary form (window.Tracker.UnmarshalBinary reads it).
func ParseTimeState(b []byte) (streamTime int64, tracker []byte, err error) {
	if len(b) < 9 || b[0] != TimeStateVersion {
		return 0, nil, fmt.Errorf("%w: time state of %d bytes", window.ErrCorrupt, len(b))
	}
	return int64(binary.BigEndian.Uint64(b[1:])), b[9:], nil
}
