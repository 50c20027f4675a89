package state

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/filesnap"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// writeStore writes kvs into a fresh Pebble store of task under app, with
// checkpoint cp, as an instance leaves it.
func writeStore(t *testing.T, app, task, name string, kvs map[string][]byte, cp int64) string {
	t.Helper()
	dir := statedir.Store(app, task, name)
	if task == "global" {
		dir = statedir.Global(app, name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	eng, err := store.OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ws []store.Write
	for k, v := range kvs {
		ws = append(ws, store.Write{Key: []byte(k), Value: v})
	}
	if err := eng.Apply(ws, cp); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rawKeys are keys of every length, UUIDs and bytes that are not UTF-8.
func rawKeys() map[string][]byte {
	kvs := map[string][]byte{}
	for i, k := range testkeys.Bytes() {
		kvs[string(k)] = []byte(fmt.Sprint(i))
	}
	for _, k := range [][]byte{{0xff}, {0xc3, 0x28}, bytes.Repeat([]byte{0x80}, 200)} {
		kvs[string(k)] = []byte{} // an empty value (nil would be a delete)
	}
	return kvs
}

// TestRawRecords: every key written, of every shape, comes back with its
// value from the partition it was written to; Get finds each; counts and
// checkpoints are the stores'.
func TestRawRecords(t *testing.T) {
	root := t.TempDir()
	app := statedir.App(root, "app")
	kvs := rawKeys()
	half := map[string][]byte{}
	rest := map[string][]byte{}
	i := 0
	for k, v := range kvs {
		if i%2 == 0 {
			half[k] = v
		} else {
			rest[k] = v
		}
		i++
	}
	writeStore(t, app, "0_0", "raw", half, 41)
	writeStore(t, app, "0_1", "raw", rest, store.NoCheckpoint)
	writeStore(t, app, "global", "customers", map[string][]byte{"c": []byte("x")}, 7)
	for _, dir := range []string{root, app} { // the root and the application's directory
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		infos, err := r.Stores()
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"app global -1 customers global table 1 7", "app 0_0 0 raw unknown " + fmt.Sprint(len(half)) + " 41", "app 0_1 1 raw unknown " + fmt.Sprint(len(rest)) + " -1"}
		if len(infos) != 3 {
			t.Fatalf("%d stores, want 3: %+v", len(infos), infos)
		}
		for i, s := range infos {
			if got := fmt.Sprintf("%s %s %d %s %s %d %d", s.Application, s.Task, s.Partition, s.Store, s.Layout, s.Records, s.ChangelogOffset); got != want[i] || s.SizeBytes <= 0 {
				t.Errorf("store %d: %q (%d bytes), want %q", i, got, s.SizeBytes, want[i])
			}
		}
		got := map[string][]byte{}
		if err := r.Records("raw", func(rec Record) error {
			if _, dup := got[string(rec.Key)]; dup {
				return fmt.Errorf("key %x twice", rec.Key)
			}
			src := half
			if rec.Partition == 1 {
				src = rest
			}
			if v, ok := src[string(rec.Key)]; !ok || !bytes.Equal(v, rec.Value) {
				return fmt.Errorf("key %x in partition %d: %x, want %x (present %v)", rec.Key, rec.Partition, rec.Value, v, ok)
			}
			got[string(rec.Key)] = rec.Value
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(kvs) {
			t.Fatalf("read %d keys, wrote %d", len(got), len(kvs))
		}
		for k, v := range kvs {
			recs, err := r.Get("raw", []byte(k))
			if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Value, v) {
				t.Fatalf("Get(%x) = %v, %v; want %x", k, recs, err, v)
			}
		}
		if _, err := r.Get("raw", []byte("absent")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of an absent key: %v", err)
		}
		if err := r.Records("nope", func(Record) error { return nil }); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "have customers, raw") {
			t.Fatalf("Records of a missing store: %v", err)
		}
		r.Close()
	}
}

// TestReadsWriteNothing: Open, Stores, Records and Get leave every file
// of the directory as it was; the negative control, a read-write open,
// changes them.
func TestReadsWriteNothing(t *testing.T) {
	root := t.TempDir()
	app := statedir.App(root, "app")
	dir := writeStore(t, app, "0_0", "raw", rawKeys(), 3)
	if _, err := statedir.InstanceID(app); err != nil {
		t.Fatal(err)
	}
	before := files(t, root)
	r, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Stores(); err != nil {
		t.Fatal(err)
	}
	if err := r.Records("raw", func(Record) error { return nil }); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if diff := filesnap.Diff(before, files(t, root)); diff != "" {
		t.Fatalf("the reader changed the directory: %s", diff)
	}
	eng, err := store.OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	if filesnap.Diff(before, files(t, root)) == "" {
		t.Fatal("a read-write open changed nothing the comparison sees")
	}
}

func files(t *testing.T, dir string) filesnap.Snapshot {
	t.Helper()
	s, err := filesnap.Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunningInstanceRefused: a held application lock refuses Open; the
// lock released, Open succeeds and holds it in turn, so no instance
// starts under the reader.
func TestRunningInstanceRefused(t *testing.T) {
	root := t.TempDir()
	app := statedir.App(root, "app")
	writeStore(t, app, "0_0", "raw", rawKeys(), 3)
	unlock, err := statedir.Lock(app)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, app} {
		if _, err := Open(dir); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), app) {
			t.Fatalf("Open(%s) under the lock: %v, want ErrInUse naming %s", dir, err, app)
		}
	}
	unlock()
	r, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := statedir.Lock(app); !errors.Is(err, statedir.ErrInUse) {
		t.Fatalf("an instance could lock the directory under the reader: %v", err)
	}
	r.Close()
	r.Close() // idempotent
	unlock, err = statedir.Lock(app)
	if err != nil {
		t.Fatalf("lock after Close: %v", err)
	}
	unlock()
}

