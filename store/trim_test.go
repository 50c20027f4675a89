package store

import (
	"fmt"
	"testing"
)

// TestCommitTrimsLargeTransaction checks that a stage lets go of what a
// transaction far larger than its read cache grew, and still reads every
// key right after: kept, the largest transaction the memory budget lets
// through would stay allocated between commits, outside the budget's
// count (processor.MemoryBudget).
func TestCommitTrimsLargeTransaction(t *testing.T) {
	e, err := OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s := NewStaged("t", e, WithReadCache(64<<10))
	var emitted int
	s.SetChangelog(func(_, _ []byte) { emitted++ })
	const n = 50_000
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
		keep := max(1024, s.cacheLimit/entryOverhead)
		caps := map[string]int{"entries": cap(s.entries), "dirty": cap(s.dirty), "pending": cap(s.pending),
			"held": cap(s.held), "taken": cap(s.taken), "writes": cap(s.writes), "applied": cap(s.applied),
			"byPrefix": cap(s.byPrefix), "index (peak)": s.indexPeak}
		for what, c := range caps {
			if c > 2*keep {
				t.Errorf("round %d: after the commit the stage's %s keeps room for %d, want at most %d", round, what, c, 2*keep)
			}
		}
		for _, i := range []int{0, n / 2, n - 1} {
			k := fmt.Appendf(nil, "key-%06d", i)
			v, ok, err := s.Get(k)
			if want := fmt.Sprintf("v%d-%d", round, i); err != nil || !ok || string(v) != want {
				t.Fatalf("round %d: Get(%s) = %q, %v, %v; want %q", round, k, v, ok, err, want)
			}
		}
	}
	if emitted != 2*n {
		t.Errorf("changelog records = %d, want %d", emitted, 2*n)
	}
}
