package layout

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

// The encoding of a windowed key on a topic (topology.WindowedSerde): the
// key's bytes, then the window's start and end, 8 bytes big-endian each.
//
//	key bytes | start (8, big-endian) | end (8, big-endian)

// windowTail is the length of a windowed key's window.
const windowTail = 16

// AppendWindow appends w to b, a windowed key's key bytes.
func AppendWindow(b []byte, w window.Bounds) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(w.Start))
	return binary.BigEndian.AppendUint64(b, uint64(w.End))
}

// SplitWindowed splits a windowed key's encoding into its key's bytes (a
// slice of b) and its window; shorter than a window is serde.ErrDecode.
func SplitWindowed(b []byte) (key []byte, w window.Bounds, err error) {
	if len(b) < windowTail {
		return nil, w, fmt.Errorf("%w: windowed key of %d bytes", serde.ErrDecode, len(b))
	}
	n := len(b) - windowTail
	w.Start = int64(binary.BigEndian.Uint64(b[n:]))
	w.End = int64(binary.BigEndian.Uint64(b[n+8:]))
	return b[:n], w, nil
}
