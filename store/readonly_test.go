package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestPebbleReadOnly: the read-only open reads what was applied, refuses
// writes, and creates no database where there is none.
func TestPebbleReadOnly(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply([]Write{{Key: []byte("k"), Value: []byte("v")}}, 9); err != nil {
		t.Fatal(err)
	}
	p.Close()
	r, err := OpenPebbleReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v, ok, err := r.Get([]byte("k")); err != nil || !ok || string(v) != "v" {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	if cp, _ := r.Checkpoint(); cp != 9 {
		t.Fatalf("checkpoint %d, want 9", cp)
	}
	if err := r.Apply([]Write{{Key: []byte("k"), Value: []byte("w")}}, 10); err == nil {
		t.Fatal("Apply on a read-only store succeeded")
	}
	if err := r.Wipe(); err == nil {
		t.Fatal("Wipe on a read-only store succeeded")
	}
	missing := filepath.Join(t.TempDir(), "none")
	if _, err := OpenPebbleReadOnly(missing); err == nil {
		t.Fatal("read-only open of a missing database succeeded")
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the read-only open created %s: %v", missing, err)
	}
	empty := t.TempDir()
	if _, err := OpenPebbleReadOnly(empty); err == nil {
		t.Fatal("read-only open of an empty directory succeeded")
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("the read-only open wrote into an empty directory: %v", ents)
	}
}
