package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
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

// BenchmarkPebbleGet reads random keys, present (hit) or not (miss), from
// a store of 145,000 keys, 125,000 of them compacted into L6 and the rest
// in memtables and L0, in a shared block cache as an instance opens its
// stores with: Get against Pebble's own Get on the same store (db), the
// baseline it replaced.
func BenchmarkPebbleGet(b *testing.B) {
	cache := NewCache(128 << 20)
	defer cache.Close()
	p, err := OpenPebbleWith(b.TempDir(), PebbleOptions{MemTableSize: 2 << 20, Cache: cache})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	const n, compacted = 145_000, 125_000
	key := func(i int) []byte { return fmt.Appendf(nil, "b%d", i) }
	var ws []Write
	for i := range n {
		// Even keys are stored; odd ones are misses.
		ws = append(ws, Write{Key: key(2 * i), Value: binary.BigEndian.AppendUint64(nil, uint64(i))})
		if len(ws) == 2000 || i == n-1 {
			if err := p.Apply(ws, int64(i)); err != nil {
				b.Fatal(err)
			}
			ws = ws[:0]
		}
		if i == compacted-1 {
			if err := p.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
				b.Fatal(err)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	keys := func(miss int) [][]byte {
		ks := make([][]byte, 4096)
		for i := range ks {
			ks[i] = key(2*r.IntN(n) + miss)
		}
		return ks
	}
	for _, c := range []struct {
		name string
		keys [][]byte
		want bool
	}{{"hit", keys(0), true}, {"miss", keys(1), false}} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if _, ok, err := p.Get(c.keys[i%len(c.keys)]); err != nil || ok != c.want {
					b.Fatalf("Get = %v, %v", ok, err)
				}
				i++
			}
		})
		b.Run(c.name+"/db", func(b *testing.B) {
			i := 0
			for b.Loop() {
				v, closer, err := p.db.Get(userKey(c.keys[i%len(c.keys)]))
				if err == nil {
					_ = append([]byte(nil), v...)
					_ = closer.Close()
				}
				if (err == nil) != c.want {
					b.Fatalf("db.Get: %v", err)
				}
				i++
			}
		})
	}
}
