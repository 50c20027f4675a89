package layout

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-streams/sluice/window"
)

// TestTimeStateBytes pins the time state's bytes: a change here is a change
// of what every committed time store holds.
func TestTimeStateBytes(t *testing.T) {
	tr, err := window.NewTracker(window.Monotonous(), 2)
	if err != nil {
		t.Fatal(err)
	}
	tr.Advance(0, 1000)
	tr.SetIdle(1)
	tb, _ := tr.AppendBinary(nil)
	for _, st := range []int64{window.NoWatermark, -1, 0, 1, 1 << 40, 1<<63 - 1} {
		b := AppendTimeState([]byte("x"), st, tr)
		want := append([]byte{'x', 1}, byte(uint64(st)>>56), byte(uint64(st)>>48), byte(uint64(st)>>40), byte(uint64(st)>>32),
			byte(uint64(st)>>24), byte(uint64(st)>>16), byte(uint64(st)>>8), byte(uint64(st)))
		want = append(want, tb...)
		if !bytes.Equal(b, want) {
			t.Fatalf("stream time %d: %x, want %x", st, b, want)
		}
		got, state, err := ParseTimeState(b[1:])
		if err != nil || got != st || !bytes.Equal(state, tb) {
			t.Fatalf("stream time %d came back as %d, %x, %v", st, got, state, err)
		}
		back, _ := window.NewTracker(window.Monotonous(), 2)
		if err := back.UnmarshalBinary(state); err != nil || back.Watermark() != tr.Watermark() || !back.InputIdle(1) {
			t.Fatalf("tracker came back with watermark %d, idle %v: %v", back.Watermark(), back.InputIdle(1), err)
		}
	}
	if string(TimeStateKey) != "T" {
		t.Fatalf("TimeStateKey = %q", TimeStateKey)
	}
}

func TestTimeStateRejectsCorrupt(t *testing.T) {
	for _, b := range [][]byte{nil, {}, {1}, {1, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 0}, {2, 0, 0, 0, 0, 0, 0, 0, 0, 1}} {
		if _, _, err := ParseTimeState(b); !errors.Is(err, window.ErrCorrupt) {
			t.Fatalf("%x: %v, want window.ErrCorrupt", b, err)
		}
	}
}
