package store

import "testing"

// TestForwardedIsTheValueBeforeTheHeldUpdate: a held key reads as it was
// before its first held write since the last TakeHeld (absent included),
// through a rollback of a later write and across a commit; a key without a
// held update reads as Get does.
func TestForwardedIsTheValueBeforeTheHeldUpdate(t *testing.T) {
	s := NewStaged("t", NewMemory())
	want := func(key, v string, ok bool) {
		t.Helper()
		got, gotOK, err := s.Forwarded([]byte(key))
		if err != nil || gotOK != ok || string(got) != v {
			t.Fatalf("Forwarded(%q) = %q, %v, %v; want %q, %v", key, got, gotOK, err, v, ok)
		}
	}
	take := func() {
		t.Helper()
		if err := s.TakeHeld(func(Held) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Put([]byte("plain"), []byte("p1")))
	want("plain", "p1", true)
	want("none", "", false)

	must(s.PutHeld([]byte("a"), []byte("a1"), 1, nil))
	want("a", "", false) // absent before its first held write
	must(s.PutHeld([]byte("a"), []byte("a2"), 2, nil))
	want("a", "", false)
	take()
	want("a", "a2", true)
	must(s.Commit(1))
	want("a", "a2", true)

	must(s.PutHeld([]byte("a"), []byte("a3"), 3, nil))
	s.Mark()
	must(s.PutHeld([]byte("a"), nil, 4, nil))
	want("a", "a2", true)
	s.Rollback()
	want("a", "a2", true)
	take()
	want("a", "a3", true)

	must(s.PutHeld([]byte("a"), nil, 5, nil))
	want("a", "a3", true)
	s.Abort()
	want("a", "a2", true) // the committed value, nothing held
}
