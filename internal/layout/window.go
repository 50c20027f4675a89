package layout

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/window"
)

// Window store layout, shared by tumbling, hopping, session and sliding
// windows and by the stream-join buffers. Every key starts with a
// lower-case letter, so the task's time state (TimeStateKey) cannot
// collide:
//
//	d uvarint(len(key)) key start → the window's state
//	f at <d-suffix>               → 1   the window's event timer
//	p at <d-suffix>               → 1   the window's processing-time timer
//	x at <d-suffix>               → 1   remove the window when the watermark reaches at
//
// An index key is its prefix, the time it is due, and the data key without
// its prefix byte, so that it turns back into the data key
// (WindowKeyFromIndex).
const (
	WindowData   = 'd'
	WindowFire   = 'f'
	WindowProc   = 'p'
	WindowExpire = 'x'
)

// IndexValue is the value of every index entry: the key says everything.
var IndexValue = []byte{1}

// WindowKey appends to dst the key of the window starting at start of the
// key whose encoding is kb.
func WindowKey(dst, kb []byte, start int64) []byte {
	dst = append(dst, WindowData)
	dst = binary.AppendUvarint(dst, uint64(len(kb)))
	dst = append(dst, kb...)
	return AppendTime(dst, start)
}

// WindowKeyPrefix is the prefix of all of kb's windows.
func WindowKeyPrefix(kb []byte) []byte {
	return append(binary.AppendUvarint([]byte{WindowData}, uint64(len(kb))), kb...)
}

// IndexKey is the key of the entry in the index prefix (WindowFire,
// WindowProc, WindowExpire) that makes the window with data key data due
// at at.
func IndexKey(prefix byte, at int64, data []byte) []byte {
	b := AppendTime(append(make([]byte, 0, 9+len(data)), prefix), at)
	return append(b, data[1:]...)
}

// ParseWindowKey splits a window key into the key's encoding and the window
// start.
func ParseWindowKey(k []byte) (kb []byte, start int64, err error) {
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || uint64(len(k)) != 1+uint64(w)+n+8 {
		return nil, 0, fmt.Errorf("%w: window store key of %d bytes", window.ErrCorrupt, len(k))
	}
	kb = k[1+w : 1+w+int(n)]
	return kb, ReadTime(k[len(k)-8:]), nil
}

// WindowKeyFromIndex turns an index key back into its window key.
func WindowKeyFromIndex(ik []byte) []byte {
	return append([]byte{WindowData}, ik[9:]...)
}
