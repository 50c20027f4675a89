package layout

import (
	"fmt"
	"math"
)

// Timer store layout (the Processor API's timers). A processor's timers
// are a store of their own, two time indexes side by side, one per clock:
//
//	e at key  → 1   an event-time timer of key, due when the watermark reaches at
//	p at key  → 1   a processing-time timer of key, due when the wall clock reaches at
//
// at is 8 bytes (AppendTime), so each index scans in time order, then key
// bytes; the key's encoding runs to the end of the store key. A timer is
// its key: one per key, time and clock, and registering it again writes
// the same entry. The value is IndexValue.
const (
	TimerEvent      = 'e'
	TimerProcessing = 'p'
)

// TimerKey is the key of the timer at at in the index prefix (TimerEvent,
// TimerProcessing) of the key whose encoding is kb.
func TimerKey(prefix byte, at int64, kb []byte) []byte {
	return append(AppendTime(append(make([]byte, 0, 9+len(kb)), prefix), at), kb...)
}

// ParseTimerKey splits a timer key into its time and the key's encoding
// (the store key's own bytes, not a copy).
func ParseTimerKey(k []byte) (at int64, kb []byte, err error) {
	if len(k) < 9 {
		return 0, nil, fmt.Errorf("layout: timer key of %d bytes", len(k))
	}
	return ReadTime(k[1:9]), k[9:], nil
}

// DueEnd is the exclusive end of the keys of the time index prefix (keys:
// the prefix, an AppendTime time, anything) whose time is at or before now.
func DueEnd(prefix byte, now int64) []byte {
	if now == math.MaxInt64 {
		return []byte{prefix + 1}
	}
	return AppendTime([]byte{prefix}, now+1)
}
