package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/RaduBerinde/btreemap"
)

// Staged is the store a task reads and writes: writes collect in a stage
// over the Engine and reach it only at Commit, after the Kafka transaction
// holding their changelog records has committed.
//
// Invariant 2 (ARCHITECTURE.md) is kept by this split: the engine only ever
// holds committed state, tagged by Commit with the changelog offset it
// reaches, and Abort discards the stage. After a crash the engine is still a
// committed state, so a restart replays only the changelog tail past its
// checkpoint instead of wiping it.
//
// The changelog records a Staged emits (see SetChangelog and
// SetRangeChangelog) are exactly the writes Commit applies: with the cache
// on, Flush emits the last write of each key and each range dropped, and
// Commit refuses to apply writes that were never flushed.
//
// The stage also caches committed values for reads: a key read from the
// engine, or written and committed, stays in the stage as a clean entry, so
// that the next transaction reads it from memory instead of a Pebble seek
// (most keys of a keyed aggregation are read again soon after they were
// written). Clean entries hold exactly the engine's value, so every read of
// the merged view is the same with or without them; Range and First skip
// them. The cache is bounded in bytes (WithReadCache): reads stop filling
// it once it is full, and it is dropped whole when a commit leaves it over
// the bound, or when a transaction aborts (its writes replaced the clean
// values they overwrote). Only the Staged writes
// its engine while the task runs; whoever writes the engine otherwise (a
// restore) must do it before the first read or call DropCache.
//
// A key the stage knows the committed state lacks (a read of it missed the
// engine, or the caller said so with PutNew) and that is deleted again
// before the flush, a window opened and closed within one transaction,
// reaches neither the changelog nor the engine: no committed state ever
// held it, so its tombstone would only cost a record to produce, to
// compact and to apply.
//
// A store whose keys expire in ranges (a stream join's segments) drops a
// range with DropRange: its keys are deleted as by Delete, but the
// changelog hears of the range in one record (SetRangeChangelog), not a
// tombstone per key, as Kafka Streams' segmented stores drop a segment
// without tombstones. A replay deletes the range at that record's place,
// so the engine still equals the replayed changelog.
//
// A key may also have a table update held back for the flush (PutHeld,
// TakeHeld): the runtime's folding of a table's updates, one per key, keeps
// them in the stage, reached from the key's entry, so holding costs no
// lookup of its own, and a unit's Rollback or an Abort takes them back with
// the writes.
//
// Over a Direct engine (direct.go) a Staged stages nothing: each write
// goes to the engine and its changelog record out at once (or into its
// group's pack, WithPacking), and the engine undoes what an Abort or a
// Rollback takes back.
//
// A Staged is used by one goroutine (its task's); only the Engine beneath it
// may be read by others.
type Staged struct {
	name      string
	engine    Engine
	direct    Direct // the engine, if it is one: nothing is staged (direct.go)
	cache     bool
	changelog func(key, value []byte)
	rangeLog  func(start, end []byte)
	packLog   func(key, value []byte)
	pack      *packer // with WithPacking (pack.go)
	// drops are the ranges dropped since the last Commit, as Writes with
	// End set, in the order dropped: Commit applies them before the keys
	// written. The changelog has heard of the first flushedDrops.
	drops        []Write
	flushedDrops int

	// index maps a key to its entry, dirty (written since the last
	// Commit) or clean (cached committed value). indexPeak is the most
	// keys it held since it was made or shrunk: one grown by a large
	// transaction is shrunk after it (trim).
	index     keyIndex
	indexPeak int
	// grown is the most entries a recent transaction made, decaying by
	// an eighth at each commit and abort (noteSize): trim keeps room for
	// that many. A job on a backlog makes every transaction about as
	// large, and regrowing the slices from their trimmed size in each
	// one, doubling after doubling, copied them over and over: 6 % of a
	// stream join's CPU in a bench profile.
	grown   int
	entries []stagedEntry
	// dirty holds the indices of the dirty entries in first-write order
	// (Commit sorts them by key), so Commit needs no map iteration.
	dirty []int
	// last is the index of the entry found or added last (see lookup).
	last int
	// ordered holds the dirty entries s.dirty[:orderedN] by key (key →
	// entry index), for Range and First: a range of a stage with many
	// writes then costs a seek and the entries in range, not a pass over
	// every write (a stream join ranges the other side's store for every
	// record). Only a stage that is ranged builds it, at the first Range
	// or First after its writes; Commit and Abort empty it.
	ordered  *btreemap.BTreeMap[[]byte, int]
	orderedN int
	// ranged says which keys the ordered index holds, by class: bit 0
	// the empty key, bit 1+b the keys whose first byte is b. A class
	// joins at the first Range or First that reaches into it and stays
	// for the store's life: a store's ranges keep to the same prefixes
	// (a window store ranges its time indexes, not its windows), and a
	// write outside them then costs no insertion.
	ranged [5]uint64
	// cached estimates the memory of entries in bytes; cacheLimit bounds
	// it at Commit (0: no clean entries are kept).
	cached, cacheLimit int
	// complete says whether every key the engine holds has an entry (1),
	// so that a key without one is absent from the engine and get need
	// not ask it; -1: not known to be; 0: not yet found out (see
	// isComplete). A window store that fits in the read cache stays
	// complete, and then the Get of every new window, which misses, costs
	// no engine seek.
	complete int8
	// pending holds indices of entries written since the last Flush (cache
	// mode only).
	pending []int
	// held holds the held updates (PutHeld), in the order their keys were
	// first held since the last TakeHeld: the entry and the value before
	// the first held write. The last write's record context is kept in
	// the entry, which that write touches anyway; a write to a held key
	// then touches nothing more, and Rollback restores the context with
	// the entry.
	held     []heldUpdate
	writes   []Write    // Commit's scratch, kept to avoid a slice per commit
	applied  []int      // Commit's scratch: the dirty entries it applies
	taken    []Held     // TakeHeld's scratch
	touched  byte       // TakeHeld's loads, kept so that they are made
	byPrefix []prefixed // sortIndices' scratch
	rest     []int      // orderApplied's scratch
	// unordered counts the commits whose order orderApplied could not
	// read from the ordered index (tests: it must stay 0).
	unordered int

	// A mark (see Mark) remembers how to undo the writes after it.
	marked      bool
	markEntries int        // len(entries) at Mark
	markPending int        // len(pending) at Mark
	markDirty   int        // len(dirty) at Mark
	markHeld    int        // len(held) at Mark
	markDrops   int        // len(drops) at Mark
	undo        []undoStep // older entries' states before each write after Mark, in write order

	// attached holds what operators keep about the store's contents
	// (Attach): a slice, not a map, since a store has one or two and a
	// stream join asks for its own at every record, where a map's
	// hashing of the key was 2 % of the join's CPU.
	attached []attachment

	stats Stats
}

