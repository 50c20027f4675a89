package store

import (
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
