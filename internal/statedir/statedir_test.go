package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLayout(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{App("/var/sluice", "my-app"), "/var/sluice/my-app"},
		{Store("/var/sluice/my-app", "0_3", "counts"), "/var/sluice/my-app/0_3/counts"},
		{Global("/var/sluice/my-app", "customers"), "/var/sluice/my-app/global/customers"},
		{JoinMemo("/var/sluice/my-app"), "/var/sluice/my-app/join-metadata"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// TestCheckAppID: only an id that App turns into a directory of its own,
// directly under the root, passes.
func TestCheckAppID(t *testing.T) {
	for _, id := range []string{"app", "my-app", "a.b", "...", ".app", "app.", "-", "a b", "ü"} {
		if err := CheckAppID(id); err != nil {
			t.Errorf("CheckAppID(%q): %v", id, err)
		}
		if filepath.Dir(App("/root", id)) != "/root" {
			t.Errorf("App(/root, %q) = %q is not directly under the root", id, App("/root", id))
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "/", "/abs", `a\b`, "a/", "./a", "a/..", "../a"} {
		if err := CheckAppID(id); !errors.Is(err, ErrNotADirName) {
			t.Errorf("CheckAppID(%q) = %v, want ErrNotADirName", id, err)
		}
	}
}

// TestLockExcludes: a second Lock, in this process as in another (flock
// locks belong to the open file), and LockExisting are refused while the
// lock is held, and succeed once it is released.
func TestLockExcludes(t *testing.T) {
	dir := t.TempDir()
	unlock, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Lock: %v, want ErrInUse", err)
	}
	if _, err := LockExisting(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("LockExisting under Lock: %v, want ErrInUse", err)
	}
	unlock()
	unlock2, err := LockExisting(dir)
	if err != nil {
		t.Fatalf("LockExisting after unlock: %v", err)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrInUse) {
		t.Fatalf("Lock under LockExisting: %v, want ErrInUse", err)
	}
	unlock2()
	unlock3, err := Lock(dir)
	if err != nil {
		t.Fatalf("Lock after both released: %v", err)
	}
	unlock3()
}

// TestLockExistingCreatesNothing: a tool about to delete a directory that
// does not exist (or has no lock file) must not create it.
func TestLockExistingCreatesNothing(t *testing.T) {
	root := t.TempDir()
	missing := App(root, "never-ran")
	unlock, err := LockExisting(missing)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LockExisting created %s: %v", missing, err)
	}
	empty := App(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	unlock, err = LockExisting(empty)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Stat(filepath.Join(empty, lockFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LockExisting created the lock file: %v", err)
	}
	if _, err := Lock(filepath.Join(root, "no-such-dir")); err == nil || errors.Is(err, ErrInUse) {
		t.Fatalf("Lock in a missing directory: %v, want an error that is not ErrInUse", err)
	}
}

func TestInstanceIDIsKept(t *testing.T) {
	dir := t.TempDir()
	id, err := InstanceID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 16 {
		t.Fatalf("instance id %q, want 16 hex digits", id)
	}
	again, err := InstanceID(dir)
	if err != nil || again != id {
		t.Fatalf("second InstanceID = %q, %v; want %q", again, err, id)
	}
	if other, _ := InstanceID(t.TempDir()); other == id {
		t.Fatalf("two directories share instance id %q", id)
	}
}
