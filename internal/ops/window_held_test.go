package ops

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

// exactPointer is an exact serde of a type that holds a reference: its
// windows are not held, since an adder may change such an aggregate in
// place.
type exactPointer struct{ serde.Serde[*int64] }

func (exactPointer) ExactRoundTrip() {}

// TestWindowsHeldOnlyWhereTheyMayBe: tumbling windows of an exact serde
// and a plain aggregate are held; those whose serde is not known to be
// exact (JSON), whose aggregate holds a reference, that keep elements, or
// that are sessions are not.
func TestWindowsHeldOnlyWhereTheyMayBe(t *testing.T) {
	tumbling := window.Tumbling(time.Second)
	if !holds(WindowConfig[string, int64, int64]{Values: serde.Int64}) || !holds(WindowConfig[string, int64, int64]{Values: serde.Int64Text}) {
		t.Error("windows of int64 counts are not held")
	}
	if holds(WindowConfig[string, int64, int64]{Values: serde.JSON[int64]()}) {
		t.Error("windows of a serde not known to be exact are held")
	}
	if holds(WindowConfig[string, int64, *int64]{Values: exactPointer{}}) {
		t.Error("windows of a pointer aggregate are held")
	}
	if holds(WindowConfig[string, int64, int64]{Values: serde.Int64, Elements: &WindowElements[string, int64]{}}) {
		t.Error("windows that keep their elements are held")
	}
	if p := NewWindow(WindowConfig[string, int64, int64]{Values: serde.Int64, Windows: window.InactivityGap(time.Second)}); p.held != nil {
		t.Error("sessions are held")
	}
	if p := NewWindow(WindowConfig[string, int64, int64]{Values: serde.Int64, Windows: tumbling}); p.held == nil {
		t.Error("tumbling windows of int64 counts are not held")
	}
	type point struct {
		X, Y float64
		Tag  [2]string
	}
	if !plain(reflect.TypeFor[point]()) || plain(reflect.TypeFor[struct{ P *int }]()) || plain(reflect.TypeFor[[]int]()) || plain(reflect.TypeFor[any]()) {
		t.Error("plain misjudges a type")
	}
}

// TestHoldingPausesWhereItDoesNotPay: three flushes in a row that spill
// 64 held windows or more, 8 for each one closed while held, pause holding
// for the next 15 transactions; then it holds again. Fewer windows, more
// closed, or a flush between that closed enough keep it holding.
func TestHoldingPausesWhereItDoesNotPay(t *testing.T) {
	hw := newHeldWindows[int64]()
	for _, c := range []struct{ spilled, closed int }{
		{63, 0}, {63, 0}, {63, 0}, {159, 20}, {159, 20}, {159, 20},
		{1000, 0}, {1000, 0}, {1000, 200}, {1000, 0}, {1000, 0}, {10, 2},
	} {
		hw.closed = c.closed
		if hw.pace(c.spilled); !hw.holding() {
			t.Fatalf("%d spilled, %d closed: holding paused", c.spilled, c.closed)
		}
	}
	for i, closed := range []int{0, 19, 0} {
		if !hw.holding() {
			t.Fatalf("paused after %d flushes", i)
		}
		hw.closed = closed
		hw.pace(160)
	}
	if hw.holding() {
		t.Fatal("three flushes of 160 spilled, at most 19 closed: still holding")
	}
	for i := range 15 {
		if hw.holding() {
			t.Fatalf("holding again after %d transactions", i)
		}
		hw.pace(0)
	}
	if !hw.holding() {
		t.Fatal("not holding after 15 transactions")
	}
}

// TestHeldWindowsCloseInKeyOrder: takeDue returns the windows due by close
// time, then by data key as bytes.Compare orders them, whatever the keys:
// every length (testkeys: past 128 bytes the length's uvarint, in the
// sorted prefix, takes two bytes), UUIDs, keys of one length that share
// their first 8 or 20 bytes and differ after, and keys that differ only
// by trailing zero bytes; in both layouts (by start, the windows of one
// close time share the prefix and the start). It holds copies: the
// caller's key buffer is reused. Keys that differ in a few bytes only
// take the radix sort's skipped passes and odd pass counts.
func TestHeldWindowsCloseInKeyOrder(t *testing.T) {
	keys := testkeys.Bytes()
	for n := range 21 {
		keys = append(keys, append(bytes.Repeat([]byte{0}, n), 1))
	}
	for i := range 300 {
		keys = append(keys, fmt.Appendf(nil, "%08d", i), fmt.Appendf(nil, "sameprefix-%d", i), fmt.Appendf(nil, "shared-by-twenty-bytes-%06d", i))
	}
	keys = append(keys, []byte("abc"), []byte("abc\x00"), []byte("abc\x00\x00\x00\x00\x00\x00"), []byte("abc\x00\x00\x00\x00\x00\x01"))
	// Keys that differ in a few bytes only, as the bench's do: the
	// radix sort skips the bytes all of a close time's keys share, and
	// an odd number of passes leaves the result in its room.
	var digits, spread [][]byte
	for i := range 3000 {
		digits = append(digits, fmt.Appendf(nil, "%08d", i))
		spread = append(spread, fmt.Appendf(nil, "k%08d", i*7919%100_000))
	}
	for name, windowKey := range map[string]func(dst, kb []byte, start int64) []byte{"byKey": layout.WindowKey, "byStart": layout.StartKey} {
		t.Run(name, func(t *testing.T) { heldCloseInKeyOrder(t, keys, windowKey) })
		t.Run(name+"/digits", func(t *testing.T) { heldCloseInKeyOrder(t, digits, windowKey) })
		t.Run(name+"/spread", func(t *testing.T) { heldCloseInKeyOrder(t, spread, windowKey) })
	}
}

// heldCloseInKeyOrder holds a window of each key, in a random order, at
// three close times, with data keys laid out by windowKey, and checks the
// order takeDue returns them in.
func heldCloseInKeyOrder(t *testing.T, keys [][]byte, windowKey func(dst, kb []byte, start int64) []byte) {
	t.Helper()
	hw := newHeldWindows[int64]()
	rng := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	want := map[int64][][]byte{}
	for _, i := range rng.Perm(len(keys)) {
		close := int64(1000 * (1 + i%3))
		buf = windowKey(buf[:0], keys[i], close-1000)
		want[close] = append(want[close], bytes.Clone(buf))
		hw.open(buf, close, NewWindowState[int64](window.Bounds{Start: close - 1000, End: close}))
		clear(buf)
	}
	got := hw.takeDue(3000)
	var i int
	for _, close := range []int64{1000, 2000, 3000} {
		slices.SortFunc(want[close], bytes.Compare)
		for _, k := range want[close] {
			if i >= len(got) {
				t.Fatalf("takeDue returned %d windows, want %d", len(got), len(keys))
			}
			if h := got[i]; h.close != close || !bytes.Equal(h.key, k) {
				t.Fatalf("window %d: close %d key %q, want close %d key %q", i, h.close, h.key, close, k)
			}
			i++
		}
	}
	if i != len(got) {
		t.Fatalf("takeDue returned %d windows, want %d", len(got), i)
	}
}
