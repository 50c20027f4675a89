package ops

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

func (t Timer[K]) String() string { return fmt.Sprintf("%v@%d/%d", t.Key, t.Time, t.Domain) }

// TestTimersEveryKeyLength registers timers of both clocks for keys of
// every encoded length at times out of order, and finds each fire exactly
// once, in time order then key bytes, and only on its own clock.
func TestTimersEveryKeyLength(t *testing.T) {
	st := pebbleStaged(t)
	tm := NewTimers(st, serde.String)
	keys := testkeys.All()
	type reg struct {
		k  string
		at int64
	}
	var regs []reg
	for i, k := range keys {
		at := int64((i*37)%11) * 10 // 0..100, out of order
		if i%5 == 0 {
			at = -at - 5 // negative times sort before the others
		}
		regs = append(regs, reg{k, at})
		if err := tm.Register(EventTime, k, at); err != nil {
			t.Fatal(err)
		}
		// Registering again is the same timer.
		if err := tm.Register(EventTime, k, at); err != nil {
			t.Fatal(err)
		}
		if err := tm.Register(ProcessingTime, k, 1000+int64(i%7)); err != nil {
			t.Fatal(err)
		}
	}
	commit(t, st)
	slices.SortFunc(regs, func(a, b reg) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return strings.Compare(a.k, b.k)
	})

	var fired []reg
	for now := int64(-200); now <= 200; now += 7 {
		due, err := tm.Due(EventTime, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range due {
			if d.Time > now || d.Domain != EventTime {
				t.Fatalf("at %d: %v is not due", now, d)
			}
			fired = append(fired, reg{d.Key, d.Time})
		}
		commit(t, st)
	}
	if !slices.Equal(fired, regs) {
		t.Fatalf("fired %d timers, want %d in time then key order", len(fired), len(regs))
	}
	due, err := tm.Due(ProcessingTime, 999)
	if err != nil || len(due) != 0 {
		t.Fatalf("processing-time timers at 999: %v %v", due, err)
	}
	due, err = tm.Due(ProcessingTime, math.MaxInt64)
	if err != nil || len(due) != len(keys) {
		t.Fatalf("processing-time timers: %d fired (%v), want %d", len(due), err, len(keys))
	}
	if rest := dump(t, st); rest != "" {
		t.Fatalf("left after every timer fired:\n%s", rest)
	}
}

// TestTimersLayout pins a timer's bytes.
func TestTimersLayout(t *testing.T) {
	st := store.NewStaged("s", store.NewMemory())
	tm := NewTimers(st, serde.String)
	if err := tm.Register(EventTime, "k", 1); err != nil {
		t.Fatal(err)
	}
	if err := tm.Register(ProcessingTime, "", -1); err != nil {
		t.Fatal(err)
	}
	want := `"e\x80\x00\x00\x00\x00\x00\x00\x01k"="\x01"` + "\n" + `"p\x7f\xff\xff\xff\xff\xff\xff\xff"="\x01"` + "\n"
	if got := dump(t, st); got != want {
		t.Fatalf("timer store:\n%s\nwant:\n%s", got, want)
	}
}

// TestTimersDueBoundary: a timer is due exactly when the clock reaches its
// time, at the ends of the time range too.
func TestTimersDueBoundary(t *testing.T) {
	for _, at := range []int64{math.MinInt64, -1, 0, 100, math.MaxInt64 - 1, math.MaxInt64} {
		st := store.NewStaged("s", store.NewMemory())
		tm := NewTimers(st, serde.String)
		if err := tm.Register(EventTime, "k", at); err != nil {
			t.Fatal(err)
		}
		if at > math.MinInt64 {
			if due, err := tm.Due(EventTime, at-1); err != nil || len(due) != 0 {
				t.Fatalf("timer at %d fired at %d: %v %v", at, at-1, due, err)
			}
		}
		if due, err := tm.Due(EventTime, at); err != nil || len(due) != 1 || due[0].Time != at {
			t.Fatalf("timer at %d at its time: %v %v", at, due, err)
		}
	}
}

// TestTimersAbortThenReplay: a Due inside an aborted transaction removed
// a timer and raised the bound on the next due time past it. The abort
// puts the timer back in the store; Forget makes the replay fire it again,
// which without Forget it would not (the negative control).
func TestTimersAbortThenReplay(t *testing.T) {
	for _, forget := range []bool{true, false} {
		st := pebbleStaged(t)
		tm := NewTimers(st, serde.String)
		for _, k := range testkeys.UUIDs(3) {
			if err := tm.Register(EventTime, k, 100); err != nil {
				t.Fatal(err)
			}
		}
		if err := tm.Register(EventTime, "later", 200); err != nil {
			t.Fatal(err)
		}
		commit(t, st)
		committed := dump(t, st)
		if due, err := tm.Due(EventTime, 150); err != nil || len(due) != 3 {
			t.Fatalf("first run: %v %v", due, err)
		}
		// A timer registered in the aborted transaction is undone.
		if err := tm.Register(EventTime, "aborted", 300); err != nil {
			t.Fatal(err)
		}
		st.Abort()
		if got := dump(t, st); got != committed {
			t.Fatalf("after the abort:\n%s\nwant:\n%s", got, committed)
		}
		if forget {
			tm.Forget()
		}
		due, err := tm.Due(EventTime, 150)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(due); forget && got != 3 || !forget && got != 0 {
			t.Fatalf("forget=%t: the replay fired %v", forget, due)
		}
		if forget {
			if due, err := tm.Due(EventTime, math.MaxInt64); err != nil || len(due) != 1 || due[0].Key != "later" {
				t.Fatalf("after the replay: %v %v", due, err)
			}
		}
	}
}