// TestWindowsTyped: the windows written through internal/layout come back
// through Windows, index entries, the time state and purged windows left
// out; keys of every length.
func TestWindowsTyped(t *testing.T) {
	root := t.TempDir()
	app := statedir.App(root, "app")
	kvs := map[string][]byte{string(layout.TimeStateKey): []byte("time state")}
	type w struct {
		key        string
		start, end int64
		n          int64
	}
	var want []w
	for i, k := range testkeys.Lengths() {
		for _, start := range []int64{-60000, 0, int64(i+1) * 60000} {
			key := layout.WindowKey(nil, []byte(k), start)
			agg, _ := serde.Int64.Encode(int64(i) + start)
			kvs[string(key)] = layout.AppendWindowValue(nil, layout.WindowValue{End: start + 60000, Count: 1, Records: true}, agg)
			kvs[string(layout.IndexKey(layout.WindowFire, start+60000, key))] = layout.IndexValue
			want = append(want, w{k, start, start + 60000, int64(i) + start})
		}
	}
	// A purged window: kept for its bookkeeping, holding nothing.
	kvs[string(layout.WindowKey(nil, []byte("purged"), 0))] = layout.AppendWindowValue(nil, layout.WindowValue{End: 10}, nil)
	writeStore(t, app, "0_0", "win", kvs, 1)
	r, err := Open(app)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[w]int{}
	if err := Windows(r, "win", serde.String, serde.Int64, func(x Window[string, int64]) error {
		got[w{x.Key, x.Start, x.End, x.Value}]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, x := range want {
		if got[x] != 1 {
			t.Fatalf("window %+v read %d times", x, got[x])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d windows read, %d written", len(got), len(want))
	}
	// Read as key-value, the same store's keys do not decode as its
	// windows: the layout decides.
	if err := KeyValues(r, "win", serde.String, serde.Int64, func(KeyValue[string, int64]) error { return nil }); err == nil {
		t.Fatal("a window store read as key-value decoded")
	}
}

// TestCorruptStore: a damaged store is ErrCorrupt naming its directory and
// the damaged file.
func TestCorruptStore(t *testing.T) {
	root := t.TempDir()
	app := statedir.App(root, "app")
	dir := writeStore(t, app, "0_0", "raw", rawKeys(), 3)
	ms, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(ms) != 1 {
		t.Fatalf("manifests %v", ms)
	}
	b, _ := os.ReadFile(ms[0])
	for i := range b {
		b[i] = ^b[i]
	}
	if err := os.WriteFile(ms[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Stores()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), filepath.Base(ms[0])) {
		t.Fatalf("Stores of a corrupt store: %v, want ErrCorrupt naming %s", err, ms[0])
	}
}

func TestNotAStateDir(t *testing.T) {
	empty := t.TempDir()
	if err := os.Mkdir(filepath.Join(empty, "not-an-app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty); !errors.Is(err, ErrNotStateDir) {
		t.Fatalf("Open of a dir without state: %v", err)
	}
	if _, err := Open(filepath.Join(empty, "missing")); err == nil {
		t.Fatal("Open of a missing dir succeeded")
	}
	for _, name := range []string{"0_0", "12_345"} {
		if _, _, ok := parseTask(name); !ok {
			t.Errorf("parseTask(%q) refused", name)
		}
	}
	for _, name := range []string{"0", "_0", "0_", "a_0", "0_-1", "01_0", "0_1_2", "global"} {
		if _, _, ok := parseTask(name); ok {
			t.Errorf("parseTask(%q) accepted", name)
		}
	}
}
