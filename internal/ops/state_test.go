package ops

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

func openKeyed(st *store.Staged, ttl int64, clk StreamClock) *Keyed {
	return NewKeyed(StateConfig{Name: "s", TTL: ttl, Errors: testErrors}, st, clk)
}

// timedEntry is the bytes of a timed entry, written out by hand so that
// the tests pin the layout rather than repeat it.
func timedEntry(at int64, v string) string {
	return "\x02" + string(binary.BigEndian.AppendUint64(nil, uint64(at))) + v
}

// mapKeys are the map keys every key's map gets: the lengths where a
// uvarint length takes a second byte, a UUID, and the empty key.
var mapKeys = []string{"", testkeys.Len(1, 3), testkeys.Len(36, 3), testkeys.Len(127, 3), testkeys.Len(128, 3), testkeys.Len(130, 3), testkeys.UUIDs(1)[0]}

// TestStateEveryKeyLength writes value, list and map state for keys of
// every encoded length and UUIDs into one Pebble store, commits, and reads
// every key back: no key sees another's entries, even where one key's
// bytes begin with another's, and the value bytes are the layout's.
func TestStateEveryKeyLength(t *testing.T) {
	for _, ttl := range []int64{0, 100} {
		t.Run(fmt.Sprintf("ttl=%d", ttl), func(t *testing.T) {
			st := pebbleStaged(t)
			clk := &clock{ts: 1000}
			val := NewValueState(openKeyed(st, ttl, clk), serde.String, serde.String)
			list := NewListState(openKeyed(st, ttl, clk), serde.String, serde.String)
			m := NewMapState(openKeyed(st, ttl, clk), serde.String, serde.String, serde.String)
			keys := testkeys.All()
			for _, k := range keys {
				if err := val.Set(k, "v"+k); err != nil {
					t.Fatal(err)
				}
				for _, v := range []string{"a" + k, "b"} {
					if err := list.Add(k, v); err != nil {
						t.Fatal(err)
					}
				}
				for _, uk := range mapKeys {
					if err := m.Put(k, uk, k+"/"+uk); err != nil {
						t.Fatal(err)
					}
				}
			}
			commit(t, st)
			wantUKs := slices.Clone(mapKeys)
			slices.Sort(wantUKs)
			for _, k := range keys {
				if v, ok, err := val.Get(k); err != nil || !ok || v != "v"+k {
					t.Fatalf("value of a key of %d bytes: %q %t %v", len(k), v, ok, err)
				}
				want := "\x01v" + k
				if ttl > 0 {
					want = timedEntry(1000, "v"+k)
				}
				if b, _, _ := st.Get([]byte("v" + k)); string(b) != want {
					t.Fatalf("value entry of a key of %d bytes: %q, want %q", len(k), b, want)
				}
				if l, err := list.Get(k); err != nil || !slices.Equal(l, []string{"a" + k, "b"}) {
					t.Fatalf("list of a key of %d bytes: %q %v", len(k), l, err)
				}
				var uks []string
				err := m.Range(k, func(uk, uv string) error {
					if uv != k+"/"+uk {
						return fmt.Errorf("map entry %q=%q", uk, uv)
					}
					uks = append(uks, uk)
					return nil
				})
				if err != nil || !slices.Equal(uks, wantUKs) {
					t.Fatalf("map of a key of %d bytes: %q %v; want %q", len(k), uks, err, wantUKs)
				}
			}
			// Clearing one key's map leaves every other key's.
			if err := m.Clear(keys[1]); err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				n := 0
				if err := m.Range(k, func(string, string) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{true: 0, false: len(mapKeys)}[k == keys[1]]; n != want {
					t.Fatalf("after clearing the map of a key of 1 byte, a key of %d bytes has %d entries, want %d", len(k), n, want)
				}
			}
		})
	}
}

