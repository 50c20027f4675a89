package ops

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/RaduBerinde/btreemap"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
)

// JoinMemory is the engine of a stream join's side whose store is in
// memory (topology.InMemory): Kafka Streams' in-memory window store, laid
// out for the join's reads. The side's records (j keys, layout.JoinKey)
// are kept by segment, then by key, each key's in (time, sequence) order,
// so that the join's range over a key's records in a segment is two map
// lookups, its store of a record an append, and the drop of a due segment
// the removal of one map entry. Every other key (an outer side's x index,
// the task's time state) is kept in a B-tree. Range and the Engine's
// other reads see both, in byte order, as they would the keys.
//
// It is a store.Direct engine: the Staged over it stages nothing, and the
// changelog, to which every write goes at once, is its only copy. Its
// undo log takes back the open transaction's writes at an abort, and a
// unit's at a rollback (store.Direct).
//
// It is used by its task's goroutine alone; ApproximateSize may be read
// by any.
type JoinMemory struct {
	segs map[int64]*memSegment // segment start → its records; never an empty one
	rest *btreemap.BTreeMap[[]byte, []byte]

	checkpoint int64
	closed     bool
	size       atomic.Int64 // keys' and values' bytes, estimated

	undo      []memUndo // since the last Commit, in write order
	marked    bool
	mark      int // len(undo) at Mark
	undoBytes int
}

// memSegment is a segment's records: by key part (layout.SplitJoinKey).
type memSegment struct {
	start  int64
	keys   map[string]*memKey
	sorted []*memKey // keys in byte order; nil once a key came or went
	bytes  int64     // its share of JoinMemory.size
}

// memKey is a key's records in a segment, in (ts, seq) order.
type memKey struct {
	part string
	recs []memRec
}

type memRec struct {
	ts  int64
	seq uint64
	val []byte // never modified: a write replaces it
}

// memUndo is how to undo one write (JoinMemory.undoOne).
type memUndo struct {
	kind memUndoKind
	seg  *memSegment // undoSegment: the segment dropped
	// A j record's place, and its value before the write (undoSet,
	// undoRemoved); or a B-tree key and its value before (undoRest,
	// with had).
	segStart int64
	part     string
	ts       int64
	seq      uint64
	key, val []byte
	had      bool
}

type memUndoKind uint8

const (
	undoInserted memUndoKind = iota // remove the record inserted
	undoSet                         // give the record its value back
	undoRemoved                     // insert the record removed
	undoRest                        // give the B-tree key its value back, or remove it
	undoSegment                     // put the segment dropped back
)

// memRecOverhead and memUndoOverhead estimate the memory of a record and
// of an undo step beyond their bytes.
const (
	memRecOverhead  = 48
	memUndoOverhead = 96
)

var _ store.Direct = (*JoinMemory)(nil)

// NewJoinMemory returns an empty JoinMemory with no checkpoint.
func NewJoinMemory() *JoinMemory {
	return &JoinMemory{
		segs:       map[int64]*memSegment{},
		rest:       btreemap.New[[]byte, []byte](16, bytes.Compare),
		checkpoint: store.NoCheckpoint,
	}
}

func (m *JoinMemory) usable() error {
	if m.closed {
		return store.ErrClosed
	}
	return nil
}

// find returns the segment and key of a record's place, nil if none.
func (m *JoinMemory) find(segStart int64, part []byte) (*memSegment, *memKey) {
	sg := m.segs[segStart]
	if sg == nil {
		return nil, nil
	}
	return sg, sg.keys[string(part)]
}

// search returns where (ts, seq) is or would go in recs.
func search(recs []memRec, ts int64, seq uint64) (int, bool) {
	// Most records come after every other of their key.
	if n := len(recs); n == 0 || cmpRec(recs[n-1], ts, seq) < 0 {
		return n, false
	}
	return slices.BinarySearchFunc(recs, memRec{ts: ts, seq: seq}, func(r, t memRec) int { return cmpRec(r, t.ts, t.seq) })
}