type undoStep struct {
	i   int
	was stagedEntry
}

// heldUpdate is the update held for entries[i]: prev is the key's value
// before its first held write since the last TakeHeld (nil: absent).
type heldUpdate struct {
	i    int
	prev []byte
}

type stagedEntry struct {
	// key is owned by the stage and never mutated. A write replaces it
	// with an equal copy that the new value follows (colocate).
	key []byte
	// value is nil for a delete (dirty) or a key the engine lacks (clean).
	// Replaced on write, never mutated in place.
	value   []byte
	pending bool // in Staged.pending
	dirty   bool // in Staged.dirty
	// absent: the engine lacks the key and no value of it was emitted to
	// the changelog since the last Commit, so a delete of it need be
	// neither emitted nor applied. Always value == nil for a clean entry.
	absent bool
	// covered: a delete by DropRange, which the changelog hears of from
	// the range's record, not from a tombstone of its own.
	covered bool
	held    int32 // 1 + its index in Staged.held; 0: none
	// ts and meta are the record context of the last held write (PutHeld)
	// while held.
	ts   int64
	meta any
}

// silent says whether e is a delete that neither the changelog nor the
// engine is told of: of a key neither holds (absent), or one a dropped
// range's record and delete take out (covered).
func (e *stagedEntry) silent() bool { return e.value == nil && (e.absent || e.covered) }

// entryOverhead estimates the memory of an entry beyond its key and value:
// the entry and its index slots.
const entryOverhead = 128

// heldOverhead estimates the memory of a held update beyond the entry's:
// its heldUpdate and, while TakeHeld hands them out, its Held.
const heldOverhead = 160

// DefaultReadCache is the read cache bound of a Staged in bytes.
const DefaultReadCache = 4 << 20

// Stats are cumulative counters of a Staged, for metrics.
type Stats struct {
	Gets      int64 // calls to Get
	StageHits int64 // Gets answered by the stage (staged or cached) without reading the engine
	Puts      int64 // Puts with a non-nil value
	Deletes   int64 // Deletes, including Puts with a nil value
	// ChangelogRecords counts records handed to the changelog function,
	// whether or not their transaction later committed.
	ChangelogRecords int64
}

// StagedOption configures a Staged.
type StagedOption interface {
	apply(*Staged)
}

type stagedOptionFunc func(*Staged)

func (f stagedOptionFunc) apply(s *Staged) { f(s) }

// WithoutCache turns off folding: every Put and Delete emits its changelog
// record at once, so the changelog holds every update (as with Kafka
// Streams' caching disabled). Default: cache on, so repeated writes of a key
// within one commit fold into one changelog record emitted at Flush.
func WithoutCache() StagedOption {
	return stagedOptionFunc(func(s *Staged) { s.cache = false })
}

// WithReadCache bounds the committed values the stage keeps for reads to
// about n bytes (keys, values and bookkeeping); 0 keeps none. Default
// DefaultReadCache.
func WithReadCache(n int) StagedOption {
	return stagedOptionFunc(func(s *Staged) { s.cacheLimit = max(n, 0) })
}

// NewStaged returns a Staged store named name over e. The name is the
// store's user-given name, from which its changelog topic is derived.
func NewStaged(name string, e Engine, opts ...StagedOption) *Staged {
	s := &Staged{
		name:       name,
		engine:     e,
		cache:      true,
		index:      newKeyIndex(0),
		cacheLimit: DefaultReadCache,
	}
	for _, o := range opts {
		o.apply(s)
	}
	s.direct, _ = e.(Direct)
	if !s.cache && s.direct == nil {
		s.pack = nil // (WithPacking)
	}
	return s
}

// Name returns the store's name.
func (s *Staged) Name() string { return s.name }

// Engine returns the engine beneath the stage, which holds committed state
// only.
func (s *Staged) Engine() Engine { return s.engine }

// SetChangelog sets the function that receives changelog records; a nil
// value is a tombstone. Without the cache it is called inside Put and
// Delete; with it, inside Flush. The writes of keys packed (WithPacking)
// reach SetPackChangelog's receiver instead. The receiver owns the slices
// passed: the stage never writes to them again (it may still read the
// value until Commit, so the receiver must not modify it either).
func (s *Staged) SetChangelog(fn func(key, value []byte)) { s.changelog = fn }

// SetRangeChangelog sets the function that receives the changelog record
// of a range dropped by DropRange: start is the record's key, end its
// value, and the receiver marks the record as a range (a replay turns it
// into Write{Key: start, End: end}). It is called inside Flush, before the
// records of the keys written since the last one (inside DropRange without
// the cache). The receiver owns the slices.
func (s *Staged) SetRangeChangelog(fn func(start, end []byte)) { s.rangeLog = fn }

// Get reads the stage first, then the engine; a staged delete hides the
// engine's value. What it read from the engine it caches as a clean entry.
// The value is returned without a copy: the caller must not modify it.
func (s *Staged) Get(key []byte) ([]byte, bool, error) { return s.get(key, keepIfRoom) }

// GetForUpdate is Get for a key the caller writes next (a read-modify-write,
// as aggregations do): what it reads from the engine stays in the stage even
// when the read cache is full, since the write would keep it anyway, and the
// write then finds the key's entry without a second lookup.
func (s *Staged) GetForUpdate(key []byte) ([]byte, bool, error) { return s.get(key, keepAlways) }

// Peek is Get without keeping what it read: for a caller that keeps the
// key elsewhere while it is absent (the windows a window runtime holds in
// memory), to which an entry saying so would be a cost.
func (s *Staged) Peek(key []byte) ([]byte, bool, error) { return s.get(key, keepNever) }

// keep says what get keeps of what it read from the engine, or of the
// engine's lack of the key.
type keep int8

const (
	keepIfRoom keep = iota // while the read cache has room (Get)
	keepAlways             // a write follows (GetForUpdate)
	keepNever              // Peek
)