// TestStateTTLBoundary: an entry written at w with a TTL of d is live up to
// w+d-1 and gone at w+d, for values, list elements and map entries; the
// task's handles delete what they find expired and move the stored clock,
// a view does neither, and the clock never runs backwards.
func TestStateTTLBoundary(t *testing.T) {
	st := pebbleStaged(t)
	clk := &clock{ts: 1000}
	val := NewValueState(openKeyed(st, 100, clk), serde.String, serde.String)
	list := NewListState(openKeyed(st, 100, clk), serde.String, serde.String)
	m := NewMapState(openKeyed(st, 100, clk), serde.String, serde.String, serde.String)
	view := NewValueState(openKeyed(st, 100, nil), serde.String, serde.String)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(val.Set("k", "a"))
	must(list.Add("k", "a"))
	must(m.Put("k", "u", "a"))
	clk.ts = 1050
	must(list.Add("k", "b"))
	commit(t, st)

	clk.ts = 1099
	if v, ok, err := val.Get("k"); err != nil || !ok || v != "a" {
		t.Fatalf("value at 1099: %q %t %v", v, ok, err)
	}
	if _, ok, err := m.Get("k", "u"); err != nil || !ok {
		t.Fatalf("map entry at 1099: %t %v", ok, err)
	}
	if l, err := list.Get("k"); err != nil || !slices.Equal(l, []string{"a", "b"}) {
		t.Fatalf("list at 1099: %q %v", l, err)
	}
	commit(t, st)

	// A view at the stored clock 1099 still sees the value; the stream
	// time moving to 1100 does not reach it until the task reads.
	clk.ts = 1100
	if _, ok, err := view.Get("k"); err != nil || !ok {
		t.Fatalf("view at stored clock 1099: %t %v", ok, err)
	}
	if _, ok, err := val.Get("k"); err != nil || ok {
		t.Fatalf("value at 1100: %t %v, want expired", ok, err)
	}
	if _, ok, _ := st.Get([]byte("vk")); ok {
		t.Error("the expired value was not deleted")
	}
	if l, err := list.Get("k"); err != nil || !slices.Equal(l, []string{"b"}) {
		t.Fatalf("list at 1100: %q %v, want the element written at 1050", l, err)
	}
	if b, _, _ := st.Get([]byte("lk")); string(b) != "\x01\x0a"+timedEntry(1050, "b") {
		t.Errorf("list after expiry: %q", b)
	}
	if _, ok, err := m.Get("k", "u"); err != nil || ok {
		t.Fatalf("map entry at 1100: %t %v, want expired", ok, err)
	}
	if b, _, _ := st.Get([]byte("c")); string(b) != "\x01"+string(binary.BigEndian.AppendUint64(nil, 1100)) {
		t.Errorf("stored clock %q, want 1100", b)
	}

	// A view finds expired what the stored clock says is, and leaves it.
	commit(t, st)
	must(st.Put([]byte("vk"), []byte(timedEntry(1000, "a"))))
	if _, ok, err := view.Get("k"); err != nil || ok {
		t.Fatalf("view at stored clock 1100: %t %v, want expired", ok, err)
	}
	if _, ok, _ := st.Get([]byte("vk")); !ok {
		t.Error("the view deleted the expired value")
	}

	// An out-of-order record (stream time behind the stored clock) is
	// stamped with the clock: it cannot revive or outlive what expired.
	clk.ts = 500
	must(val.Set("k", "late"))
	if b, _, _ := st.Get([]byte("vk")); string(b) != timedEntry(1100, "late") {
		t.Errorf("late write stamped %q, want at 1100", b)
	}
}

