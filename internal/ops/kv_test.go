package ops

import (
	"bytes"
	"errors"
	"sort"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// TestKVEveryKeyLength writes keys of every encoded length (and UUIDs)
// through KV, reads them back with each read mode, and checks the store's
// bytes are the serdes' encodings with no prefix (layout/kv.go), before
// and after the commit.
func TestKVEveryKeyLength(t *testing.T) {
	c := newTableCtx(t, false, "kv")
	s := KVStore[string, int64]{Name: "kv", Key: serde.String, Value: serde.Int64}
	kv := s.Open(c)
	keys := testkeys.All()
	for i, k := range keys {
		if err := kv.Put(k, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for i, k := range keys {
			for mode, get := range map[string]func(string) (int64, bool, error){"Get": kv.Get, "GetForUpdate": kv.GetForUpdate, "Forwarded": kv.Forwarded} {
				v, ok, err := get(k)
				if err != nil || !ok || v != int64(i) {
					t.Fatalf("%s: %s of a key of %d bytes = %d, %v, %v; want %d", when, mode, len(k), v, ok, err, i)
				}
			}
			want, _ := serde.Int64.Encode(int64(i))
			raw, ok, err := c.stores["kv"].Get([]byte(k))
			if err != nil || !ok || !bytes.Equal(raw, want) {
				t.Fatalf("%s: stored bytes of a key of %d bytes = %x, %v, %v; want %x under the key's own bytes", when, len(k), raw, ok, err, want)
			}
		}
	}
	check("staged")
	c.commit(t, 1)
	check("committed")
	if _, ok, err := kv.Get("absent key"); ok || err != nil {
		t.Fatalf("absent key: %v, %v", ok, err)
	}
}

// TestKVRangeIsByteOrder ranges over keys of every length: the entries
// come in byte order of their encodings, and [from, to) bounds them.
func TestKVRangeIsByteOrder(t *testing.T) {
	c := newTableCtx(t, false, "kv")
	kv := KVStore[[]byte, int64]{Name: "kv", Key: serde.Bytes, Value: serde.Int64}.Open(c)
	keys := testkeys.Bytes()
	for i, k := range keys {
		if err := kv.Put(k, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.commit(t, 1)
	// Some staged on top of the committed ones: Range merges both.
	extra := [][]byte{{0xff, 0xff}, {0x00}, []byte("m")}
	for _, k := range extra {
		if err := kv.Put(k, -1); err != nil {
			t.Fatal(err)
		}
	}
	all := append(append([][]byte(nil), keys...), extra...)
	sort.Slice(all, func(i, j int) bool { return bytes.Compare(all[i], all[j]) < 0 })
	var got [][]byte
	if err := kv.Range(nil, nil, func(k []byte, _ int64) error { got = append(got, bytes.Clone(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(all) {
		t.Fatalf("Range gave %d keys, want %d", len(got), len(all))
	}
	for i := range all {
		if !bytes.Equal(got[i], all[i]) {
			t.Fatalf("key %d: %x, want %x", i, got[i], all[i])
		}
	}
	from, to := all[10], all[40]
	n := 0
	err := kv.Range(&from, &to, func(k []byte, _ int64) error {
		if bytes.Compare(k, from) < 0 || bytes.Compare(k, to) >= 0 {
			t.Fatalf("%x outside [%x, %x)", k, from, to)
		}
		n++
		return nil
	})
	if err != nil || n != 30 {
		t.Fatalf("[from, to) gave %d keys, %v; want 30", n, err)
	}
	stop := errors.New("stop")
	if err := kv.Range(nil, nil, func([]byte, int64) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Range returned %v, want fn's error", err)
	}
}

// putHeld holds an update of k as a table node does: GetForUpdate, then
// WriteUpdate.
func putHeld(kv *KV[string, int64], k string, v int64, has bool, ts int64, hs []exec.Header) error {
	if _, _, err := kv.GetForUpdate(k); err != nil {
		return err
	}
	return kv.WriteUpdate(v, has, true, ts, hs)
}

// TestKVWriteUpdateNeedsItsRead: WriteUpdate writes the key its
// GetForUpdate encoded, so it refuses to run without that read or after
// another call on the store, which may have overwritten the encoding,
// instead of writing whichever key the buffer holds.
func TestKVWriteUpdateNeedsItsRead(t *testing.T) {
	c := newTableCtx(t, false, "kv")
	kv := KVStore[string, int64]{Name: "kv", Key: serde.String, Value: serde.Int64}.Open(c)
	if err := kv.WriteUpdate(1, true, false, 0, nil); err == nil {
		t.Fatal("WriteUpdate with no read before it succeeded")
	}
	for _, between := range []func() error{
		func() error { _, _, err := kv.Get("b"); return err },
		func() error { return kv.Put("b", 2) },
		func() error { return kv.Delete("b") },
		func() error { return kv.WriteUpdate(3, true, false, 0, nil) },
	} {
		if _, _, err := kv.GetForUpdate("a"); err != nil {
			t.Fatal(err)
		}
		if err := between(); err != nil {
			t.Fatal(err)
		}
		if err := kv.WriteUpdate(4, true, false, 0, nil); err == nil {
			t.Fatal("WriteUpdate after another call on the store succeeded")
		}
	}
	if v, ok, err := kv.Get("a"); err != nil || !ok || v != 3 {
		t.Fatalf(`"a" = %d, %v, %v; want the one WriteUpdate that followed its read, 3`, v, ok, err)
	}
}

// TestKVHeldUpdates holds updates of keys of every length (PutHeld) and
// decodes what the stage hands back (DecodeChange): one change per key, from
// the value at the last take to the newest; Forwarded reads the former
// until then.
func TestKVHeldUpdates(t *testing.T) {
	c := newTableCtx(t, true, "kv")
	kv := KVStore[string, int64]{Name: "kv", Key: serde.String, Value: serde.Int64}.Open(c)
	keys := testkeys.All()
	for i, k := range keys {
		if err := kv.Put(k, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.commit(t, 1)
	for i, k := range keys {
		switch i % 3 {
		case 0: // updated twice
			if err := putHeld(kv, k, 1000, true, 1, nil); err != nil {
				t.Fatal(err)
			}
			if err := putHeld(kv, k, int64(2000+i), true, 2, nil); err != nil {
				t.Fatal(err)
			}
		case 1: // deleted
			if err := putHeld(kv, k, 0, false, 3, nil); err != nil {
				t.Fatal(err)
			}
		}
		if v, ok, err := kv.Forwarded(k); err != nil || !ok || v != int64(i) {
			t.Fatalf("Forwarded of a key of %d bytes = %d, %v, %v; want the committed %d", len(k), v, ok, err, i)
		}
	}
	// A key inserted and deleted before the take did not change.
	if err := putHeld(kv, "new", 1, true, 4, nil); err != nil {
		t.Fatal(err)
	}
	if err := putHeld(kv, "new", 0, false, 5, nil); err != nil {
		t.Fatal(err)
	}
	seen := 0
	err := c.stores["kv"].TakeHeld(func(h store.Held) error {
		k, ch, err := kv.DecodeChange(h)
		if err != nil {
			return err
		}
		if k == "new" {
			if ch.HasOld || ch.HasNew {
				t.Fatalf("inserted and deleted key: %+v", ch)
			}
			return nil
		}
		i := indexOf(keys, k)
		seen++
		switch {
		case i%3 == 0 && (!ch.HasOld || ch.Old != int64(i) || !ch.HasNew || ch.New != int64(2000+i) || h.Timestamp != 2):
			t.Fatalf("key of %d bytes: %+v at %d", len(k), ch, h.Timestamp)
		case i%3 == 1 && (!ch.HasOld || ch.Old != int64(i) || ch.HasNew || h.Timestamp != 3):
			t.Fatalf("deleted key of %d bytes: %+v at %d", len(k), ch, h.Timestamp)
		case i%3 == 2:
			t.Fatalf("key of %d bytes was never held", len(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i := range keys {
		if i%3 != 2 {
			want++
		}
	}
	if seen != want {
		t.Fatalf("%d held updates, want %d", seen, want)
	}
}

func indexOf(keys []string, k string) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

// TestKVErrorsNameTheStore: a value that does not decode is an error
// naming the store, not a zero value.
func TestKVErrorsNameTheStore(t *testing.T) {
	c := newTableCtx(t, false, "kv")
	if err := c.stores["kv"].Put([]byte("k"), []byte("not 8 bytes")); err != nil {
		t.Fatal(err)
	}
	kv := KVStore[string, int64]{Name: "kv", Key: serde.String, Value: serde.Int64}.Open(c)
	_, ok, err := kv.Get("k")
	if ok || err == nil || !errors.Is(err, serde.ErrDecode) || !bytes.Contains([]byte(err.Error()), []byte("store kv: value")) {
		t.Fatalf("Get of a bad value: %v, %v", ok, err)
	}
}