func cmpRec(r memRec, ts int64, seq uint64) int {
	if c := cmp.Compare(r.ts, ts); c != 0 {
		return c
	}
	return cmp.Compare(r.seq, seq)
}

// setRec writes val at the record's place, copied unless owned; it
// returns the value held and what undoes the write.
func (m *JoinMemory) setRec(segStart int64, part []byte, ts int64, seq uint64, val []byte) ([]byte, memUndo) {
	sg := m.segs[segStart]
	if sg == nil {
		sg = &memSegment{start: segStart, keys: map[string]*memKey{}}
		m.segs[segStart] = sg
	}
	mk := sg.keys[string(part)]
	if mk == nil {
		mk = &memKey{part: string(part)}
		sg.keys[mk.part] = mk
		sg.sorted = nil
		m.grow(sg, int64(len(mk.part)+memRecOverhead))
	}
	u := memUndo{kind: undoInserted, segStart: segStart, part: mk.part, ts: ts, seq: seq}
	i, ok := search(mk.recs, ts, seq)
	if ok {
		u.kind, u.val = undoSet, mk.recs[i].val
		m.grow(sg, int64(len(val)-len(u.val)))
		mk.recs[i].val = val
		return val, u
	}
	mk.recs = slices.Insert(mk.recs, i, memRec{ts: ts, seq: seq, val: val})
	m.grow(sg, int64(len(val)+16+memRecOverhead))
	return val, u
}

// removeRec removes the record at its place; it returns its value and
// whether there was one.
func (m *JoinMemory) removeRec(segStart int64, part []byte, ts int64, seq uint64) ([]byte, bool) {
	sg, mk := m.find(segStart, part)
	if mk == nil {
		return nil, false
	}
	i, ok := search(mk.recs, ts, seq)
	if !ok {
		return nil, false
	}
	val := mk.recs[i].val
	mk.recs = slices.Delete(mk.recs, i, i+1)
	m.grow(sg, -int64(len(val)+16+memRecOverhead))
	if len(mk.recs) == 0 {
		delete(sg.keys, mk.part)
		sg.sorted = nil
		m.grow(sg, -int64(len(mk.part)+memRecOverhead))
		if len(sg.keys) == 0 {
			delete(m.segs, segStart)
		}
	}
	return val, true
}

func (m *JoinMemory) grow(sg *memSegment, n int64) {
	sg.bytes += n
	m.size.Add(n)
}

func (m *JoinMemory) log(u memUndo) {
	m.undo = append(m.undo, u)
	m.undoBytes += memUndoOverhead + len(u.key)
	if u.kind == undoSet || u.kind == undoRemoved || u.kind == undoRest {
		m.undoBytes += len(u.val) // held by the undo log alone
	}
}

// put writes a copy of value under key, logging its undo if undo.
func (m *JoinMemory) put(key, value []byte, undo bool) []byte {
	v := bytes.Clone(value)
	if v == nil {
		v = []byte{}
	}
	if segStart, part, ts, seq, ok := layout.SplitJoinKey(key); ok {
		_, u := m.setRec(segStart, part, ts, seq, v)
		if undo {
			m.log(u)
		}
		return v
	}
	k := bytes.Clone(key)
	_, old, had := m.rest.ReplaceOrInsert(k, v)
	if had {
		m.size.Add(int64(len(v) - len(old)))
	} else {
		m.size.Add(int64(len(k) + len(v)))
	}
	if undo {
		m.log(memUndo{kind: undoRest, key: k, val: old, had: had})
	}
	return v
}

// del deletes key, logging its undo if undo.
func (m *JoinMemory) del(key []byte, undo bool) bool {
	if segStart, part, ts, seq, ok := layout.SplitJoinKey(key); ok {
		val, had := m.removeRec(segStart, part, ts, seq)
		if had && undo {
			m.log(memUndo{kind: undoRemoved, segStart: segStart, part: string(part), ts: ts, seq: seq, val: val})
		}
		return had
	}
	k, old, had := m.rest.Delete(key)
	if had {
		m.size.Add(-int64(len(k) + len(old)))
		if undo {
			m.log(memUndo{kind: undoRest, key: k, val: old, had: true})
		}
	}
	return had
}

