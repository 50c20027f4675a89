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
	"unsafe"

	"github.com/RaduBerinde/btreemap"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
)

// JoinMemory is the engine of a stream join's side whose store is in
// memory (topology.InMemory): Kafka Streams' in-memory window store, laid
// out for the join's reads. The side's records (j keys, layout.JoinKey)
// are kept by segment, then by key, each key's in (time, sequence) order,
// so that the join's range over a key's records in a segment is a map
// lookup, its store of a record an append, and the drop of a due segment
// the removal of one entry of a short list. Every other key (an outer side's x index,
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
	// segs are the segments in order of their starts, never an empty
	// one: a join's side holds two or three.
	segs []*memSegment
	rest *btreemap.BTreeMap[[]byte, []byte]
	// restJ counts the B-tree's keys that start with j (that are no j
	// key: too short, a varint not in its shortest form): while there
	// are none, a range within a key's records need not seek it.
	restJ int

	checkpoint int64
	closed     bool
	size       atomic.Int64 // keys' and values' bytes, estimated

	undo      undoLog // since the last Commit, in write order
	marked    bool
	mark      int // undo.n at Mark
	undoBytes int
	// lastKeys is how many keys the segment dropped last held: a new
	// segment's map is made that large, not grown to it key by key.
	lastKeys int
	// rangeBuf is where Range makes the keys it passes, when within one
	// key's records.
	rangeBuf []byte
}

// undoLog is a log of undo steps kept in chunks, so that it grows
// without copying what it holds, and keeps its chunks from one
// transaction to the next (a job on a backlog logs as many in each):
// growing one slice by doubling in every transaction was 8 % of a
// stream join's CPU in a bench profile.
type undoLog struct {
	chunks [][]memUndo // each undoChunk long; those past n's are spare
	n      int
	// grown is the most steps a recent transaction logged, decaying by
	// an eighth at each reset: the spare chunks past it go.
	grown int
}

const undoChunk = 1024

func (l *undoLog) push(u memUndo) { *l.add() = u }

// add logs a step, empty, and returns it to be filled in: a step written
// in place, not copied in (it is over 100 bytes, and a stream join logs
// one a record).
func (l *undoLog) add() *memUndo {
	if l.n == len(l.chunks)*undoChunk {
		l.chunks = append(l.chunks, make([]memUndo, undoChunk))
	}
	l.n++
	return l.at(l.n - 1)
}

func (l *undoLog) at(i int) *memUndo { return &l.chunks[i/undoChunk][i%undoChunk] }

// truncate forgets the steps past n.
func (l *undoLog) truncate(n int) {
	for i := n; i < l.n; i++ {
		*l.at(i) = memUndo{}
	}
	l.n = n
}

// reset forgets every step, keeping room for as many as recent
// transactions logged.
func (l *undoLog) reset() {
	l.grown = max(l.n, l.grown-l.grown/8)
	l.truncate(0)
	keep := (l.grown + undoChunk - 1) / undoChunk
	clear(l.chunks[min(keep, len(l.chunks)):])
	l.chunks = l.chunks[:min(keep, len(l.chunks))]
}

// memSegment is a segment's records: by key part (layout.SplitJoinKey).
type memSegment struct {
	start  int64
	keys   map[string]*memKey
	sorted []*memKey // keys in byte order; nil once a key came or went
	bytes  int64     // its share of JoinMemory.size
}

// memKey is a key's records in a segment, in (ts, seq) order. Most keys
// have one record in a segment: it is kept in first, in the memKey's own
// allocation.
type memKey struct {
	part  string
	recs  []memRec // first[:] until a second record comes
	first [1]memRec
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
	i, ok := m.segAt(segStart)
	if !ok {
		return nil, nil
	}
	sg := m.segs[i]
	return sg, sg.keys[string(part)]
}

