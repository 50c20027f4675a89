package store

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
)

// Memory is an Engine held in memory: its state lives only as long as the
// process, so after a restart it is rebuilt from the changelog. It suits
// small stores and tests.
//
// A map gives O(1) Get; a sorted slice of the same entries serves Range. The
// slice is rebuilt by a merge only when a batch adds or removes keys, so a
// batch that only updates existing keys costs map lookups alone.
type Memory struct {
	mu         sync.RWMutex
	entries    map[string]*memEntry // nil once closed
	sorted     []*memEntry          // entries in key order
	checkpoint int64
	size       int64       // sum of len(key)+len(value)
	added      []*memEntry // Apply's scratch: entries new in this batch
}

type memEntry struct {
	key   []byte
	value []byte // replaced by Apply, never mutated, so Range may hand it out
}

var _ Engine = (*Memory)(nil)

// NewMemory returns an empty Memory engine with no checkpoint.
func NewMemory() *Memory {
	return &Memory{entries: make(map[string]*memEntry), checkpoint: NoCheckpoint}
}

// Get returns a copy of the value stored under key.
func (m *Memory) Get(key []byte) ([]byte, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.entries == nil {
		return nil, false, ErrClosed
	}
	e, ok := m.entries[string(key)]
	if !ok {
		return nil, false, nil
	}
	out := make([]byte, len(e.value))
	copy(out, e.value)
	return out, true, nil
}

// Range calls fn for each key in [start, end) in byte order; a nil bound is
// open. fn must not call Apply, Wipe or Close on this Memory (they would wait
// for Range).
func (m *Memory) Range(start, end []byte, fn func(key, value []byte) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.entries == nil {
		return ErrClosed
	}
	i := 0
	if start != nil {
		i, _ = slices.BinarySearchFunc(m.sorted, start, func(e *memEntry, k []byte) int {
			return bytes.Compare(e.key, k)
		})
	}
	for _, e := range m.sorted[i:] {
		if end != nil && bytes.Compare(e.key, end) >= 0 {
			break
		}
		if err := fn(e.key, e.value); err != nil {
			return err
		}
	}
	return nil
}

// Apply writes ws and checkpoint under one lock, so readers see both or
// neither (invariant 2).
func (m *Memory) Apply(ws []Write, checkpoint int64) error {
	if checkpoint < NoCheckpoint {
		return fmt.Errorf("store: invalid checkpoint %d", checkpoint)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		return ErrClosed
	}
	removed := false
	for _, w := range ws {
		if w.End != nil {
			removed = m.deleteRangeLocked(w.Key, w.End) || removed
			continue
		}
		e, existed := m.entries[string(w.Key)]
		if w.Value == nil {
			if existed {
				m.size -= int64(len(e.key) + len(e.value))
				delete(m.entries, string(w.Key))
				removed = true
			}
			continue
		}
		v := make([]byte, len(w.Value))
		copy(v, w.Value)
		if existed {
			m.size += int64(len(v) - len(e.value))
			e.value = v
			continue
		}
		e = &memEntry{key: bytes.Clone(w.Key), value: v}
		if e.key == nil {
			e.key = []byte{}
		}
		m.entries[string(e.key)] = e
		m.size += int64(len(e.key) + len(v))
		m.added = append(m.added, e)
	}
	if len(m.added) > 0 || removed {
		m.rebuildSortedLocked()
	}
	if checkpoint != NoCheckpoint {
		m.checkpoint = checkpoint
	}
	return nil
}

// deleteRangeLocked deletes the keys in [start, end) from the map: those
// in the sorted slice and those the batch added so far. The sorted slice
// drops them at the rebuild, which judges membership by the map.
func (m *Memory) deleteRangeLocked(start, end []byte) (removed bool) {
	in := func(e *memEntry) bool { return bytes.Compare(e.key, start) >= 0 && bytes.Compare(e.key, end) < 0 }
	i, _ := slices.BinarySearchFunc(m.sorted, start, func(e *memEntry, k []byte) int { return bytes.Compare(e.key, k) })
	for _, e := range m.sorted[i:] {
		if !in(e) {
			break
		}
		removed = m.deleteLocked(e) || removed
	}
	for _, e := range m.added {
		if in(e) {
			removed = m.deleteLocked(e) || removed
		}
	}
	return removed
}

// deleteLocked deletes e's key if e is still its entry.
func (m *Memory) deleteLocked(e *memEntry) bool {
	if m.entries[string(e.key)] != e {
		return false
	}
	m.size -= int64(len(e.key) + len(e.value))
	delete(m.entries, string(e.key))
	return true
}

// rebuildSortedLocked merges the batch's new entries into the sorted slice and
// drops entries no longer in the map. Membership is judged by pointer, so an
// entry added and then deleted in one batch, or a key deleted and re-added,
// is settled by what the map holds now.
func (m *Memory) rebuildSortedLocked() {
	slices.SortFunc(m.added, func(a, b *memEntry) int { return bytes.Compare(a.key, b.key) })
	live := func(e *memEntry) bool { return m.entries[string(e.key)] == e }
	out := make([]*memEntry, 0, len(m.entries))
	i, j := 0, 0
	for i < len(m.sorted) || j < len(m.added) {
		var e *memEntry
		if j == len(m.added) || (i < len(m.sorted) && bytes.Compare(m.sorted[i].key, m.added[j].key) < 0) {
			e = m.sorted[i]
			i++
		} else {
			e = m.added[j]
			j++
		}
		if live(e) {
			out = append(out, e)
		}
	}
	m.sorted = out
	clear(m.added)
	m.added = m.added[:0]
}

// Checkpoint returns the last recorded changelog offset, or NoCheckpoint.
func (m *Memory) Checkpoint() (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.entries == nil {
		return 0, ErrClosed
	}
	return m.checkpoint, nil
}

// Wipe deletes every key and the checkpoint.
func (m *Memory) Wipe() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		return ErrClosed
	}
	m.entries = make(map[string]*memEntry)
	m.sorted = nil
	m.size = 0
	m.checkpoint = NoCheckpoint
	return nil
}

// ApproximateSize is the sum of key and value lengths; 0 once closed.
func (m *Memory) ApproximateSize() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.size
}

// Close drops the data. It is idempotent.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries = nil
	m.sorted = nil
	m.size = 0
	return nil
}
