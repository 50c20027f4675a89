package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"testing"
)

// packed runs writes through a Staged that packs every key by its first
// byte, with the cache on or off, and returns the pack records sent and
// how many records went alone.
func packed(t testing.TB, cache bool, writes []Write) (keys, values [][]byte, alone int) {
	t.Helper()
	var opts []StagedOption
	if !cache {
		opts = append(opts, WithoutCache())
	}
	opts = append(opts, WithPacking(Packing{Group: func(k []byte) int { return min(len(k), 1) }, Mark: []byte{0}}))
	s := NewStaged("p", NewMemory(), opts...)
	s.SetChangelog(func(k, v []byte) { alone++ })
	s.SetRangeChangelog(func(start, end []byte) {})
	s.SetPackChangelog(func(k, v []byte) { keys, values = append(keys, k), append(values, v) })
	for _, w := range writes {
		if err := s.Put(w.Key, w.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	return keys, values, alone
}

// TestUnpackWritesReadsWhatAPackHolds: every write of keys of every
// length, values empty and long, and deletes, comes back from the packs,
// in order.
func TestUnpackWritesReadsWhatAPackHolds(t *testing.T) {
	var writes []Write
	for i := range 300 {
		w := Write{Key: append([]byte{byte('a' + i%3)}, bytes.Repeat([]byte{byte(i)}, i)...), Value: bytes.Repeat([]byte{'v'}, i%7*40)}
		if i%5 == 0 {
			w.Value = nil
		}
		writes = append(writes, w)
	}
	keys, values, alone := packed(t, true, writes)
	if len(keys) != 3 || alone != 0 {
		t.Fatalf("%d packs and %d records alone, want a pack a group", len(keys), alone)
	}
	var got []Write
	for i := range keys {
		var err error
		if got, err = UnpackWrites(got, keys[i], values[i]); err != nil {
			t.Fatal(err)
		}
	}
	// The packs go by group; within one, in the order written.
	var want []Write
	for _, g := range []byte("abc") {
		for _, w := range writes {
			if w.Key[0] == g {
				want = append(want, w)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d writes unpacked, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) || (got[i].Value == nil) != (want[i].Value == nil) {
			t.Fatalf("write %d: %q=%q, want %q=%q", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
}

// TestPackingNeedsTheCacheOrADirectEngine: a store without the cache over
// an engine that stages nothing of its own sends each write as made, as
// WithoutCache asks.
func TestPackingNeedsTheCacheOrADirectEngine(t *testing.T) {
	keys, _, alone := packed(t, false, []Write{{Key: []byte("a1"), Value: []byte("1")}, {Key: []byte("a2"), Value: nil}})
	if len(keys) != 0 || alone != 2 {
		t.Fatalf("%d packs and %d records alone, want 0 and 2", len(keys), alone)
	}
}

// TestUnpackWritesRefusesACutPack: a pack cut short anywhere, or with a
// length past its end, is an error that says so, never a panic or a
// shorter list of writes taken for the whole.
func TestUnpackWritesRefusesACutPack(t *testing.T) {
	keys, values, _ := packed(t, true, []Write{
		{Key: []byte("a1"), Value: []byte("one")},
		{Key: []byte("a22"), Value: nil},
		{Key: []byte("a333"), Value: []byte{}},
	})
	if len(keys) != 1 {
		t.Fatalf("%d packs, want 1", len(keys))
	}
	key, value := keys[0], values[0]
	all, err := UnpackWrites(nil, key, value)
	if err != nil || len(all) != 3 {
		t.Fatalf("the whole pack: %d writes, %v", len(all), err)
	}
	// Where the writes end: after the prefix's length, then after each.
	_, at := binary.Uvarint(value)
	ends := map[int]bool{at: true}
	for rest := value[at:]; len(rest) > 0; {
		_, _, _, r, err := nextPacked(rest)
		if err != nil {
			t.Fatal(err)
		}
		rest = r
		ends[len(value)-len(rest)] = true
	}
	if len(ends) != 4 {
		t.Fatalf("%d ends of writes, want 4", len(ends))
	}
	for n := range len(value) {
		// A cut where a write ends reads as fewer writes: only a cut
		// inside one can be seen, and must be.
		_, err := UnpackWrites(nil, key, value[:n])
		if (err == nil) != ends[n] {
			t.Fatalf("cut at %d of %d: %v", n, len(value), err)
		}
		if err != nil && !errors.Is(err, ErrCorruptPack) {
			t.Fatalf("cut at %d: %v, want ErrCorruptPack", n, err)
		}
	}
	if _, err := UnpackWrites(nil, []byte{}, value); !errors.Is(err, ErrCorruptPack) {
		t.Fatalf("a prefix longer than the key: %v", err)
	}
}

func FuzzUnpackWrites(f *testing.F) {
	keys, values, _ := packed(f, true, []Write{{Key: []byte("ak"), Value: []byte("v")}, {Key: []byte("b"), Value: nil}})
	for i := range keys {
		f.Add(keys[i], values[i])
	}
	f.Add([]byte("k"), []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		ws, err := UnpackWrites(nil, key, value)
		if err != nil {
			if !errors.Is(err, ErrCorruptPack) {
				t.Fatalf("%v, want ErrCorruptPack", err)
			}
			return
		}
		g, _ := binary.Uvarint(value)
		for _, w := range ws {
			if !bytes.HasPrefix(w.Key, key[:g]) {
				t.Fatalf("key %q does not begin with the pack's prefix %q", w.Key, key[:g])
			}
		}
	})
}

// TestPackKeysStayUnique: across transactions, committed and aborted, and
// flushes and full packs within one, no two committed packs share a key,
// and each begins with its group's prefix and Mark.
func TestPackKeysStayUnique(t *testing.T) {
	s := NewStaged("p", NewMemory(), WithPacking(Packing{Group: func(k []byte) int { return min(len(k), 1) }, Mark: []byte{0}, Limit: 40}))
	committed, txn := map[string]bool{}, map[string]bool{}
	offset := int64(0) // the next record's, as Kafka's: aborted ones take one too
	s.SetChangelog(func(k, v []byte) { t.Fatalf("a record of its own for %q", k) })
	s.SetPackChangelog(func(k, v []byte) {
		if committed[string(k)] || txn[string(k)] {
			t.Fatalf("two packs have the key %x", k)
		}
		if !bytes.HasPrefix(k, []byte{'a', 0}) {
			t.Fatalf("pack key %x does not begin with its group's prefix and Mark", k)
		}
		txn[string(k)] = true
		offset++
	})
	for n := range 20 {
		for range 3 {
			for i := range 10 {
				if err := s.Put(fmt.Appendf(nil, "a%d", i), []byte("0123456789")); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if n%4 == 3 {
			s.Abort() // its packs' keys may come again
			clear(txn)
			continue
		}
		if err := s.Commit(offset - 1); err != nil {
			t.Fatal(err)
		}
		maps.Copy(committed, txn)
		clear(txn)
	}
	if len(committed) < 100 {
		t.Fatalf("%d packs committed", len(committed))
	}
}