// TestTimersCorrupt: keys the layout cannot have produced, and keys the
// serde cannot decode, are errors.
func TestTimersCorrupt(t *testing.T) {
	st := store.NewStaged("s", store.NewMemory())
	tm := NewTimers(st, serde.Int64)
	st.Put([]byte("e\x01"), layout.IndexValue)
	if _, err := tm.Due(EventTime, 0); err == nil || !strings.Contains(err.Error(), "index key of 2 bytes") {
		t.Errorf("a short timer key: %v", err)
	}
	st.Abort()
	st.Put(append(layout.AppendTime([]byte{'e'}, 0), "x"...), layout.IndexValue)
	tm.Forget()
	if _, err := tm.Due(EventTime, 0); err == nil || !strings.HasPrefix(err.Error(), "timers s: key: ") {
		t.Errorf("an undecodable key: %v", err)
	}
}

// TestIndexScans: the scans see their own prefix only, in order, up to
// and including now.
func TestIndexScans(t *testing.T) {
	st := store.NewStaged("s", store.NewMemory())
	for _, p := range []byte{'d', 'e', 'f'} {
		for _, at := range []int64{math.MinInt64, -1, 0, 5, math.MaxInt64} {
			for _, k := range testkeys.Bytes()[:3] {
				st.Put(append(layout.AppendTime([]byte{p}, at), k...), layout.IndexValue)
			}
		}
	}
	if n, err := FirstIndex(st, 'e', math.MinInt64); err != nil || n != math.MinInt64 {
		t.Fatalf("FirstIndex: %d %v", n, err)
	}
	if n, err := FirstIndex(st, 'g', math.MinInt64); err != nil || n != math.MaxInt64 {
		t.Fatalf("FirstIndex of an empty index: %d %v", n, err)
	}
	for _, c := range []struct {
		now  int64
		want int
	}{{math.MinInt64, 3}, {-2, 3}, {-1, 6}, {4, 9}, {5, 12}, {math.MaxInt64 - 1, 12}, {math.MaxInt64, 15}} {
		keys, err := DueIndex(st, 'e', math.MinInt64, c.now)
		if err != nil || len(keys) != c.want {
			t.Fatalf("DueIndex at %d: %d keys %v, want %d", c.now, len(keys), err, c.want)
		}
		if !slices.IsSortedFunc(keys, bytes.Compare) {
			t.Fatalf("DueIndex at %d: out of order", c.now)
		}
		for _, k := range keys {
			if k[0] != 'e' || layout.ReadTime(k[1:9]) > c.now {
				t.Fatalf("DueIndex at %d: %q", c.now, k)
			}
		}
	}
}

// TestRangeEntriesWithScratch: scans that reuse one scratch return what
// scans without it return, and the copies one returned stay as they were
// through the scans after it (a decoded key or aggregate may alias them),
// whether they return values or not, more entries or fewer, or none.
func TestRangeEntriesWithScratch(t *testing.T) {
	st := store.NewStaged("s", store.NewMemory())
	keys := testkeys.Bytes()
	for i, k := range keys {
		st.Put(append([]byte{'w'}, k...), bytes.Repeat([]byte{byte(i)}, i%40))
	}
	var sc rangeScratch
	type scan struct {
		keys, vals [][]byte
		want       []string // the entries as first returned, as text
	}
	text := func(keys, vals [][]byte) []string {
		var out []string
		for i, k := range keys {
			e := string(k)
			if vals != nil {
				e += "=" + string(vals[i])
			}
			out = append(out, e)
		}
		return out
	}
	var scans []scan
	for i, c := range []struct {
		from, to []byte
		values   bool
	}{
		{[]byte{'w'}, []byte{'x'}, true},
		{append([]byte{'w'}, keys[len(keys)/2]...), []byte{'x'}, false},
		{[]byte{'x'}, []byte{'y'}, true}, // none
		{[]byte{'w'}, append([]byte{'w'}, keys[len(keys)/3]...), true},
		{[]byte{'w'}, []byte{'x'}, false},
	} {
		gotK, gotV, err := rangeEntries(st, c.from, c.to, c.values, &sc)
		if err != nil {
			t.Fatal(err)
		}
		wantK, wantV, err := rangeEntries(st, c.from, c.to, c.values, nil)
		if err != nil {
			t.Fatal(err)
		}
		if (gotV != nil) != (c.values && len(wantK) > 0) {
			t.Fatalf("scan %d: values %v, asked for %v, %d entries", i, gotV != nil, c.values, len(wantK))
		}
		if got, want := text(gotK, gotV), text(wantK, wantV); !slices.Equal(got, want) {
			t.Fatalf("scan %d with the scratch: %d entries, without: %d", i, len(got), len(want))
		}
		// The lists are the scratch's, the bytes they point to ours.
		scans = append(scans, scan{slices.Clone(gotK), slices.Clone(gotV), text(gotK, gotV)})
		for j, s := range scans {
			if got := text(s.keys, s.vals); !slices.Equal(got, s.want) {
				t.Fatalf("after scan %d, what scan %d returned changed", i, j)
			}
		}
	}
	if len(scans[0].keys) != len(keys) || len(scans[2].keys) != 0 {
		t.Fatalf("scans of %d and %d entries, want %d and 0", len(scans[0].keys), len(scans[2].keys), len(keys))
	}
}