// segAt returns where the segment at segStart is or would go in segs.
func (m *JoinMemory) segAt(segStart int64) (int, bool) {
	for i, sg := range m.segs {
		if sg.start >= segStart {
			return i, sg.start == segStart
		}
	}
	return len(m.segs), false
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

// setRec writes val at the record's place, logging what undoes the write
// if undo. part is never modified: a key new to the segment keeps it as
// its map key, with no copy.
func (m *JoinMemory) setRec(segStart int64, part []byte, ts int64, seq uint64, val []byte, undo bool) {
	at, ok := m.segAt(segStart)
	if !ok {
		m.segs = slices.Insert(m.segs, at, &memSegment{start: segStart, keys: make(map[string]*memKey, m.lastKeys)})
	}
	sg := m.segs[at]
	mk := sg.keys[string(part)]
	if mk == nil {
		mk = &memKey{part: unsafe.String(unsafe.SliceData(part), len(part))}
		mk.recs = mk.first[:0]
		sg.keys[mk.part] = mk
		sg.sorted = nil
		m.grow(sg, int64(len(mk.part)+memRecOverhead))
	}
	i, ok := search(mk.recs, ts, seq)
	if ok {
		old := mk.recs[i].val
		m.grow(sg, int64(len(val)-len(old)))
		mk.recs[i].val = val
		if undo {
			m.logged(undoSet, segStart, mk.part, ts, seq, old)
		}
		return
	}
	mk.recs = slices.Insert(mk.recs, i, memRec{ts: ts, seq: seq, val: val})
	m.grow(sg, int64(len(val)+16+memRecOverhead))
	if undo {
		m.logged(undoInserted, segStart, mk.part, ts, seq, nil)
	}
}

// logged logs the undo of a write to a j record (undoInserted, undoSet,
// undoRemoved), in place.
func (m *JoinMemory) logged(kind memUndoKind, segStart int64, part string, ts int64, seq uint64, val []byte) {
	u := m.undo.add()
	u.kind, u.segStart, u.part, u.ts, u.seq, u.val = kind, segStart, part, ts, seq, val
	m.undoBytes += memUndoOverhead + len(val) // the value is held by the undo log alone
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
			m.removeSeg(sg)
		}
	}
	return val, true
}

func (m *JoinMemory) grow(sg *memSegment, n int64) {
	sg.bytes += n
	m.size.Add(n)
}

func (m *JoinMemory) log(u memUndo) {
	m.undo.push(u)
	m.undoBytes += memUndoOverhead + len(u.key)
	if u.kind == undoSet || u.kind == undoRemoved || u.kind == undoRest {
		m.undoBytes += len(u.val) // held by the undo log alone
	}
}

// put writes a copy of value under key, logging its undo if undo. It
// returns copies of key and value in one allocation, the value the one
// it keeps: the changelog record's (store.Direct.Put).
func (m *JoinMemory) put(key, value []byte, undo bool) (k, v []byte) {
	kv := make([]byte, len(key)+len(value))
	k, v = kv[:len(key):len(key)], kv[len(key):]
	copy(k, key)
	copy(v, value)
	if segStart, part, ts, seq, ok := layout.SplitJoinKey(k); ok {
		m.setRec(segStart, part, ts, seq, v, undo)
		return k, v
	}
	old, had := m.restSet(k, v)
	if undo {
		m.log(memUndo{kind: undoRest, key: k, val: old, had: had})
	}
	return k, v
}

// restSet writes v under k in the B-tree and returns what k held.
func (m *JoinMemory) restSet(k, v []byte) (old []byte, had bool) {
	_, old, had = m.rest.ReplaceOrInsert(k, v)
	if had {
		m.size.Add(int64(len(v) - len(old)))
		return old, true
	}
	m.size.Add(int64(len(k) + len(v)))
	if len(k) > 0 && k[0] == layout.JoinRecord {
		m.restJ++
	}
	return nil, false
}

// restDel deletes k from the B-tree and returns the key and value it held.
func (m *JoinMemory) restDel(key []byte) (k, old []byte, had bool) {
	k, old, had = m.rest.Delete(key)
	if had {
		m.size.Add(-int64(len(k) + len(old)))
		if len(k) > 0 && k[0] == layout.JoinRecord {
			m.restJ--
		}
	}
	return k, old, had
}

