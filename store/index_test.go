package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyIndexMatchesMap drives a keyIndex with random adds and deletes
// (keys of every length from 0 to 40 bytes, many of them sharing a
// prefix), clears and shrinks, and checks it against a map after every
// step: every key present is found at its position, every key deleted is
// not, and Len agrees. Deletes exercise the backward shift, including
// wrapping around the table's end.
func TestKeyIndexMatchesMap(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		x := newKeyIndex(0)
		var entries []stagedEntry
		model := map[string]int{}
		var keys []string
		for i := range 600 {
			keys = append(keys, fmt.Sprintf("%0*d", i%41, i)[:i%41])
		}
		check := func(step int) {
			t.Helper()
			if x.Len() != len(model) {
				t.Fatalf("seed %d step %d: Len %d, want %d", seed, step, x.Len(), len(model))
			}
			for _, k := range keys {
				i, ok := x.Get([]byte(k), entries)
				j, want := model[k]
				if ok != want || ok && i != j {
					t.Fatalf("seed %d step %d: Get(%q) = %d, %v; want %d, %v", seed, step, k, i, ok, j, want)
				}
			}
		}
		for step := range 3000 {
			k := keys[r.IntN(len(keys))]
			switch op := r.IntN(100); {
			case op < 55:
				if _, ok := model[k]; !ok {
					entries = append(entries, stagedEntry{key: []byte(k)})
					model[k] = len(entries) - 1
					x.Add([]byte(k), len(entries)-1)
				}
			case op < 97:
				if i, ok := model[k]; ok {
					x.Delete([]byte(k), i)
					delete(model, k)
				}
			case op < 98:
				x.Clear()
				clear(model)
			default:
				x.Shrink()
			}
			if step%50 == 0 || step > 2900 {
				check(step)
			}
		}
		check(-1)
	}
}

// TestKeyIndexCollidingHashes: keys whose hashes are equal, or equal in
// the bits that choose their slot, are told apart by their bytes, and a
// delete among them keeps the others reachable.
func TestKeyIndexCollidingHashes(t *testing.T) {
	x := newKeyIndex(0)
	var entries []stagedEntry
	for i := range 5 {
		entries = append(entries, stagedEntry{key: fmt.Appendf(nil, "k%d", i)})
	}
	// Place them by hand under one hash, as a full collision would.
	for i := range entries {
		x.place(12345, int32(i+1))
		x.n++
	}
	x.hash0 = func([]byte) uint32 { return 12345 }
	for i, e := range entries {
		if j, ok := x.Get(e.key, entries); !ok || j != i {
			t.Fatalf("Get(%s) = %d, %v", e.key, j, ok)
		}
	}
	x.Delete(entries[1].key, 1)
	for i, e := range entries {
		j, ok := x.Get(e.key, entries)
		if want := i != 1; ok != want || ok && j != i {
			t.Fatalf("after deleting k1: Get(%s) = %d, %v", e.key, j, ok)
		}
	}
}