// delRange deletes the keys in [start, end), logging their undo if undo:
// a segment whose every key is in the range goes whole.
func (m *JoinMemory) delRange(start, end []byte, undo bool) bool {
	deleted := false
	for _, e := range m.restIn(start, end) {
		deleted = m.del(e.k, undo) || deleted
	}
	for _, segStart := range m.segStarts() {
		sg := m.segs[segStart]
		p := segPrefix(segStart)
		switch {
		case !segMeets(p, start, end):
		case bytes.Compare(p, start) >= 0 && (end == nil || bytes.Compare(p, end) < 0 && !bytes.HasPrefix(end, p)):
			delete(m.segs, segStart)
			m.size.Add(-sg.bytes)
			if undo {
				m.log(memUndo{kind: undoSegment, seg: sg})
				m.undoBytes += int(sg.bytes) // held by the undo log alone
			}
			deleted = true
		default: // a part of the segment: record by record
			var in [][]byte
			_, _ = m.segRange(sg, start, end, nil, func(k, _ []byte) error {
				in = append(in, bytes.Clone(k))
				return nil // (it never fails)
			})
			for _, k := range in {
				deleted = m.del(k, undo) || deleted
			}
		}
	}
	return deleted
}

// segPrefix is the first 9 bytes of the j keys of the segment at
// segStart, which every one of them extends.
func segPrefix(segStart int64) []byte {
	return layout.AppendTime([]byte{layout.JoinRecord}, segStart)
}

// segMeets says whether a key extending p (and longer) may lie in [start,
// end): not if all are at or past end, nor if all are below start (p is
// below start, and not its prefix).
func segMeets(p, start, end []byte) bool {
	if end != nil && bytes.Compare(p, end) >= 0 {
		return false
	}
	return start == nil || bytes.Compare(p, start) >= 0 || bytes.HasPrefix(start, p)
}

// segStarts returns the segments' starts in order.
func (m *JoinMemory) segStarts() []int64 {
	return slices.Sorted(maps.Keys(m.segs))
}

// keysSorted returns sg's keys in byte order.
func (sg *memSegment) keysSorted() []*memKey {
	if sg.sorted == nil {
		sg.sorted = slices.SortedFunc(maps.Values(sg.keys), func(a, b *memKey) int { return cmp.Compare(a.part, b.part) })
	}
	return sg.sorted
}