// TestStateAbortThenReplay: a transaction that moved the clock, expired
// entries and wrote new ones is aborted; the store is exactly as committed
// before it, and its replay leaves exactly the bytes of a run without the
// abort.
func TestStateAbortThenReplay(t *testing.T) {
	type handles struct {
		st   *store.Staged
		clk  *clock
		val  *ValueState[string, string]
		list *ListState[string, string]
		m    *MapState[string, string, string]
	}
	open := func(t *testing.T) handles {
		st := pebbleStaged(t)
		clk := &clock{ts: 1000}
		return handles{st, clk,
			NewValueState(openKeyed(st, 100, clk), serde.String, serde.String),
			NewListState(openKeyed(st, 100, clk), serde.String, serde.String),
			NewMapState(openKeyed(st, 100, clk), serde.String, serde.String, serde.String)}
	}
	keys := append(testkeys.UUIDs(2), "", testkeys.Len(128, 1))
	first := func(t *testing.T, h handles) {
		h.clk.ts = 1000
		for i, k := range keys {
			if err := h.val.Set(k, k); err != nil {
				t.Fatal(err)
			}
			if err := h.list.Add(k, "x"); err != nil {
				t.Fatal(err)
			}
			if err := h.m.Put(k, fmt.Sprint(i), k); err != nil {
				t.Fatal(err)
			}
		}
		commit(t, h.st)
	}
	// second reads past the TTL (deleting), then writes anew.
	second := func(t *testing.T, h handles) {
		h.clk.ts = 1150
		for i, k := range keys {
			if _, ok, err := h.val.Get(k); err != nil || ok {
				t.Fatalf("value of %q at 1150: %t %v, want expired", k, ok, err)
			}
			if err := h.list.Add(k, "y"); err != nil {
				t.Fatal(err)
			}
			if err := h.m.Range(k, func(string, string) error { return errors.New("an expired entry is live") }); err != nil {
				t.Fatal(err)
			}
			if i%2 == 0 {
				if err := h.val.Set(k, "again"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	ref := open(t)
	first(t, ref)
	second(t, ref)
	commit(t, ref.st)
	want := dump(t, ref.st)

	h := open(t)
	first(t, h)
	committed := dump(t, h.st)
	second(t, h)
	h.st.Abort()
	if got := dump(t, h.st); got != committed {
		t.Fatalf("after the abort:\n%s\nwant the committed state:\n%s", got, committed)
	}
	second(t, h)
	commit(t, h.st)
	if got := dump(t, h.st); got != want {
		t.Fatalf("after the replay:\n%s\nwant, as without the abort:\n%s", got, want)
	}
}

// TestStateErrors pins the errors: each names the store, wraps the
// sentinel it was given, and reads as it did in topology.
func TestStateErrors(t *testing.T) {
	st := store.NewStaged("s", store.NewMemory())
	clk := &clock{ts: 1000}
	val := NewValueState(openKeyed(st, 1, clk), serde.String, serde.String)
	list := NewListState(openKeyed(st, 0, clk), serde.String, serde.String)
	m := NewMapState(openKeyed(st, 0, clk), serde.String, serde.String, serde.String)
	getVal := func() error { _, _, err := val.Get("k"); return err }
	getList := func() error { _, err := list.Get("k"); return err }
	for _, c := range []struct {
		key, value string
		op         func() error
		want       string
		sentinel   error
	}{
		{"vk", "", getVal, "store s: test: corrupt state: empty entry", errCorrupt},
		{"vk", "\x09a", getVal, "store s: test: corrupt state: entry format 9", errCorrupt},
		{"vk", "\x02\x00\x00\x01", getVal, "store s: test: corrupt state: timed entry of 4 bytes", errCorrupt},
		{"vk", "\x02\x80\x00\x00\x00\x00\x00\x00\x00a", getVal, "store s: test: corrupt state: write time -9223372036854775808", errCorrupt},
		{"lk", "\x07", getList, "store s: test: corrupt state: list of 1 bytes", errCorrupt},
		{"lk", "\x01\x05\x01a", getList, "store s: test: corrupt state: list element length", errCorrupt},
		{"lk", "\x01\x01\x03", getList, "store s: list element: test: corrupt state: entry format 3", errCorrupt},
		{"lk", "\x01\x02\x01", getList, "store s: test: corrupt state: list element length", errCorrupt},
		{"lk", "\x01\x01\x09", func() error { return list.Add("k", "x") }, "store s: list element: test: corrupt state: entry format 9", errCorrupt},
		{"m\x01ku", "\x03", func() error { return m.Range("k", func(string, string) error { return nil }) }, "store s: test: corrupt state: entry format 3", errCorrupt},
		{"c", "\x01\x00", func() error { return val.Set("k", "a") }, "store s: clock of 2 bytes: test: corrupt state", errCorrupt},
		{"x", "", func() error {
			return m.Range("k", func(string, string) error { return m.Put("k", "v", "w") })
		}, "store s: write during Range", nil},
	} {
		st.Abort()
		if err := st.Put([]byte(c.key), []byte(c.value)); err != nil {
			t.Fatal(err)
		}
		if c.key == "x" {
			st.Put([]byte("m\x01ku"), []byte("\x01v"))
		}
		err := c.op()
		if err == nil || err.Error() != c.want || (c.sentinel != nil && !errors.Is(err, c.sentinel)) {
			t.Errorf("%q=%q: %v; want %q wrapping %v", c.key, c.value, err, c.want, c.sentinel)
		}
	}

	st.Abort()
	clk.ts = noTime
	if err := val.Set("k", "a"); err == nil || err.Error() != "store s: test: no time" || !errors.Is(err, errNoTime) {
		t.Errorf("write under a TTL before any time: %v", err)
	}
	undeclared := NewValueState(openKeyed(nil, 0, clk), serde.String, serde.String)
	if _, _, err := undeclared.Get("k"); err == nil || err.Error() != "store s: test: unknown store: the processor did not pass the state to Process" || !errors.Is(err, errUndeclared) {
		t.Errorf("an undeclared state: %v", err)
	}
}
