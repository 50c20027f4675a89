package store

import (
	"fmt"
	"maps"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// logRec is a changelog record; a nil value is a tombstone.
type logRec struct {
	key   string
	value []byte
}

// replayMatches is the checker of the elision: the committed changelog,
// replayed and compacted, must be what the engine holds, key for key, so a
// restore from it gives the same state; an elided tombstone of a key some
// committed state held would leave the key in the replay.
func replayMatches(log []logRec, e Engine) error {
	replayed := map[string]string{}
	for _, r := range log {
		if r.value == nil {
			delete(replayed, r.key)
		} else {
			replayed[r.key] = string(r.value)
		}
	}
	held := map[string]string{}
	if err := e.Range(nil, nil, func(k, v []byte) error {
		held[string(k)] = string(v)
		return nil
	}); err != nil {
		return err
	}
	if !maps.Equal(replayed, held) {
		return fmt.Errorf("replayed changelog has %d keys, engine %d", len(replayed), len(held))
	}
	return nil
}

// TestStagedElidesWhatNoCommittedStateHeld runs, for keys of every length
// and UUIDs, the shapes a window store sees: a key read (GetForUpdate,
// missing), written and deleted within one transaction, a key written with
// PutNew and deleted, and the shapes that must keep their tombstones: a key
// committed before its delete, a key whose value was flushed before its
// delete in the same transaction, a key written blind (Put without a read)
// and deleted, and a key deleted after an aborted transaction had written
// it. After each commit the replayed changelog must be the engine.
func TestStagedElidesWhatNoCommittedStateHeld(t *testing.T) {
	keys := testkeys.Bytes() // the empty key among them
	for _, c := range engineCases() {
		t.Run(c.name, func(t *testing.T) {
			s := NewStaged("absent", c.open(t))
			var txn, log []logRec
			s.SetChangelog(func(k, v []byte) { txn = append(txn, logRec{string(k), v}) })
			commit := func() {
				t.Helper()
				s.Flush()
				cp := NoCheckpoint
				if len(txn) > 0 {
					cp = int64(len(log) + len(txn) - 1)
				}
				log, txn = append(log, txn...), nil
				mustCommit(t, s, cp)
				if err := replayMatches(log, s.Engine()); err != nil {
					t.Fatal(err)
				}
			}
			tagged := func(tag string, k []byte) []byte { return append([]byte(tag), k...) }
			val := []byte("v")

			// Elided: read and missed, then written and deleted; PutNew.
			for _, k := range keys {
				if _, ok, err := s.GetForUpdate(tagged("r", k)); err != nil || ok {
					t.Fatalf("GetForUpdate(%q) = %v, %v", k, ok, err)
				}
				must(t, s.Put(tagged("r", k), val))
				must(t, s.PutNew(tagged("n", k), val))
			}
			for _, k := range keys {
				must(t, s.Delete(tagged("r", k)))
				must(t, s.Delete(tagged("n", k)))
			}
			// Kept: committed first (c), flushed then deleted (f).
			for _, k := range keys {
				must(t, s.Put(tagged("c", k), val))
			}
			commit()
			if len(log) != len(keys) {
				t.Fatalf("changelog after the first commit: %d records, want %d (the c keys only)", len(log), len(keys))
			}
			for _, k := range keys {
				must(t, s.Delete(tagged("c", k)))
				if _, _, err := s.GetForUpdate(tagged("f", k)); err != nil {
					t.Fatal(err)
				}
				must(t, s.Put(tagged("f", k), val))
			}
			s.Flush()
			for _, k := range keys {
				must(t, s.Put(tagged("b", k), val)) // blind: never read
			}
			for _, k := range keys {
				must(t, s.Delete(tagged("f", k)))
				must(t, s.Delete(tagged("b", k)))
			}
			commit()
			// c: a tombstone each; f: a value and a tombstone; b: a tombstone.
			if got, want := len(log), len(keys)*5; got != want {
				t.Fatalf("changelog after the second commit: %d records, want %d", got, want)
			}
			// A transaction that aborts leaves nothing to elide wrongly:
			// its writes are gone, and so are its records.
			for _, k := range keys {
				if _, _, err := s.GetForUpdate(tagged("a", k)); err != nil {
					t.Fatal(err)
				}
				must(t, s.Put(tagged("a", k), val))
			}
			s.Flush()
			s.Abort()
			txn = nil
			for _, k := range keys {
				must(t, s.PutNew(tagged("a", k), val))
			}
			commit()
			for _, k := range keys {
				must(t, s.Delete(tagged("a", k)))
			}
			commit()
			if got, want := len(log), len(keys)*7; got != want {
				t.Fatalf("changelog after the abort: %d records, want %d", got, want)
			}
		})
	}
}

// TestReplayMatchesCatchesALostTombstone is the checker's negative control:
// a changelog whose tombstone of a committed key was elided replays to a
// state the engine does not hold.
func TestReplayMatchesCatchesALostTombstone(t *testing.T) {
	e := NewMemory()
	mustApply(t, e, 1, "a", "1")
	log := []logRec{{"a", []byte("1")}}
	if err := replayMatches(log, e); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply([]Write{{Key: []byte("a")}}, 2); err != nil {
		t.Fatal(err)
	}
	if err := replayMatches(log, e); err == nil {
		t.Fatal("a changelog without the delete of a committed key passed the check")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestStagedCompleteAnswersMisses: a stage that has an entry for every key
// its engine holds (it started over an empty engine) answers a read of a
// key it lacks without the engine, also after a commit over its read
// cache's bound whose committed keys fit in it; once they do not, or after
// an abort over a non-empty engine, it asks the engine again, and it reads
// right whichever way it answers.
func TestStagedCompleteAnswersMisses(t *testing.T) {
	keys := testkeys.Bytes()
	e := &countingEngine{Engine: NewMemory()}
	// A bound the committed c keys fit in, and the t keys overflow.
	bound := 1024
	for _, k := range keys {
		bound += 2 + len(k) + entryOverhead
	}
	s := NewStaged("complete", e, WithReadCache(bound))
	reads := func(tag string, want bool) int {
		t.Helper()
		before := e.gets
		for _, k := range keys {
			v, ok, err := s.Get(append([]byte(tag), k...))
			if err != nil || ok != want || ok && string(v) != "v" {
				t.Fatalf("Get(%s%q) = %q, %v, %v; want found %v", tag, k, v, ok, err, want)
			}
		}
		return e.gets - before
	}
	if n := reads("a", false); n != 0 {
		t.Fatalf("misses over an empty engine: %d engine reads, want 0", n)
	}
	// Committed keys that fit, beside many more opened and closed.
	for _, k := range keys {
		must(t, s.Put(append([]byte("c"), k...), []byte("v")))
		for j := range 8 {
			tmp := append([]byte{'t', byte(j)}, k...)
			if _, _, err := s.GetForUpdate(tmp); err != nil {
				t.Fatal(err)
			}
			must(t, s.Put(tmp, make([]byte, 64)))
			must(t, s.Delete(tmp))
		}
	}
	s.Flush()
	mustCommit(t, s, 0)
	if n := reads("c", true) + reads("b", false); n != 0 {
		t.Fatalf("after a commit over the bound whose kept keys fit: %d engine reads, want 0", n)
	}
	// An abort forgets the entries; the engine is not empty, so the
	// stage asks it again.
	must(t, s.Put([]byte("x"), []byte("v")))
	s.Abort()
	if n := reads("c", true); n != len(keys) {
		t.Fatalf("after an abort: %d engine reads, want %d", n, len(keys))
	}
	// Committed keys that outgrow the bound, in a complete stage: it
	// drops them and must ask the engine for them from now on.
	e = &countingEngine{Engine: NewMemory()}
	s = NewStaged("complete", e, WithReadCache(bound))
	if n := reads("a", false); n != 0 {
		t.Fatalf("misses over an empty engine: %d engine reads, want 0", n)
	}
	for _, k := range keys {
		for _, tag := range []string{"d", "e", "f"} {
			must(t, s.Put(append([]byte(tag), k...), []byte("v")))
		}
	}
	s.Flush()
	mustCommit(t, s, 1)
	for _, tag := range []string{"d", "e", "f"} {
		if n := reads(tag, true); n != len(keys) {
			t.Fatalf("after a commit whose keys outgrow the bound: %d engine reads of %s keys, want %d", n, tag, len(keys))
		}
	}
	// A stage over an engine written before its first read asks it.
	e2 := &countingEngine{Engine: NewMemory()}
	mustApply(t, e2, 0, "k", "v")
	s2 := NewStaged("restored", e2)
	if v, ok, err := s2.Get([]byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("restored key: %q, %v, %v", v, ok, err)
	}
	if e2.gets != 1 {
		t.Fatalf("a restored engine: %d engine reads, want 1", e2.gets)
	}
}

// TestStagedLoggedSaysWhatTheChangelogHeard: Logged finds, in a range, a
// key the engine holds, a key written and flushed, and a key written blind
// (Put: the stage does not know the engine lacks it); not a PutNew before
// the flush, whose delete would be silent, nor a committed key deleted
// since, nor one in a range dropped since, nor any key outside the range.
// Keys of every length and UUIDs, on both engines.
func TestStagedLoggedSaysWhatTheChangelogHeard(t *testing.T) {
	keys := testkeys.Bytes()
	forEachEngine(t, func(t *testing.T, e Engine) {
		s := NewStaged("logged", e)
		s.SetChangelog(func(k, v []byte) {})
		s.SetRangeChangelog(func(start, end []byte) {})
		// Each case's keys in a range of their own, under p and its letter.
		in := func(c byte, k []byte) []byte { return append([]byte{'p', c, '/'}, k...) }
		span := func(c byte) (start, end []byte) { return []byte{'p', c}, []byte{'p', c + 1} }
		for _, k := range keys {
			for _, c := range []byte{'c', 'd', 'r'} { // committed; deleted later; dropped later
				if err := s.Put(in(c, k), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.Flush()
		if err := s.Commit(NoCheckpoint); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			must(t, s.PutNew(in('n', k), []byte("v")))             // new, not flushed
			must(t, s.PutNew(in('f', k), []byte("v")))             // new, flushed below
			must(t, s.Put(in('b', k), []byte("v")))                // blind
			must(t, s.Delete(in('d', k)))                          // committed, deleted
			must(t, s.Put(append([]byte{'q'}, k...), []byte("v"))) // outside every range
		}
		start, end := span('r')
		must(t, s.DropRange(start, end))
		logged := func(c byte) bool {
			t.Helper()
			start, end := span(c)
			ok, err := s.Logged(start, end)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		want := map[byte]bool{'c': true, 'b': true, 'n': false, 'd': false, 'r': false, 'f': false, 'z': false}
		for c, w := range want {
			if got := logged(c); got != w {
				t.Errorf("before the flush, range %c: Logged = %v, want %v", c, got, w)
			}
		}
		s.Flush()
		want['f'], want['n'] = true, true // emitted now
		for c, w := range want {
			if got := logged(c); got != w {
				t.Errorf("after the flush, range %c: Logged = %v, want %v", c, got, w)
			}
		}
	})
}
