package store

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// recording is an Engine that keeps every batch Apply got.
type recording struct {
	Engine
	batches [][]Write
}

func (r *recording) Apply(ws []Write, checkpoint int64) error {
	r.batches = append(r.batches, slices.Clone(ws))
	return r.Engine.Apply(ws, checkpoint)
}

// TestCommitAppliesInKeyOrder drives a stage with random writes to keys of
// classes that are ranged (so that their writes join the ordered index,
// from which Commit reads their order) and one that never is, with keys of
// every length from 0 to 12 bytes, deletes of keys the engine lacks, reads,
// units rolled back and ranges at random moments, and checks after each
// commit that the batch is in strict key order and that the engine holds
// exactly what a model of the writes holds, and that the order was never
// sorted anew because the ordered index lacked an entry.
func TestCommitAppliesInKeyOrder(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 77))
		eng := &recording{Engine: NewMemory()}
		s := NewStaged("t", eng, WithReadCache([]int{0, 4 << 10, 1 << 20}[seed%3]))
		s.SetChangelog(func(_, _ []byte) {})
		model := map[string]string{}
		staged := map[string]*string{} // writes since the last commit (nil: delete)
		key := func() []byte {
			k := make([]byte, r.IntN(13))
			for i := range k {
				k[i] = byte('a' + r.IntN(3))
			}
			if len(k) > 0 {
				k[0] = []byte{1, 2, 3}[r.IntN(3)] // class 3 is never ranged
			}
			return k
		}
		for step := range 3000 {
			switch op := r.IntN(10); {
			case op < 4:
				k, v := key(), fmt.Sprint(step)
				if err := s.Put(k, []byte(v)); err != nil {
					t.Fatal(err)
				}
				staged[string(k)] = &v
			case op < 6:
				k := key()
				if err := s.Delete(k); err != nil {
					t.Fatal(err)
				}
				staged[string(k)] = nil
			case op < 7:
				if _, _, err := s.Get(key()); err != nil {
					t.Fatal(err)
				}
			case op < 8:
				c := []byte{1, 2}[r.IntN(2)]
				if err := s.Range([]byte{c}, []byte{c + 1}, func(_, _ []byte) error { return nil }); err != nil {
					t.Fatal(err)
				}
			case op < 9:
				// A unit of writes rolled back: none of them counts.
				s.Mark()
				for range r.IntN(4) {
					if r.IntN(2) == 0 {
						_ = s.Put(key(), []byte("rolled back"))
					} else {
						_ = s.Delete(key())
					}
					if r.IntN(2) == 0 {
						_ = s.Range([]byte{1}, []byte{3}, func(_, _ []byte) error { return nil })
					}
				}
				s.Rollback()
			default:
				s.Flush()
				eng.batches = nil
				if err := s.Commit(int64(step)); err != nil {
					t.Fatal(err)
				}
				for k, v := range staged {
					if v == nil {
						delete(model, k)
					} else {
						model[k] = *v
					}
				}
				clear(staged)
				for _, b := range eng.batches {
					for i := 1; i < len(b); i++ {
						if bytes.Compare(b[i-1].Key, b[i].Key) >= 0 {
							t.Fatalf("seed %d step %d: batch applies %q before %q", seed, step, b[i-1].Key, b[i].Key)
						}
					}
				}
				got := map[string]string{}
				_ = eng.Range(nil, nil, func(k, v []byte) error { got[string(k)] = string(v); return nil })
				if !maps.Equal(got, model) {
					t.Fatalf("seed %d step %d: engine holds %v, want %v", seed, step, got, model)
				}
			}
		}
		if s.unordered != 0 {
			t.Fatalf("seed %d: %d commits found an entry missing from the ordered index", seed, s.unordered)
		}
	}
}