func (s *Staged) get(key []byte, mode keep) ([]byte, bool, error) {
	s.stats.Gets++
	if s.direct != nil {
		return s.direct.Get(key)
	}
	if i, ok := s.lookup(key); ok {
		s.stats.StageHits++
		v := s.entries[i].value
		return v, v != nil, nil
	}
	if len(s.drops) > 0 && s.dropped(key) {
		// A dropped range hides the engine's value. The engine holds
		// the key until Commit, so an entry for a write that follows
		// is the drop's covered delete, not absent (which would let a
		// later delete go without its tombstone).
		if mode == keepAlways {
			s.stage(key, nil, false, true)
		}
		return nil, false, nil
	}
	complete, err := s.isComplete()
	if err != nil {
		return nil, false, err
	}
	if complete {
		// The engine lacks the key. An entry keeps knowing it, if the
		// cache has room or a write follows.
		if mode == keepAlways || mode == keepIfRoom && s.cached < s.cacheLimit {
			s.add(bytes.Clone(key), nil, true)
		}
		return nil, false, nil
	}
	v, ok, err := s.engine.Get(key)
	if err != nil || mode == keepNever || mode == keepIfRoom && s.cached >= s.cacheLimit {
		// A full cache takes no more reads until the commit drops it:
		// a transaction reading many keys stays within the bound.
		return v, ok, err
	}
	if !ok {
		s.add(bytes.Clone(key), nil, true)
		return nil, false, nil
	}
	// A copy of the engine's copy, to have it beside the key (colocate):
	// the read from the engine costs far more.
	k, v := colocate(key, v)
	s.add(k, v, false)
	return v, true, nil
}

// isComplete says whether every key the engine holds has an entry. Not
// known (after an Abort, a DropCache, or at the start, when a restore may
// just have written the engine), it is found out: it is so when the
// engine is empty. Every write goes through the stage, and Commit keeps
// the entries of the keys it applies unless they outgrow the read cache,
// so it stays so until an entry of a key the engine holds is dropped.
func (s *Staged) isComplete() (bool, error) {
	if s.complete == 0 {
		s.complete = -1
		err := s.engine.Range(nil, nil, func(_, _ []byte) error { return errStop })
		switch {
		case err == nil:
			s.complete = 1
		case !errors.Is(err, errStop):
			s.complete = 0
			return false, fmt.Errorf("store: %s: %w", s.name, err)
		}
	}
	return s.complete == 1, nil
}

// add appends a clean entry; the stage owns key and value from now on.
// absent says the engine lacks the key (see stagedEntry).
func (s *Staged) add(key, value []byte, absent bool) int {
	i := len(s.entries)
	s.entries = append(s.entries, stagedEntry{key: key, value: value, absent: absent})
	s.index.Add(key, i)
	s.indexPeak = max(s.indexPeak, s.index.Len())
	s.cached += len(key) + len(value) + entryOverhead
	s.last = i
	return i
}

// lookup finds key's entry. The entry found last is checked first: a
// read-modify-write (Get, then Put of the same key) costs one map lookup,
// not two. Entries only move by truncation, which the bounds and key
// comparison see.
func (s *Staged) lookup(key []byte) (int, bool) {
	if i := s.last; i < len(s.entries) && bytes.Equal(s.entries[i].key, key) {
		return i, true
	}
	i, ok := s.index.Get(key, s.entries)
	if ok {
		s.last = i
	}
	return i, ok
}

// Put stages value under key, copying both. A nil value deletes key.
func (s *Staged) Put(key, value []byte) error {
	if value == nil {
		return s.Delete(key)
	}
	if s.direct != nil {
		return s.directPut(key, value)
	}
	s.stats.Puts++
	s.stage(key, value, false, false)
	return nil
}

// PutNew is Put for a key the caller knows the committed state lacks,
// because it reads that from another key kept with it in every committed
// state: a window's index entries are written and deleted with the
// window, so a window that GetForUpdate did not find in the engine has
// none. If the key is deleted again before the flush, neither the
// changelog nor the engine hears of it (see Staged). A key the stage
// already has an entry for keeps what the entry knows. Were the caller
// wrong, the engine would keep the committed value that the delete meant
// to remove, and so would the changelog: the two still agree.
func (s *Staged) PutNew(key, value []byte) error {
	if value == nil {
		return s.Delete(key)
	}
	if s.direct != nil {
		return s.directPut(key, value)
	}
	s.stats.Puts++
	s.stage(key, value, true, false)
	return nil
}

// Delete stages a delete of key.
func (s *Staged) Delete(key []byte) error {
	if s.direct != nil {
		return s.directDelete(key)
	}
	s.stats.Deletes++
	s.stage(key, nil, false, false)
	return nil
}

// DropRange deletes every key in [start, end) of the merged view, and has
// the changelog told so by one record of the range (SetRangeChangelog)
// instead of a tombstone per key; an empty range it leaves alone. Past the
// first key, it reads none of the engine's keys: the
// stage's entries in the range become deletes that neither the changelog
// nor the engine hears of (covered), reads hide the engine's keys in it
// until Commit deletes them with one range delete. A key written in the
// range after the drop stays. Two rules keep a compacted changelog's replay
// equal to the engine: start must be no key of the store (it is the
// record's key), and the ranges dropped from one start only grow, since
// compaction keeps the last record of a start.
func (s *Staged) DropRange(start, end []byte) error {
	if s.changelog != nil && s.rangeLog == nil {
		return fmt.Errorf("store: %s: a range dropped with no receiver of its changelog record", s.name)
	}
	if bytes.Compare(start, end) >= 0 {
		return nil
	}
	if s.direct != nil {
		return s.directDropRange(start, end)
	}
	if _, ok, err := s.Peek(start); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("store: %s: a range dropped from %q, a key of the store", s.name, start)
		}
		return err
	}
	// An empty range is no drop: no record, and the deletes in it keep
	// their tombstones. So what a drop writes depends on the store alone,
	// not on how the caller knew the range was due (a hint in memory that
	// the replay of an aborted transaction has anew).
	if _, _, ok, err := s.First(start, end); err != nil || !ok {
		return err
	}
	s.drops = append(s.drops, Write{Key: bytes.Clone(start), End: bytes.Clone(end)})
	if !s.cache {
		s.flushDrops()
	}
	// The entries in the range: a clean one, the engine's value, is
	// forgotten, and so says the key is gone, as it is after Commit; a
	// write since the last Commit becomes the drop's delete, in key order
	// (the order a Flush emits a key written again after the drop).
	var writes []int
	for i := range s.entries {
		e := &s.entries[i]
		if e.value == nil && (!e.dirty || e.covered) || !inRange(e.key, start, end) {
			continue
		}
		if e.dirty {
			writes = append(writes, i)
			continue
		}
		if s.marked && i < s.markEntries {
			s.undo = append(s.undo, undoStep{i: i, was: *e})
		}
		s.cached -= len(e.value)
		e.value, e.absent = nil, false // absent once the range is deleted, not before
	}
	s.sortIndices(writes)
	for _, i := range writes {
		s.stage(s.entries[i].key, nil, false, true) // finds entry i: no entry is added
	}
	return nil
}