// del deletes key, logging its undo if undo.
func (m *JoinMemory) del(key []byte, undo bool) bool {
	if segStart, part, ts, seq, ok := layout.SplitJoinKey(key); ok {
		val, had := m.removeRec(segStart, part, ts, seq)
		if had && undo {
			m.logged(undoRemoved, segStart, string(part), ts, seq, val)
		}
		return had
	}
	k, old, had := m.restDel(key)
	if had && undo {
		m.log(memUndo{kind: undoRest, key: k, val: old, had: true})
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
	for _, sg := range slices.Clone(m.segs) {
		p := segPrefix(sg.start)
		switch {
		case !segMeets(p, start, end):
		case segWithin(p, start, end):
			m.removeSeg(sg)
			m.lastKeys = len(sg.keys)
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

// segWithin says whether every key extending p lies in [start, end).
func segWithin(p, start, end []byte) bool {
	return bytes.Compare(p, start) >= 0 && (end == nil || bytes.Compare(p, end) < 0 && !bytes.HasPrefix(end, p))
}

// removeSeg takes sg out of segs.
func (m *JoinMemory) removeSeg(sg *memSegment) {
	if i, ok := m.segAt(sg.start); ok && m.segs[i] == sg {
		m.segs = slices.Delete(m.segs, i, i+1)
	}
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
	// Every key of a range within one key's records starts with j.
	if segStart, part, ok := oneKey(start, end); ok && m.restJ == 0 {
		if _, mk := m.find(segStart, part); mk != nil {
			// The keys are made in a buffer kept from range to
			// range, taken while in use (fn may range too).
			buf := m.rangeBuf
			m.rangeBuf = nil
			buf, err := keyRange(segStart, mk, start, end, buf, fn)
			m.rangeBuf = buf[:0]
			return err
		}
		return nil
	}
	restIn := m.restIn(start, end)
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
	for _, sg := range m.segs {
		if !segMeets(segPrefix(sg.start), start, end) {
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
	var out []kv
	for k, v := range m.rest.Ascend(bounds(start, end)) {
		out = append(out, kv{k, v})
	}
	return out
}

// bounds are the B-tree's bounds of [start, end); nil is open.
func bounds(start, end []byte) (btreemap.LowerBound[[]byte], btreemap.UpperBound[[]byte]) {
	lo, hi := btreemap.Min[[]byte](), btreemap.Max[[]byte]()
	if start != nil {
		lo = btreemap.GE(start)
	}
	if end != nil {
		hi = btreemap.LT(end)
	}
	return lo, hi
}

// First returns the smallest key in [start, end) and its value, which
// stay valid until the next write. Where the range holds a whole
// segment, as a join's search for its first segment does, the segment's
// smallest key is found without sorting its keys.
func (m *JoinMemory) First(start, end []byte) (key, value []byte, ok bool, err error) {
	if err := m.usable(); err != nil {
		return nil, nil, false, err
	}
	var rk, rv []byte
	rok := false
	for k, v := range m.rest.Ascend(bounds(start, end)) {
		rk, rv, rok = k, v, true
		break
	}
	for _, sg := range m.segs {
		p := segPrefix(sg.start)
		if !segMeets(p, start, end) {
			continue
		}
		var jk, jv []byte
		if segWithin(p, start, end) {
			var least *memKey
			for _, mk := range sg.keys {
				if least == nil || mk.part < least.part {
					least = mk
				}
			}
			r := least.recs[0]
			jk, jv = layout.AppendJoinKeyPart(nil, sg.start, least.part, r.ts, r.seq), r.val
		} else {
			_, _ = m.segRange(sg, start, end, nil, func(k, v []byte) error {
				jk, jv = bytes.Clone(k), v
				return errFound
			})
		}
		if jk == nil {
			continue
		}
		if rok && bytes.Compare(rk, jk) < 0 {
			break
		}
		return jk, jv, true, nil
	}
	return rk, rv, rok, nil
}

// errFound stops First's pass over a segment at the first key in range.
var errFound = errors.New("ops: found")

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
	if m.undo.n > 0 {
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
	m.segs = nil
	m.rest = btreemap.New[[]byte, []byte](16, bytes.Compare)
	m.restJ = 0
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
func (m *JoinMemory) Put(key, value []byte) (k, v []byte, err error) {
	if err := m.usable(); err != nil {
		return nil, nil, err
	}
	k, v = m.put(key, value, true)
	return k, v, nil
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
func (m *JoinMemory) Mark() { m.marked, m.mark = true, m.undo.n }

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
	m.undo.reset()
	m.undoBytes = 0
	m.marked = false
}

// undoTo undoes the writes logged past n, last first.
func (m *JoinMemory) undoTo(n int) {
	if m.closed {
		return
	}
	for i := m.undo.n - 1; i >= n; i-- {
		m.undoOne(m.undo.at(i))
	}
	m.undo.truncate(n)
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
		m.setRec(u.segStart, unsafe.Slice(unsafe.StringData(u.part), len(u.part)), u.ts, u.seq, u.val, false)
	case undoRest:
		m.undoBytes -= len(u.val)
		if u.had {
			m.restSet(u.key, u.val)
		} else {
			m.restDel(u.key)
		}
	case undoSegment:
		// The writes after the drop are undone already: no segment
		// of this start is left.
		m.undoBytes -= int(u.seg.bytes)
		at, _ := m.segAt(u.seg.start)
		m.segs = slices.Insert(m.segs, at, u.seg)
		m.size.Add(u.seg.bytes)
	}
}
