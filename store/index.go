package store

import (
	"bytes"
	"hash/maphash"
)

// keyIndex maps a stage's keys to their entries (Staged.entries), the
// stage's index. It is an open-addressing table with linear probing whose
// slots hold a key's 32-bit hash and its entry's position, 8 bytes and no
// pointer each: a lookup touches one slot's cache line, then the entry,
// then the entry's key, which its value follows (colocate). A Go map of
// string keys touches its control word, its slot and the key: a cache
// miss more per lookup on a stage larger than the CPU's caches, and a
// table the collector scans.
//
// The keys stay in the entries: every method that compares keys takes the
// entries the positions refer to.
type keyIndex struct {
	slots []indexSlot // a power of two long, or empty
	n     int         // occupied slots
	seed  maphash.Seed
	// hash0, set by tests, replaces the hash (to make keys collide).
	hash0 func([]byte) uint32
}

// indexSlot is a key's slot: hash, and 1 + its entry's position (0: the
// slot is empty).
type indexSlot struct {
	hash uint32
	pos  int32
}

// maxLoad is the occupied share of slots that makes the table double,
// in eighths.
const maxLoad = 6

func newKeyIndex(capacity int) keyIndex {
	x := keyIndex{seed: maphash.MakeSeed()}
	x.alloc(capacity)
	return x
}

// alloc makes the slots for capacity keys, empty.
func (x *keyIndex) alloc(capacity int) {
	size := 8
	for size*maxLoad/8 < capacity {
		size *= 2
	}
	x.slots, x.n = make([]indexSlot, size), 0
}

func (x *keyIndex) hash(key []byte) uint32 {
	if x.hash0 != nil {
		return x.hash0(key)
	}
	return uint32(maphash.Bytes(x.seed, key))
}

// Len returns the number of keys.
func (x *keyIndex) Len() int { return x.n }

// Get returns the position of key's entry.
func (x *keyIndex) Get(key []byte, entries []stagedEntry) (int, bool) {
	h := x.hash(key)
	mask := uint32(len(x.slots) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		s := x.slots[p]
		if s.pos == 0 {
			return 0, false
		}
		if s.hash == h && bytes.Equal(entries[s.pos-1].key, key) {
			return int(s.pos - 1), true
		}
	}
}

// Add adds key, which the index lacks, at position i.
func (x *keyIndex) Add(key []byte, i int) {
	if (x.n+1)*8 > len(x.slots)*maxLoad {
		x.grow(2 * len(x.slots))
	}
	x.place(x.hash(key), int32(i+1))
	x.n++
}

// place puts a slot's hash and position in the first empty slot from the
// hash's own.
func (x *keyIndex) place(h uint32, pos int32) {
	mask := uint32(len(x.slots) - 1)
	p := h & mask
	for x.slots[p].pos != 0 {
		p = (p + 1) & mask
	}
	x.slots[p] = indexSlot{hash: h, pos: pos}
}

// grow moves the slots into a table of size slots.
func (x *keyIndex) grow(size int) {
	old := x.slots
	x.slots = make([]indexSlot, size)
	for _, s := range old {
		if s.pos != 0 {
			x.place(s.hash, s.pos)
		}
	}
}

// Delete removes key, whose entry is entries[i], from the index. The slots
// after its own that would no longer be reached from their hash's own
// shift back into the gap (no tombstones: a lookup stops at the first
// empty slot).
func (x *keyIndex) Delete(key []byte, i int) {
	h := x.hash(key)
	mask := uint32(len(x.slots) - 1)
	p := h & mask
	for x.slots[p].pos != int32(i+1) {
		if x.slots[p].pos == 0 {
			return
		}
		p = (p + 1) & mask
	}
	for q := (p + 1) & mask; x.slots[q].pos != 0; q = (q + 1) & mask {
		// The slot at q may fill the gap at p if its own slot is not in
		// (p, q], cyclically.
		home := x.slots[q].hash & mask
		if (q-home)&mask >= (q-p)&mask {
			x.slots[p] = x.slots[q]
			p = q
		}
	}
	x.slots[p] = indexSlot{}
	x.n--
}

// Clear removes every key, keeping the slots.
func (x *keyIndex) Clear() {
	clear(x.slots)
	x.n = 0
}

// Shrink makes the table anew for its keys, smaller if they allow.
func (x *keyIndex) Shrink() {
	old, n := x.slots, x.n
	x.alloc(n)
	for _, s := range old {
		if s.pos != 0 {
			x.place(s.hash, s.pos)
		}
	}
	x.n = n
}