// dropped says whether key is in a range dropped since the last Commit:
// the engine's value of it, if any, is gone.
func (s *Staged) dropped(key []byte) bool {
	for _, d := range s.drops {
		if inRange(key, d.Key, d.End) {
			return true
		}
	}
	return false
}

// engineRange calls fn for each key the engine holds in [start, end) (a
// nil bound is open) outside the ranges dropped since the last Commit,
// which the engine still holds: it ranges over the gaps between them. A
// walk checking each key against the drops would pass every key of a
// dropped range again, and a range dropped from the same start as an
// earlier one of the transaction, as a stream join drops its due
// segments, would pass every key of the earlier one (DropRange's First).
func (s *Staged) engineRange(start, end []byte, fn func(key, value []byte) error) error {
	from := start
	for {
		// Past every drop that holds from (the drops may overlap).
		for moved := true; moved; {
			moved = false
			for _, d := range s.drops {
				if inRange(from, d.Key, d.End) {
					from, moved = d.End, true
				}
			}
		}
		if end != nil && bytes.Compare(from, end) >= 0 {
			return nil
		}
		// Up to the next drop's start, if it is before end.
		to, last := end, true
		for _, d := range s.drops {
			if bytes.Compare(d.Key, from) > 0 && (to == nil || bytes.Compare(d.Key, to) < 0) {
				to, last = d.Key, false
			}
		}
		if err := s.engine.Range(from, to, fn); err != nil || last {
			return err
		}
		from = to
	}
}

