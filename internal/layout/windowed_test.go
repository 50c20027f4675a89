package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

// TestWindowedCodec: a windowed key is its key's bytes then start and end
// big-endian, for keys of every length (a key's bytes may end in what
// looks like a window) and windows at the edges of int64.
func TestWindowedCodec(t *testing.T) {
	bounds := []window.Bounds{{Start: 0, End: 0}, {Start: -1, End: 1}, {Start: math.MinInt64, End: math.MaxInt64}, {Start: 1700000000000, End: 1700000060000}}
	for i, kb := range testkeys.Bytes() {
		w := bounds[i%len(bounds)]
		b := AppendWindow(bytes.Clone(kb), w)
		want := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(bytes.Clone(kb), uint64(w.Start)), uint64(w.End))
		if !bytes.Equal(b, want) {
			t.Fatalf("AppendWindow(%x, %v) = %x, want %x", kb, w, b, want)
		}
		gk, gw, err := SplitWindowed(b)
		if err != nil || !bytes.Equal(gk, kb) || gw != w {
			t.Fatalf("SplitWindowed(%x) = %x, %v, %v; want %x, %v", b, gk, gw, err, kb, w)
		}
	}
	for n := 0; n < windowTail; n++ {
		if _, _, err := SplitWindowed(make([]byte, n)); !errors.Is(err, serde.ErrDecode) {
			t.Fatalf("SplitWindowed of %d bytes: %v, want serde.ErrDecode", n, err)
		}
	}
}
