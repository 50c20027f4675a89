package filesnap

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestDiff: a snapshot equals itself, and sees a changed content, a
// touched time, a new file and a removed one.
func TestDiff(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	take := func() Snapshot {
		s, err := Take(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s0 := take()
	if d := Diff(s0, take()); d != "" {
		t.Fatalf("unchanged dir: %s", d)
	}
	fi, _ := os.Stat(f)
	if err := os.WriteFile(f, []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(f, fi.ModTime(), fi.ModTime()) // same size and time: only the content differs
	if Diff(s0, take()) == "" {
		t.Fatal("missed a changed content")
	}
	_ = os.Chtimes(f, fi.ModTime(), fi.ModTime().Add(time.Second))
	s1 := take()
	_ = os.WriteFile(filepath.Join(dir, "b"), nil, 0o644)
	if Diff(s1, take()) == "" {
		t.Fatal("missed a new file")
	}
	s2 := take()
	_ = os.Remove(filepath.Join(dir, "b"))
	if Diff(s2, take()) == "" {
		t.Fatal("missed a removed file")
	}
}
