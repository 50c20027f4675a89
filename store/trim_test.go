package store

import (
	"fmt"
	"testing"
)

// TestCommitTrimsLargeTransaction checks that a stage lets go of what a
// transaction far larger than its read cache grew once the transactions
// after it are small, and still reads every key right after: kept, the
// largest transaction the memory budget lets through would stay allocated
// between commits, outside the budget's count. While the transactions stay
// large (a backlog), it keeps the room, so that the next one does not
// regrow its slices doubling after doubling.
func TestCommitTrimsLargeTransaction(t *testing.T) {
	e, err := OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s := NewStaged("t", e, WithReadCache(64<<10))
	var emitted int
	s.SetChangelog(func(_, _ []byte) { emitted++ })
	keep := max(1024, s.cacheLimit/entryOverhead)
	caps := func() map[string]int {
		return map[string]int{"entries": cap(s.entries), "dirty": cap(s.dirty), "pending": cap(s.pending),
			"held": cap(s.held), "taken": cap(s.taken), "writes": cap(s.writes), "applied": cap(s.applied),
			"byPrefix": cap(s.byPrefix), "index (peak)": s.indexPeak}
	}
	const n = 50_000
	var kept int
	for round := range 2 {
		for i := range n {
			k := fmt.Appendf(nil, "key-%06d", i)
			if err := s.PutHeld(k, fmt.Appendf(nil, "v%d-%d", round, i), int64(i), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.TakeHeld(func(Held) error { return nil }); err != nil {
			t.Fatal(err)
		}
		s.Flush()
		if err := s.Commit(int64(round)); err != nil {
			t.Fatal(err)
		}
		c := caps()
		if c["entries"] < n || c["applied"] < n {
			t.Errorf("round %d: after a transaction of %d keys the stage keeps room for %d entries and %d applied writes: the next one regrows them", round, n, c["entries"], c["applied"])
		}
		if round == 0 {
			kept = c["entries"]
		} else if c["entries"] != kept {
			t.Errorf("the second transaction of %d keys regrew the entries from room for %d to %d", n, kept, c["entries"])
		}
		for _, i := range []int{0, n / 2, n - 1} {
			k := fmt.Appendf(nil, "key-%06d", i)
			v, ok, err := s.Get(k)
			if want := fmt.Sprintf("v%d-%d", round, i); err != nil || !ok || string(v) != want {
				t.Fatalf("round %d: Get(%s) = %q, %v, %v; want %q", round, k, v, ok, err, want)
			}
		}
	}
	// Small transactions after them: within 40 commits (the room
	// decays by an eighth a commit) it is let go.
	for i := range 40 {
		if err := s.Put([]byte("small"), fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
		s.Flush()
		if err := s.Commit(int64(2 + i)); err != nil {
			t.Fatal(err)
		}
	}
	for what, c := range caps() {
		if c > 2*keep {
			t.Errorf("after 40 small transactions the stage's %s keeps room for %d, want at most %d", what, c, 2*keep)
		}
	}
	if emitted != 2*n+40 {
		t.Errorf("changelog records = %d, want %d", emitted, 2*n+40)
	}
}