// segRange calls fn for each of sg's records in [start, end), in order;
// buf is where their keys are made.
func (m *JoinMemory) segRange(sg *memSegment, start, end, buf []byte, fn func(k, v []byte) error) ([]byte, error) {
	for _, mk := range sg.keysSorted() {
		var err error
		if buf, err = keyRange(sg.start, mk, start, end, buf, fn); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// keyRange calls fn for each of mk's records in [start, end), in order.
func keyRange(segStart int64, mk *memKey, start, end, buf []byte, fn func(k, v []byte) error) ([]byte, error) {
	for _, r := range mk.recs {
		buf = layout.AppendJoinKeyPart(buf[:0], segStart, mk.part, r.ts, r.seq)
		if start != nil && bytes.Compare(buf, start) < 0 {
			continue
		}
		if end != nil && bytes.Compare(buf, end) >= 0 {
			break
		}
		if err := fn(buf, r.val); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// Get returns a copy of the value stored under key.
func (m *JoinMemory) Get(key []byte) ([]byte, bool, error) {
	if err := m.usable(); err != nil {
		return nil, false, err
	}
	if segStart, part, ts, seq, ok := layout.SplitJoinKey(key); ok {
		if _, mk := m.find(segStart, part); mk != nil {
			if i, ok := search(mk.recs, ts, seq); ok {
				return bytes.Clone(mk.recs[i].val), true, nil
			}
		}
		return nil, false, nil
	}
	_, v, ok := m.rest.Get(key)
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(v), true, nil
}

// Range calls fn for each key in [start, end) in byte order. A range
// within one key's records of one segment, as the join's are, costs the
// lookup of the key and a pass over its records; any other sorts what it
// passes.
func (m *JoinMemory) Range(start, end []byte, fn func(key, value []byte) error) error {
	if err := m.usable(); err != nil {
		return err
	}
	restIn := m.restIn(start, end)
	if restIn == nil {
		if segStart, part, ok := oneKey(start, end); ok {
			if _, mk := m.find(segStart, part); mk != nil {
				_, err := keyRange(segStart, mk, start, end, nil, fn)
				return err
			}
			return nil
		}
	}
	// The B-tree's keys in range merge with the records: each goes
	// before the first record above it.
	var buf []byte
	emitRest := func(limit []byte) error {
		for len(restIn) > 0 && (limit == nil || bytes.Compare(restIn[0].k, limit) < 0) {
			if err := fn(restIn[0].k, restIn[0].v); err != nil {
				return err
			}
			restIn = restIn[1:]
		}
		return nil
	}
	for _, segStart := range m.segStarts() {
		sg := m.segs[segStart]
		if !segMeets(segPrefix(segStart), start, end) {
			continue
		}
		var err error
		buf, err = m.segRange(sg, start, end, buf, func(k, v []byte) error {
			if err := emitRest(k); err != nil {
				return err
			}
			return fn(k, v)
		})
		if err != nil {
			return err
		}
	}
	return emitRest(nil)
}

type kv struct{ k, v []byte }

// restIn returns the B-tree's entries in [start, end), nil if none.
func (m *JoinMemory) restIn(start, end []byte) []kv {
	lo, hi := btreemap.Min[[]byte](), btreemap.Max[[]byte]()
	if start != nil {
		lo = btreemap.GE(start)
	}
	if end != nil {
		hi = btreemap.LT(end)
	}
	var out []kv
	for k, v := range m.rest.Ascend(lo, hi) {
		out = append(out, kv{k, v})
	}
	return out
}

// oneKey says whether every j key in [start, end) is of one key and
// segment: whether start and end share a j key's segment and key part.
func oneKey(start, end []byte) (int64, []byte, bool) {
	if len(start) < 10 || start[0] != layout.JoinRecord || len(end) < 10 || !bytes.Equal(start[:9], end[:9]) {
		return 0, nil, false
	}
	n, w := binary.Uvarint(start[9:])
	if w <= 0 || uint64(len(start)) < uint64(9+w)+n {
		return 0, nil, false
	}
	p := start[:9+w+int(n)]
	if !bytes.HasPrefix(end, p) {
		return 0, nil, false
	}
	return layout.ReadTime(start[1:9]), p[9:], true
}

// Apply writes committed state (a restore's), with no undo.
func (m *JoinMemory) Apply(ws []store.Write, checkpoint int64) error {
	if checkpoint < store.NoCheckpoint {
		return fmt.Errorf("ops: invalid checkpoint %d", checkpoint)
	}
	if err := m.usable(); err != nil {
		return err
	}
	if len(m.undo) > 0 {
		return errors.New("ops: a join buffer applied a batch with a transaction open")
	}
	for _, w := range ws {
		switch {
		case w.End != nil:
			m.delRange(w.Key, w.End, false)
		case w.Value == nil:
			m.del(w.Key, false)
		default:
			m.put(w.Key, w.Value, false)
		}
	}
	if checkpoint != store.NoCheckpoint {
		m.checkpoint = checkpoint
	}
	return nil
}

// Checkpoint returns the last recorded changelog offset, or NoCheckpoint.
func (m *JoinMemory) Checkpoint() (int64, error) {
	if err := m.usable(); err != nil {
		return 0, err
	}
	return m.checkpoint, nil
}

// Wipe deletes every key and the checkpoint.
func (m *JoinMemory) Wipe() error {
	if err := m.usable(); err != nil {
		return err
	}
	m.reset()
	return nil
}

func (m *JoinMemory) reset() {
	m.segs = map[int64]*memSegment{}
	m.rest = btreemap.New[[]byte, []byte](16, bytes.Compare)
	m.checkpoint = store.NoCheckpoint
	m.size.Store(0)
	m.dropUndo()
}

// ApproximateSize estimates the bytes held; 0 once closed.
func (m *JoinMemory) ApproximateSize() int64 { return m.size.Load() }

// Close drops the data. It is idempotent.
func (m *JoinMemory) Close() error {
	m.reset()
	m.closed = true
	return nil
}

// Put writes a copy of value under key in the open transaction.
func (m *JoinMemory) Put(key, value []byte) ([]byte, error) {
	if err := m.usable(); err != nil {
		return nil, err
	}
	return m.put(key, value, true), nil
}

// Delete deletes key in the open transaction.
func (m *JoinMemory) Delete(key []byte) (bool, error) {
	if err := m.usable(); err != nil {
		return false, err
	}
	return m.del(key, true), nil
}

// DeleteRange deletes the keys in [start, end) in the open transaction.
func (m *JoinMemory) DeleteRange(start, end []byte) (bool, error) {
	if err := m.usable(); err != nil {
		return false, err
	}
	return m.delRange(start, end, true), nil
}

// Mark begins a unit.
func (m *JoinMemory) Mark() { m.marked, m.mark = true, len(m.undo) }

// Release ends the unit, keeping its writes.
func (m *JoinMemory) Release() { m.marked = false }

// Rollback undoes the unit's writes and ends it.
func (m *JoinMemory) Rollback() {
	if !m.marked {
		return
	}
	m.undoTo(m.mark)
	m.marked = false
}

// Commit ends the transaction, keeping its writes.
func (m *JoinMemory) Commit(checkpoint int64) error {
	if checkpoint < store.NoCheckpoint {
		return fmt.Errorf("ops: invalid checkpoint %d", checkpoint)
	}
	if err := m.usable(); err != nil {
		return err
	}
	m.dropUndo()
	if checkpoint != store.NoCheckpoint {
		m.checkpoint = checkpoint
	}
	return nil
}

// Abort undoes every write since the last Commit.
func (m *JoinMemory) Abort() {
	m.undoTo(0)
	m.marked = false
}

// Undoing estimates the memory of the undo log.
func (m *JoinMemory) Undoing() int { return m.undoBytes }

func (m *JoinMemory) dropUndo() {
	clear(m.undo)
	if cap(m.undo) > 1<<16 {
		m.undo = nil // a large transaction's log goes with it
	}
	m.undo = m.undo[:0]
	m.undoBytes = 0
	m.marked = false
}

// undoTo undoes the writes logged past n, last first.
func (m *JoinMemory) undoTo(n int) {
	if m.closed {
		return
	}
	for i := len(m.undo) - 1; i >= n; i-- {
		m.undoOne(&m.undo[i])
	}
	clear(m.undo[n:])
	m.undo = m.undo[:n]
	if n == 0 {
		m.undoBytes = 0
	}
}

func (m *JoinMemory) undoOne(u *memUndo) {
	m.undoBytes -= memUndoOverhead + len(u.key)
	switch u.kind {
	case undoInserted:
		m.removeRec(u.segStart, []byte(u.part), u.ts, u.seq)
	case undoSet, undoRemoved:
		m.undoBytes -= len(u.val)
		m.setRec(u.segStart, []byte(u.part), u.ts, u.seq, u.val)
	case undoRest:
		m.undoBytes -= len(u.val)
		if u.had {
			_, old, had := m.rest.ReplaceOrInsert(u.key, u.val)
			if had {
				m.size.Add(int64(len(u.val) - len(old)))
			} else {
				m.size.Add(int64(len(u.key) + len(u.val)))
			}
		} else if k, old, had := m.rest.Delete(u.key); had {
			m.size.Add(-int64(len(k) + len(old)))
		}
	case undoSegment:
		// The writes after the drop are undone already: no segment
		// of this start is left.
		m.undoBytes -= int(u.seg.bytes)
		m.segs[u.seg.start] = u.seg
		m.size.Add(u.seg.bytes)
	}
}
