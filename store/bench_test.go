package store

import (
	"encoding/binary"
	"fmt"
	"testing"
)

func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%08d", i)
	}
	return keys
}

func BenchmarkStagedPut(b *testing.B) {
	keys := benchKeys(1024)
	val := make([]byte, 100)
	// new: each Put stages a key not yet in the stage (cleared every 1024).
	b.Run("new", func(b *testing.B) {
		s := NewStaged("bench", NewMemory())
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i == len(keys) {
				s.Abort()
				i = 0
			}
			_ = s.Put(keys[i], val)
			i++
		}
	})
	// overwrite: each Put folds into a key already staged.
	b.Run("overwrite", func(b *testing.B) {
		s := NewStaged("bench", NewMemory())
		for _, k := range keys {
			_ = s.Put(k, val)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = s.Put(keys[i%len(keys)], val)
			i++
		}
	})
}

func BenchmarkStagedGetHit(b *testing.B) {
	keys := benchKeys(1024)
	s := NewStaged("bench", NewMemory())
	for _, k := range keys {
		_ = s.Put(k, k)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok, _ := s.Get(keys[i%len(keys)]); !ok {
			b.Fatal("miss")
		}
		i++
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = s.Get(keys[0]) }); n != 0 {
		b.Fatalf("Get of a staged key allocates %v times", n)
	}
}

func BenchmarkPebbleApply(b *testing.B) {
	p, err := OpenPebble(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	const batch = 100
	keys := benchKeys(100 * batch)
	val := make([]byte, 100)
	ws := make([]Write, batch)
	b.ReportAllocs()
	b.SetBytes(int64(batch * (len(keys[0]) + len(val))))
	n := 0
	for b.Loop() {
		for i := range ws {
			ws[i] = Write{Key: keys[(n*batch+i)%len(keys)], Value: val}
		}
		if err := p.Apply(ws, int64(n)); err != nil {
			b.Fatal(err)
		}
		n++
	}
}

// BenchmarkStagedCount is the count job's access pattern: 8 stores (an
// instance's tasks) of 12,500 keys each, 100,000 keys in all, read and
// written back (GetForUpdate, then an 8-byte count) in a random order,
// committed every 5,000 updates of a store. Its working set is larger than
// a core's caches, so it measures the memory touched per update as much as
// the code run. put writes with Put; held as the count does under
// exactly_once (folding): each update inside Mark and Release, written
// with PutHeld, and the held updates taken and their values read at the
// commit.
func BenchmarkStagedCount(b *testing.B) {
	b.Run("put", func(b *testing.B) { benchStagedCount(b, false) })
	b.Run("held", func(b *testing.B) { benchStagedCount(b, true) })
}

func benchStagedCount(b *testing.B, held bool) {
	const stores, perStore, perCommit = 8, 12_500, 5_000
	keys := benchKeys(perStore)
	ss := make([]*Staged, stores)
	for i := range ss {
		ss[i] = NewStaged("bench", NewMemory(), WithReadCache(64<<20))
	}
	// A fixed pseudo-random order of (store, key) pairs.
	order := make([]uint32, 1<<20)
	x := uint32(2463534242)
	for i := range order {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		order[i] = x
	}
	val := make([]byte, 8)
	count := func(s *Staged, k []byte, ts int64) {
		if held {
			s.Mark()
			defer s.Release()
		}
		v, _, err := s.GetForUpdate(k)
		if err != nil {
			b.Fatal(err)
		}
		var n uint64
		if len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		binary.BigEndian.PutUint64(val, n+1)
		if held {
			err = s.PutHeld(k, val, ts, nil)
		} else {
			err = s.Put(k, val)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	var checkpoint int64
	var sum uint64 // what the held updates' values add up to, so that reading them is not optimized away
	commit := func(s *Staged) {
		err := s.TakeHeld(func(h Held) error {
			if len(h.Prev) == 8 {
				sum -= binary.BigEndian.Uint64(h.Prev)
			}
			sum += binary.BigEndian.Uint64(h.Value)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		s.Flush()
		checkpoint++
		if err := s.Commit(checkpoint); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range ss { // every key committed once: the cache holds them all
		for _, k := range keys {
			count(s, k, 0)
		}
		commit(s)
	}
	written := make([]int, stores)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := order[i&(len(order)-1)]
		i++
		si := int(r % stores)
		count(ss[si], keys[(r/stores)%perStore], int64(i))
		if written[si]++; written[si] == perCommit {
			written[si] = 0
			commit(ss[si])
		}
	}
	b.StopTimer()
	for _, s := range ss {
		commit(s)
	}
	if want := uint64(stores*perStore + b.N); held && sum != want {
		b.Fatalf("the held updates add up to %d, want %d", sum, want)
	}
}
