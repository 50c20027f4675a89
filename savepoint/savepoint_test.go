package savepoint_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/store"
)

// write makes a savepoint of one store with two partitions holding keys.
func write(t *testing.T, dir string, keys [][]byte) *savepoint.Manifest {
	t.Helper()
	w, err := savepoint.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := savepoint.Store{Name: "counts", Layout: "key-value", KeySerde: "k", ValueSerde: "v", Partitions: 2, Changelog: "app-counts-changelog"}
	for p := int32(0); p < 2; p++ {
		pw, err := w.Part("app", savepoint.TaskID(0, p), "counts", p)
		if err != nil {
			t.Fatal(err)
		}
		var ws []store.Write
		for i, k := range keys {
			if int32(i%2) == p {
				ws = append(ws, store.Write{Key: k, Value: []byte(fmt.Sprint(i))})
			}
		}
		if err := pw.Engine().Apply(ws, int64(len(ws))-1); err != nil {
			t.Fatal(err)
		}
		part, err := pw.Close()
		if err != nil {
			t.Fatal(err)
		}
		part.ChangelogEnd = int64(len(ws))
		st.Parts = append(st.Parts, part)
	}
	m := &savepoint.Manifest{ID: "sp1", Application: "app", Stores: []savepoint.Store{st},
		Inputs: []savepoint.Input{{Topic: "in", Partitions: 2, Offsets: []savepoint.Offset{{Partition: 0, Offset: 5}, {Partition: 1, Offset: 7}}}}}
	if err := w.Commit(m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	keys := testkeys.Bytes()
	write(t, dir, keys)
	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Verify(); err != nil {
		t.Fatal(err)
	}
	m := sp.Manifest()
	if m.Format != savepoint.Format || m.Store("counts").Records != int64(len(keys)) || m.Input("in").Offsets[1].Offset != 7 {
		t.Fatalf("manifest read back wrong: %+v", m)
	}
	seen := map[string]bool{}
	for p := int32(0); p < 2; p++ {
		if err := sp.Each("counts", p, func(k, v []byte) error { seen[string(k)] = true; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys {
		if !seen[string(k)] {
			t.Fatalf("key %q not read back", k)
		}
	}
	// No partial directory is left beside it.
	ents, _ := os.ReadDir(filepath.Dir(dir))
	if len(ents) != 1 {
		t.Fatalf("beside the savepoint: %v", ents)
	}
}

func TestRefusals(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sp")
	write(t, dir, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	if _, err := savepoint.Create(dir); !errors.Is(err, savepoint.ErrExists) {
		t.Fatalf("Create over an existing savepoint: %v", err)
	}

	// A manifest of another format.
	other := filepath.Join(root, "other")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, savepoint.ManifestFile), []byte(`{"format": 99, "application": "app"}`), 0o644)
	if _, err := savepoint.Open(other); !errors.Is(err, savepoint.ErrFormat) || !strings.Contains(err.Error(), "format 99") {
		t.Fatalf("format 99: %v", err)
	}
	// No manifest.
	if _, err := savepoint.Open(root); !errors.Is(err, savepoint.ErrIncomplete) {
		t.Fatalf("no manifest: %v", err)
	}
	// A store copy missing.
	os.RemoveAll(filepath.Join(dir, "app", "0_1"))
	if _, err := savepoint.Open(dir); !errors.Is(err, savepoint.ErrIncomplete) || !strings.Contains(err.Error(), "0_1") {
		t.Fatalf("missing part: %v", err)
	}
}

// TestVerifyCatchesChange is the checksum's negative control: a copy with
// one value changed, and one with a record more, are both caught.
func TestVerifyCatchesChange(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   []store.Write
	}{
		{"changed value", []store.Write{{Key: []byte("a"), Value: []byte("changed")}}},
		{"extra record", []store.Write{{Key: []byte("zz"), Value: []byte("1")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sp")
			write(t, dir, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
			sp, err := savepoint.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := sp.Verify(); err != nil {
				t.Fatalf("before the change: %v", err)
			}
			eng, err := store.OpenPebble(filepath.Join(dir, "app", "0_0", "counts"))
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Apply(tc.ws, store.NoCheckpoint); err != nil {
				t.Fatal(err)
			}
			eng.Close()
			if err := sp.Verify(); !errors.Is(err, savepoint.ErrCorrupt) || !strings.Contains(err.Error(), "0_0") {
				t.Fatalf("after the change: %v", err)
			}
		})
	}
}

// TestAdoptEqualsPart: a store another process wrote under Staging (here a
// Pebble checkpoint, with its meta key and a different checkpoint) is
// adopted with the count and checksum Part gives the same entries, and
// the savepoint verifies; Discard removes one not adopted. Control: an
// adopted store with one entry more has another checksum.
func TestAdoptEqualsPart(t *testing.T) {
	keys := testkeys.Bytes()
	want := write(t, filepath.Join(t.TempDir(), "ref"), keys).Stores[0].Parts[0]

	src, err := store.OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ws []store.Write
	for i, k := range keys {
		if i%2 == 0 {
			ws = append(ws, store.Write{Key: k, Value: []byte(fmt.Sprint(i))})
		}
	}
	if err := src.Apply(ws, 999); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sp")
	w, err := savepoint.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	rel := savepoint.PartDir("app", savepoint.TaskID(0, 0), "counts")
	if _, err := src.CheckpointTo(filepath.Join(w.Staging(), filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
	got, err := w.Adopt(rel, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Records != want.Records || got.Checksum != want.Checksum || got.Dir != want.Dir {
		t.Fatalf("adopted %+v, Part wrote %+v", got, want)
	}
	// Control: one more entry is seen.
	extra := savepoint.PartDir("app", savepoint.TaskID(0, 1), "counts")
	if err := src.Apply([]store.Write{{Key: []byte("one more"), Value: []byte("x")}}, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := src.CheckpointTo(filepath.Join(w.Staging(), filepath.FromSlash(extra))); err != nil {
		t.Fatal(err)
	}
	if more, err := w.Adopt(extra, 1); err != nil || more.Checksum == want.Checksum || more.Records != want.Records+1 {
		t.Fatalf("control: a store with one entry more adopted as %+v (%v)", more, err)
	}
	if err := w.Discard(extra); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(w.Staging(), filepath.FromSlash(extra))); !os.IsNotExist(err) {
		t.Fatalf("discarded store still there: %v", err)
	}
	got.ChangelogEnd = 1001
	m := &savepoint.Manifest{ID: "sp2", Application: "app", Stores: []savepoint.Store{{Name: "counts", Layout: "key-value",
		Partitions: 1, Changelog: "app-counts-changelog", Parts: []savepoint.Part{got}}}}
	if err := w.Commit(m); err != nil {
		t.Fatal(err)
	}
	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Verify(); err != nil {
		t.Fatal(err)
	}
}
