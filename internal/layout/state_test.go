package layout

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

func TestEntryRoundTrip(t *testing.T) {
	for _, vb := range testkeys.Bytes() {
		for _, c := range []struct {
			timed bool
			at    int64
		}{{false, 0}, {true, 0}, {true, 1}, {true, math.MaxInt64}} {
			b := AppendEntry([]byte("prefix"), c.timed, c.at, vb)
			e, err := ParseEntry(b[len("prefix"):])
			if err != nil || e.Timed != c.timed || !bytes.Equal(e.Payload, vb) || (c.timed && e.At != c.at) {
				t.Fatalf("entry of %d bytes (timed %t at %d): %+v %v", len(vb), c.timed, c.at, e, err)
			}
		}
	}
	if b := AppendEntry(nil, true, 0x0102, []byte("v")); string(b) != "\x02\x00\x00\x00\x00\x00\x00\x01\x02v" {
		t.Fatalf("timed entry %q", b)
	}
	if b := AppendEntry(nil, false, 0x0102, []byte("v")); string(b) != "\x01v" {
		t.Fatalf("plain entry %q", b)
	}
}

func TestEntryCorrupt(t *testing.T) {
	for _, b := range [][]byte{nil, {}, {0}, {3}, {2}, {2, 0, 0, 0, 0, 0, 0, 0}, {2, 0x80, 0, 0, 0, 0, 0, 0, 0}} {
		var sc StateCorruption
		if _, err := ParseEntry(b); !errors.As(err, &sc) {
			t.Errorf("entry %q: %v, want a StateCorruption", b, err)
		}
	}
}

// TestListElements: elements of every length, past where their uvarint
// length takes a second byte, read back in order; lists that end inside
// an element or its length are corrupt.
func TestListElements(t *testing.T) {
	list := []byte{ListFormat}
	want := testkeys.Bytes()
	ends := map[int]bool{1: true} // where a cut list is whole
	for _, e := range want {
		list = AppendListElement(list, e)
		ends[len(list)] = true
	}
	var got [][]byte
	if err := ListElements(list, func(raw []byte) error { got = append(got, raw); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("read %d elements back, want %d", len(got), len(want))
	}
	for n := 1; n < len(list); n++ {
		err := ListElements(list[:n], func([]byte) error { return nil })
		var sc StateCorruption
		if ends[n] != (err == nil) || err != nil && !errors.As(err, &sc) {
			t.Fatalf("a list cut at %d bytes (whole: %t): %v", n, ends[n], err)
		}
	}
	stop := errors.New("stop")
	if err := ListElements(list, func([]byte) error { return stop }); err != stop {
		t.Fatalf("an error from fn: %v", err)
	}
	for _, b := range [][]byte{nil, {}, {2}} {
		var sc StateCorruption
		if err := ListElements(b, func([]byte) error { return nil }); !errors.As(err, &sc) {
			t.Errorf("list %q: %v", b, err)
		}
	}
}

// TestMapPrefixesAreDisjoint: no key's map entries, whatever their map
// keys, fall under another key's prefix, over keys of every length.
func TestMapPrefixesAreDisjoint(t *testing.T) {
	keys := testkeys.Bytes()
	for i, a := range keys {
		pa := MapPrefix(a)
		if !bytes.HasPrefix(pa, []byte{StateMap}) {
			t.Fatalf("map prefix %q", pa)
		}
		for j, b := range keys {
			if i == j {
				continue
			}
			// b's entry under the map key that would complete a's
			// prefix, were the length not in front.
			entry := append(MapPrefix(b), a...)
			if bytes.HasPrefix(entry, pa) {
				t.Fatalf("an entry of a key of %d bytes lies under the prefix of a key of %d bytes", len(b), len(a))
			}
		}
	}
	if got := MapPrefix([]byte("k")); string(got) != "m\x01k" {
		t.Fatalf("MapPrefix(k) = %q", got)
	}
	if got, want := MapPrefix(bytes.Repeat([]byte{'k'}, 128)), "m\x80\x01"+string(bytes.Repeat([]byte{'k'}, 128)); string(got) != want {
		t.Fatalf("MapPrefix of 128 bytes = %q", got[:4])
	}
}

func TestStateKeysAndClock(t *testing.T) {
	if string(ValueKey([]byte("k"))) != "vk" || string(ListKey([]byte("k"))) != "lk" || string(StateClockKey) != "c" {
		t.Fatal("state keys")
	}
	b := AppendClock(nil, 1100)
	if string(b) != "\x01\x00\x00\x00\x00\x00\x00\x04\x4c" {
		t.Fatalf("clock %q", b)
	}
	if ts, ok := ParseClock(b); !ok || ts != 1100 {
		t.Fatalf("ParseClock: %d %t", ts, ok)
	}
	for _, bad := range [][]byte{nil, {1}, b[:8], append(bytes.Clone(b), 0), {2, 0, 0, 0, 0, 0, 0, 0, 0}} {
		if _, ok := ParseClock(bad); ok {
			t.Errorf("ParseClock(%q) ok", bad)
		}
	}
}