// Logged says whether the merged view holds a key in [start, end) that the
// changelog has heard of: one the engine holds, or one a Flush emitted
// since the last Commit; not a write whose delete would be silent (a
// PutNew not yet flushed). A caller about to delete the keys of a range
// learns so whether a DropRange record would stand for anything: for keys
// the changelog never heard of, their own silent deletes are as good. The
// answer depends on the changelog alone, as the records the changelog
// gets do: not on where the transactions ended.
func (s *Staged) Logged(start, end []byte) (bool, error) {
	if s.direct != nil { // the changelog heard of every key at its write
		_, _, ok, err := s.directFirst(start, end)
		return ok, err
	}
	logged := false
	err := s.Range(start, end, func(k, _ []byte) error {
		if i, ok := s.lookup(k); ok && s.entries[i].absent {
			return nil
		}
		logged = true
		return errStop
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return logged, err
}

func inRange(key, start, end []byte) bool {
	return bytes.Compare(key, start) >= 0 && bytes.Compare(key, end) < 0
}

// flushDrops hands the changelog the records of the ranges dropped since
// the last Flush.
func (s *Staged) flushDrops() {
	for _, d := range s.drops[s.flushedDrops:] {
		if s.rangeLog != nil {
			s.stats.ChangelogRecords++
			s.rangeLog(d.Key, d.End)
		}
	}
	s.flushedDrops = len(s.drops)
}

// stage writes value (nil: a delete) to key's entry, adding one if the key
// has none (absent: one the committed state lacks, see PutNew; covered: a
// delete of DropRange), and returns the entry's index.
func (s *Staged) stage(key, value []byte, absent, covered bool) int {
	i, ok := s.lookup(key)
	if ok && s.marked && i < s.markEntries {
		s.undo = append(s.undo, undoStep{i: i, was: s.entries[i]})
	}
	if !ok {
		k, v := colocate(key, value)
		i = s.add(k, v, absent)
	} else {
		e := &s.entries[i]
		s.cached -= len(e.value)
		e.value = nil
		if value != nil {
			// A fresh slice, not a copy into the old one: the old value
			// may already be owned by the changelog receiver. It comes
			// with a copy of the key, so that the next lookup's key
			// comparison brings the value into the CPU's cache with it
			// (colocate).
			e.key, e.value = colocate(e.key, value)
			s.cached += len(value)
		}
	}
	e := &s.entries[i]
	e.covered = covered
	if !e.dirty {
		e.dirty = true
		s.dirty = append(s.dirty, i)
	}
	if !s.cache {
		s.emit(e)
		return i
	}
	if !e.pending {
		e.pending = true
		s.pending = append(s.pending, i)
	}
	return i
}

// PutHeld is Put (a nil value: Delete) for a table whose updates are held
// back until the flush rather than forwarded one by one (folding,
// processor.FoldUpdates; Kafka Streams' record cache): the stage also keeps,
// with the key's entry, the write's record context, ts and meta (the
// caller's), and the key's value before its first held write since the last
// TakeHeld, so that TakeHeld can hand out one update per key. A key without
// an entry, which GetForUpdate would have made, is read from the engine
// first.
func (s *Staged) PutHeld(key, value []byte, ts int64, meta any) error {
	if s.direct != nil {
		return fmt.Errorf("store: %s: updates held for the flush need a stage, and the store's engine has none", s.name)
	}
	i, ok := s.lookup(key)
	if !ok {
		if _, _, err := s.GetForUpdate(key); err != nil {
			return fmt.Errorf("store: %s: %w", s.name, err)
		}
		i = s.last // the entry the read added
	}
	prev := s.entries[i].value
	if value == nil {
		s.stats.Deletes++
	} else {
		s.stats.Puts++
	}
	s.stage(key, value, false, false) // finds entry i first: no second map lookup
	e := &s.entries[i]
	if e.held == 0 {
		s.held = append(s.held, heldUpdate{i: i, prev: prev})
		e.held = int32(len(s.held))
		s.cached += heldOverhead
	}
	// stage saved the entry for Rollback before this write.
	e.ts, e.meta = ts, meta
	return nil
}

// Held is a key's held update, as TakeHeld hands it out: the key's value
// before its first held write since the last TakeHeld and its value now
// (nil: absent), and the record context of its last held write.
type Held struct {
	Key, Prev, Value []byte
	Timestamp        int64
	Meta             any
}

// TakeHeld hands fn each key's held update, in the order the keys were first
// held, and forgets them: later writes hold anew. If fn fails, the updates
// not yet handed out are dropped and its error returned. fn may write to the
// store. The slices must not be modified. Like Flush, it must not be called
// between Mark and Release or Rollback.
func (s *Staged) TakeHeld(fn func(Held) error) error {
	taken := s.taken[:0]
	// This pass also reads a byte of each key and previous value: the
	// loads do not depend on one another, so their cache misses overlap
	// here instead of each stalling fn, which decodes them one by one.
	var touched byte
	for _, h := range s.held {
		e := &s.entries[h.i]
		taken = append(taken, Held{Key: e.key, Prev: h.prev, Value: e.value, Timestamp: e.ts, Meta: e.meta})
		e.held, e.ts, e.meta = 0, 0, nil
		if len(e.key) > 0 {
			touched ^= e.key[0]
		}
		if len(h.prev) > 0 {
			touched ^= h.prev[0]
		}
	}
	s.touched = touched
	s.cached -= len(s.held) * heldOverhead
	clear(s.held)
	s.held = s.held[:0]
	var err error
	for _, h := range taken {
		if err = fn(h); err != nil {
			break
		}
	}
	clear(taken)
	s.taken = taken[:0]
	return err
}

// Holding returns the number of keys with a held update.
func (s *Staged) Holding() int { return len(s.held) }

// emit hands the changelog e's value, unless it is the delete of a key no
// committed state held nor the changelog has a value of (absent), or of a
// range the changelog hears of as a whole (covered).
func (s *Staged) emit(e *stagedEntry) {
	if e.silent() {
		return
	}
	e.absent = false
	if s.changelog == nil {
		return
	}
	s.stats.ChangelogRecords++
	s.changelog(e.key, e.value)
}

// Range calls fn for each key in [start, end) of the merged view (stage over
// engine) in byte order; a nil bound is open and staged deletes are hidden.
// The slices passed to fn are valid only during the call and must not be
// modified. fn must not write to this Staged.
func (s *Staged) Range(start, end []byte, fn func(key, value []byte) error) error {
	if s.direct != nil {
		return s.direct.Range(start, end, fn)
	}
	var staged []int
	s.orderedIn(start, end, func(i int) bool {
		// Deletes of keys the engine lacks (absent) hide nothing, and
		// a window index's range holds every window closed since the
		// last commit.
		if e := &s.entries[i]; e.value != nil || !e.absent {
			staged = append(staged, i)
		}
		return true
	})
	i := 0
	// emitBefore hands fn the staged keys below limit (all of them if limit
	// is nil) and leaves i at the first staged key not below it.
	emitBefore := func(limit []byte) error {
		for ; i < len(staged); i++ {
			e := &s.entries[staged[i]]
			if limit != nil && bytes.Compare(e.key, limit) >= 0 {
				return nil
			}
			if e.value == nil {
				continue
			}
			if err := fn(e.key, e.value); err != nil {
				return err
			}
		}
		return nil
	}
	err := s.engineRange(start, end, func(k, v []byte) error {
		if err := emitBefore(k); err != nil {
			return err
		}
		if i < len(staged) {
			if e := &s.entries[staged[i]]; bytes.Equal(e.key, k) {
				i++
				if e.value == nil {
					return nil
				}
				return fn(e.key, e.value)
			}
		}
		return fn(k, v)
	})
	if err != nil {
		return err
	}
	return emitBefore(nil)
}

// First returns the smallest key in [start, end) of the merged view and its
// value, like the first call of Range: one seek of the staged keys and one
// of the engine (more only past staged deletes). The slices must not be
// modified.
func (s *Staged) First(start, end []byte) (key, value []byte, ok bool, err error) {
	if s.direct != nil {
		return s.directFirst(start, end)
	}
	var staged *stagedEntry
	s.orderedIn(start, end, func(i int) bool {
		if e := &s.entries[i]; e.value != nil {
			staged = e
			return false
		}
		return true
	})
	limit := end
	if staged != nil {
		limit = staged.key // an engine key must be smaller to win
	}
	err = s.engineRange(start, limit, func(k, v []byte) error {
		if i, ok := s.index.Get(k, s.entries); ok && s.entries[i].dirty {
			return nil // deleted, or overwritten (then at or after staged)
		}
		key, value, ok = bytes.Clone(k), bytes.Clone(v), true
		return errStop
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	if err != nil || ok {
		return key, value, ok, err
	}
	if staged != nil {
		return staged.key, staged.value, true, nil
	}
	return nil, nil, false, nil
}

var errStop = errors.New("store: stop")

// orderedIn calls fn with the index of each dirty entry whose key is in
// [start, end) (a nil bound is open), in key order, until fn returns false.
// The writes since the last call in the classes ranged so far join the
// ordered index first, and when this range reaches into new classes, the
// earlier writes in those too.
func (s *Staged) orderedIn(start, end []byte, fn func(i int) bool) {
	if len(s.dirty) == 0 {
		return
	}
	if s.ordered == nil {
		s.ordered = btreemap.New[[]byte, int](16, bytes.Compare)
	}
	lo, hi := 0, 256
	if len(start) > 0 {
		lo = 1 + int(start[0])
	}
	if end != nil {
		if len(end) == 0 {
			return // [start, "") is empty
		}
		hi = 1 + int(end[0])
		if len(end) == 1 {
			hi-- // keys that begin with end[0] are not below it
		}
	}
	var joined [5]uint64
	for c := lo; c <= hi; c++ {
		if s.ranged[c/64]&(1<<(c%64)) == 0 {
			joined[c/64] |= 1 << (c % 64)
		}
	}
	if joined != [5]uint64{} {
		for _, i := range s.dirty[:s.orderedN] {
			if c := keyClass(s.entries[i].key); joined[c/64]&(1<<(c%64)) != 0 {
				s.ordered.ReplaceOrInsert(s.entries[i].key, i)
			}
		}
		for j := range s.ranged {
			s.ranged[j] |= joined[j]
		}
	}
	s.syncOrdered()
	if lo > hi {
		return
	}
	bl, bh := btreemap.Min[[]byte](), btreemap.Max[[]byte]()
	if start != nil {
		bl = btreemap.GE(start)
	}
	if end != nil {
		bh = btreemap.LT(end)
	}
	s.ordered.AscendFunc(bl, bh, func(_ []byte, i int) bool { return fn(i) })
}

// syncOrdered adds the writes since the last call in the classes ranged so
// far to the ordered index.
func (s *Staged) syncOrdered() {
	for _, i := range s.dirty[s.orderedN:] {
		if s.isRanged(s.entries[i].key) {
			s.ordered.ReplaceOrInsert(s.entries[i].key, i)
		}
	}
	s.orderedN = len(s.dirty)
}

// isRanged says whether key's class is in the ordered index.
func (s *Staged) isRanged(key []byte) bool {
	c := keyClass(key)
	return s.ranged[c/64]&(1<<(c%64)) != 0
}

// orderApplied sorts applied, the dirty entries Commit applies, by key. In
// a stage that is ranged (a stream join's, a window store's expiry index)
// most of them are in the ordered index already, in order: their order is
// read from it, and only the others are sorted and merged in.
func (s *Staged) orderApplied(applied []int) {
	if s.ordered == nil || s.orderedN == 0 {
		s.sortIndices(applied)
		return
	}
	s.syncOrdered()
	rest := s.rest[:0]
	for _, i := range applied {
		if !s.isRanged(s.entries[i].key) {
			rest = append(rest, i)
		}
	}
	s.sortIndices(rest)
	// applied is rewritten in order: its entries are now in rest or in
	// the ordered index, which holds every dirty entry of a ranged
	// class (those Commit leaves out too, which are skipped).
	out, j := applied[:0], 0
	s.ordered.AscendFunc(btreemap.Min[[]byte](), btreemap.Max[[]byte](), func(k []byte, i int) bool {
		if s.entries[i].silent() {
			return true
		}
		for ; j < len(rest) && bytes.Compare(s.entries[rest[j]].key, k) < 0; j++ {
			out = append(out, rest[j])
		}
		out = append(out, i)
		return true
	})
	out = append(out, rest[j:]...)
	clear(rest)
	s.rest = rest[:0]
	if len(out) != len(applied) {
		// Not the ordered index's invariant: a defect, which the tests
		// count; the writes are still all applied, sorted.
		s.unordered++
		out = out[:0]
		for _, i := range s.dirty {
			if !s.entries[i].silent() {
				out = append(out, i)
			}
		}
		s.sortIndices(out)
	}
}

// keyClass is the class of key in Staged.ranged.
func keyClass(key []byte) int {
	if len(key) == 0 {
		return 0
	}
	return 1 + int(key[0])
}

// clearOrdered empties the ordered index, with the dirty entries.
func (s *Staged) clearOrdered() {
	if s.ordered != nil && s.orderedN > 0 {
		s.ordered.Clear(true)
	}
	s.orderedN = 0
}

// sortIndices sorts idx, indices of entries, by their keys. It orders them
// by the keys' first eight bytes first, held beside the indices, and
// compares whole keys only where those are equal: a sort that compared
// keys alone would read two keys from all over the heap per comparison.
//
// The eight bytes are taken past the bytes all the keys share: the keys of
// a range often share many (a window index's entries due at one time share
// their prefix byte and the time), and prefixes that are all equal would
// leave every comparison to the keys.
func (s *Staged) sortIndices(idx []int) {
	if len(idx) < 2 {
		return
	}
	first := s.entries[idx[0]].key
	shared := len(first)
	for _, i := range idx[1:] {
		k := s.entries[i].key
		n := min(shared, len(k))
		j := 0
		for j < n && k[j] == first[j] {
			j++
		}
		shared = j
		if shared == 0 {
			break
		}
	}
	byPrefix := s.byPrefix[:0]
	if cap(byPrefix) < len(idx) {
		byPrefix = make([]prefixed, 0, len(idx))
	}
	for _, i := range idx {
		byPrefix = append(byPrefix, prefixed{prefix: keyPrefix(s.entries[i].key[shared:]), i: i})
	}
	slices.SortFunc(byPrefix, func(a, b prefixed) int {
		if c := cmp.Compare(a.prefix, b.prefix); c != 0 {
			return c
		}
		return bytes.Compare(s.entries[a.i].key[shared:], s.entries[b.i].key[shared:])
	})
	for j, p := range byPrefix {
		idx[j] = p.i
	}
	s.byPrefix = byPrefix[:0]
}

// prefixed is an entry's index with its key's prefix (keyPrefix).
type prefixed struct {
	prefix uint64
	i      int
}

// keyPrefix is k's first eight bytes as a big-endian number, padded with
// zeros: keys in byte order have prefixes in the same order, or equal ones.
func keyPrefix(k []byte) uint64 {
	if len(k) >= 8 {
		return binary.BigEndian.Uint64(k)
	}
	var b [8]byte
	copy(b[:], k)
	return binary.BigEndian.Uint64(b[:])
}

// Flush emits, with the cache on, one changelog record per key written since
// the last Flush, carrying its latest value, in the order the keys were first
// written since then (which a replay repeats: invariant 5). The runtime calls
// Flush right before ending the transaction; more writes may follow it and
// are emitted by the next Flush. Without the cache it does nothing, except
// that with packing (WithPacking) it sends the pending packs; with the cache
// the packs carry the records of the keys packed.
func (s *Staged) Flush() error {
	if s.pack != nil {
		if err := s.packReady(); err != nil {
			return err
		}
	}
	// The ranges first: a key written in a range after it was dropped
	// must follow its record, and the keys written before, which it
	// covers, are not emitted.
	s.flushDrops()
	for _, i := range s.pending {
		e := &s.entries[i]
		e.pending = false
		if s.pack != nil && !e.silent() && s.packWrite(e.key, e.value) {
			e.absent = false
			continue
		}
		s.emit(e)
	}
	s.pending = s.pending[:0]
	if s.pack != nil {
		s.flushPacks()
	}
	return nil
}

// ErrUnflushed is returned by Commit when writes made with the cache on have
// not been emitted to the changelog by a Flush: applying them would leave
// local state ahead of the changelog, which a restore could not reproduce.
// So it is when held updates were not taken (TakeHeld): they would never
// be forwarded.
var ErrUnflushed = errors.New("store: commit with unflushed writes")

// Commit applies everything staged since the last Commit or Abort to the
// engine in one atomic step, with checkpoint: the offset of the last
// changelog record of this store in the committed transaction, or
// NoCheckpoint if it wrote none. It is called only after the transaction
// has committed (invariant 2). On error the stage is kept, so Commit may be
// retried; if it cannot succeed, the engine is behind the changelog and must
// be restored from it.
func (s *Staged) Commit(checkpoint int64) error {
	if s.direct != nil {
		return s.directCommit(checkpoint)
	}
	if s.changelog != nil && len(s.pending)+len(s.drops)-s.flushedDrops > 0 {
		return fmt.Errorf("%w: %d keys and %d ranges in store %s", ErrUnflushed, len(s.pending), len(s.drops)-s.flushedDrops, s.name)
	}
	if len(s.held) > 0 {
		return fmt.Errorf("%w: %d held updates in store %s", ErrUnflushed, len(s.held), s.name)
	}
	if s.pack != nil {
		s.pack.reset() // (Flush sent every pack)
	}
	if len(s.dirty) == 0 && len(s.drops) == 0 && checkpoint == NoCheckpoint {
		return nil
	}
	s.noteSize()
	// The deletes of keys the engine lacks (absent) are left out: the
	// changelog did not get them either (emit).
	//
	// In key order: Pebble inserts a batch into its memtable's skiplist
	// one key after another, and finds where a key goes from where the
	// one before it went when they are close.
	applied := s.applied[:0]
	if cap(applied) < len(s.dirty) {
		applied = make([]int, 0, len(s.dirty)) // not grown by doubling
	}
	// So are the deletes of a dropped range (covered): the range's
	// delete, first, takes them out.
	for _, i := range s.dirty {
		if e := &s.entries[i]; !e.silent() {
			applied = append(applied, i)
		}
	}
	s.orderApplied(applied)
	ws := s.writes[:0]
	if cap(ws) < len(s.drops)+len(applied) {
		ws = make([]Write, 0, len(s.drops)+len(applied))
	}
	ws = append(ws, s.drops...)
	for _, i := range applied {
		e := &s.entries[i]
		ws = append(ws, Write{Key: e.key, Value: e.value})
	}
	s.applied = applied[:0]
	var err error
	if len(ws) > 0 || checkpoint != NoCheckpoint {
		err = s.engine.Apply(ws, checkpoint)
	}
	clear(ws)
	s.writes = ws[:0]
	if err != nil {
		return fmt.Errorf("store: commit %s: %w", s.name, err)
	}
	s.clearDrops()
	if s.cached > s.cacheBound() {
		s.keepCommitted()
		return nil
	}
	// The committed writes stay as the engine's values.
	for _, i := range s.dirty {
		e := &s.entries[i]
		e.dirty, e.absent, e.covered = false, e.value == nil, false
	}
	s.dirty = s.dirty[:0]
	s.clearOrdered()
	s.Release()
	s.trim()
	return nil
}

// keepCommitted empties a stage over its read cache's bound after a
// commit, as reset does, except that a complete stage keeps the entries of
// the keys the engine holds, if they fit the bound: it stays complete. The
// rest are keys the engine lacks, such as windows opened and closed since
// the last commit.
func (s *Staged) keepCommitted() {
	if s.complete != 1 {
		s.reset()
		return
	}
	size := 0
	for i := range s.entries {
		if e := &s.entries[i]; e.value != nil {
			size += len(e.key) + len(e.value) + entryOverhead
		}
	}
	if size > s.cacheBound() {
		s.reset()
		s.complete = -1 // the engine holds keys without entries now
		return
	}
	s.index.Clear()
	kept := 0
	for i := range s.entries {
		e := s.entries[i]
		if e.value == nil {
			continue
		}
		e.dirty, e.pending, e.absent, e.held, e.ts, e.meta = false, false, false, 0, 0, nil
		s.entries[kept] = e
		s.index.Add(e.key, kept)
		kept++
	}
	clear(s.entries[kept:])
	s.entries = s.entries[:kept]
	s.pending = s.pending[:0]
	s.dirty = s.dirty[:0]
	s.clearOrdered()
	clear(s.held)
	s.held = s.held[:0]
	s.cached = size
	s.last = 0
	s.Release()
	s.trim()
}

// Abort discards the stage, flushed or not; the transaction that carried
// any flushed records aborted with them. The cached values go too: the
// aborted writes replaced the ones they overwrote.
func (s *Staged) Abort() {
	if s.pack != nil {
		s.pack.reset()
	}
	if s.direct != nil {
		s.direct.Abort()
		s.detach()
		return
	}
	s.noteSize()
	s.reset()
	s.detach()
}

// DropCache forgets the cached committed values, for whoever writes the
// engine other than through this Staged. It must not be called with writes
// staged; if it is, it keeps them (a range dropped is a write, though no
// key of it may be staged).
func (s *Staged) DropCache() {
	if len(s.dirty) == 0 && len(s.drops) == 0 {
		s.reset()
	}
	s.detach()
}

// Attach keeps v with the store under key: what the operators that share
// the store keep in memory about its contents (which keys and times a
// stream join's side stores, which both sides read). Abort and DropCache
// drop it, since what it described is gone, so it must describe the
// committed contents and the open transaction's writes, and be made anew
// after them; Rollback does not, so a unit's writes may stay in it.
func (s *Staged) Attach(key, v any) {
	for i := range s.attached {
		if s.attached[i].key == key {
			s.attached[i].v = v
			return
		}
	}
	s.attached = append(s.attached, attachment{key, v})
}

// Attached returns what is kept under key (Attach), or nil.
func (s *Staged) Attached(key any) any {
	for _, a := range s.attached {
		if a.key == key {
			return a.v
		}
	}
	return nil
}

type attachment struct{ key, v any }

// detach drops what is attached.
func (s *Staged) detach() {
	clear(s.attached)
	s.attached = s.attached[:0]
}

// Sized is what a value kept with a store (Attach) implements to be
// counted in the store's memory: Bytes estimates what it holds. It counts
// in the stage's Bytes, and within the read cache's bound: the committed
// values cached after a Commit get what it leaves of the bound. It keeps
// itself within ReadCacheLimit.
type Sized interface{ Bytes() int }

// ReadCacheLimit returns the read cache's bound (WithReadCache): what the
// stage keeps in memory between transactions, its cached values and the
// Sized values attached to it together.
func (s *Staged) ReadCacheLimit() int { return s.cacheLimit }

// attachedBytes sums the Bytes of the Sized values attached.
func (s *Staged) attachedBytes() int {
	n := 0
	for _, a := range s.attached {
		if sz, ok := a.v.(Sized); ok {
			n += sz.Bytes()
		}
	}
	return n
}

// cacheBound is what the committed values cached after a Commit may take:
// the read cache's bound less what is attached.
func (s *Staged) cacheBound() int { return max(s.cacheLimit-s.attachedBytes(), 0) }

// Mark starts a unit of writes that Rollback can undo as a whole, without
// discarding what was staged before: how a task processes one record
// atomically, so that a record skipped after an error leaves no trace.
// Release ends the unit and keeps its writes. Flush and Commit must not be
// called between Mark and Release or Rollback. Without the cache, the
// changelog records emitted inside the unit are the caller's to drop.
func (s *Staged) Mark() {
	if s.direct != nil {
		s.direct.Mark()
		if s.pack != nil {
			s.pack.mark()
		}
		return
	}
	s.marked = true
	s.markEntries, s.markPending, s.markDirty, s.markHeld = len(s.entries), len(s.pending), len(s.dirty), len(s.held)
	s.markDrops = len(s.drops)
	s.undo = s.undo[:0]
}

// Release ends the unit begun by Mark, keeping its writes.
func (s *Staged) Release() {
	if s.direct != nil {
		s.direct.Release()
		if s.pack != nil {
			s.pack.release()
		}
		return
	}
	s.marked = false
	clear(s.undo)
	s.undo = s.undo[:0]
}

// Rollback undoes every write since Mark and ends the unit.
func (s *Staged) Rollback() {
	if s.direct != nil {
		s.direct.Rollback()
		if s.pack != nil {
			s.pack.rollback()
		}
		return
	}
	if !s.marked {
		return
	}
	for j := len(s.undo) - 1; j >= 0; j-- {
		u := &s.undo[j]
		e := &s.entries[u.i]
		s.cached += len(u.was.value) - len(e.value)
		*e = u.was
	}
	// The keys first written since the mark leave the ordered index.
	if s.orderedN > s.markDirty {
		for _, i := range s.dirty[s.markDirty:s.orderedN] {
			s.ordered.Delete(s.entries[i].key)
		}
		s.orderedN = s.markDirty
	}
	for i := s.markEntries; i < len(s.entries); i++ {
		e := &s.entries[i]
		s.cached -= len(e.key) + len(e.value) + entryOverhead
		s.index.Delete(e.key, i)
	}
	clear(s.entries[s.markEntries:])
	s.entries = s.entries[:s.markEntries]
	s.pending = s.pending[:s.markPending]
	s.dirty = s.dirty[:s.markDirty]
	clear(s.drops[s.markDrops:])
	s.drops = s.drops[:s.markDrops]
	s.flushedDrops = min(s.flushedDrops, s.markDrops) // (no Flush inside a unit)
	s.cached -= (len(s.held) - s.markHeld) * heldOverhead
	clear(s.held[s.markHeld:])
	s.held = s.held[:s.markHeld]
	s.Release()
}

func (s *Staged) clearDrops() {
	clear(s.drops)
	s.drops = s.drops[:0]
	s.flushedDrops = 0
}

func (s *Staged) reset() {
	s.complete = 0 // found out again when needed
	s.index.Clear()
	clear(s.entries) // drop references for the collector; the capacity is reused
	s.entries = s.entries[:0]
	s.pending = s.pending[:0]
	s.dirty = s.dirty[:0]
	s.clearDrops()
	s.clearOrdered()
	clear(s.held)
	s.held = s.held[:0]
	s.cached = 0
	s.Release()
	s.trim()
}

// colocate copies key and value (nil: none) into one allocation, the key
// first, capped so that no append can reach into the value. An entry's
// key and value then share cache lines: a lookup, whose key comparison
// reads the key, finds the value already loaded.
func colocate(key, value []byte) (k, v []byte) {
	buf := make([]byte, len(key)+len(value))
	copy(buf, key)
	if value != nil {
		copy(buf[len(key):], value)
		v = buf[len(key):]
	}
	return buf[:len(key):len(key)], v
}

// noteSize counts the entries of the transaction ending in grown.
func (s *Staged) noteSize() {
	s.grown = max(len(s.entries), s.grown-s.grown/8)
}

// trim lets go of what a large transaction grew between commits: the
// slices' arrays and the index's table beyond what the read cache's
// entries and recent transactions (grown) need. Kept, the largest
// transaction the memory budget lets through would stay allocated after
// it, outside the budget's count, however small the ones after it. Room
// for transactions as large as the recent ones adds nothing to the peak:
// the next such transaction would take it again.
func (s *Staged) trim() {
	n := max(1024, s.cacheLimit/entryOverhead, s.grown)
	if s.indexPeak > 2*n && s.index.Len() <= n {
		s.index.Shrink()
		s.indexPeak = s.index.Len()
	}
	if cap(s.entries) > 2*n && len(s.entries) <= n {
		s.entries = append(make([]stagedEntry, 0, n), s.entries...)
	}
	s.dirty = trimmed(s.dirty, n)
	s.pending = trimmed(s.pending, n)
	s.held = trimmed(s.held, n)
	s.writes = trimmed(s.writes, n)
	s.applied = trimmed(s.applied, n)
	s.taken = trimmed(s.taken, n)
	s.byPrefix = trimmed(s.byPrefix, n)
	s.rest = trimmed(s.rest, n)
	s.undo = trimmed(s.undo, n)
}

// trimmed is x, or nil if x is empty and its capacity is over n.
func trimmed[T any](x []T, n int) []T {
	if len(x) == 0 && cap(x) > n {
		return nil
	}
	return x
}

// Dirty returns the number of staged keys.
func (s *Staged) Dirty() int { return len(s.dirty) }

// Bytes estimates the memory the stage holds, staged writes and cached
// committed values alike (keys, values and bookkeeping): what the
// instance's memory budget counts (processor.MemoryBudget). After a Commit
// it is at most the read cache's bound (WithReadCache). What is attached
// to the store and Sized counts too.
// Over a Direct engine, so does what the engine could undo.
func (s *Staged) Bytes() int {
	n := s.cached + s.attachedBytes()
	if s.direct != nil {
		n += s.direct.Undoing()
	}
	if s.pack != nil {
		n += s.pack.bytes
	}
	return n
}

// Stats returns the cumulative counters.
func (s *Staged) Stats() Stats { return s.stats }
