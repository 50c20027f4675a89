package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// The Pebble keyspace is split by a one-byte prefix so that no user key can
// ever collide with, or be deleted as, the checkpoint: metadata lives under
// prefixMeta, user keys under prefixUser. Wipe deletes [prefixMeta,
// prefixEnd), i.e. everything this package ever writes.
const (
	prefixMeta byte = 0x00
	prefixUser byte = 0x01
	prefixEnd  byte = 0x02
)

// ErrCorrupted is wrapped by the errors of a Pebble store whose directory
// holds a damaged database (a disk fault, or files damaged outside Pebble),
// always through a *CorruptedError naming the directory. Nothing in it can
// be trusted, so the recovery is to remove the directory and restore the
// store from its changelog (processor does).
var ErrCorrupted = errors.New("store: corrupted")

// CorruptedError is the error of an operation that found the Pebble
// database in Dir damaged; it matches ErrCorrupted.
type CorruptedError struct {
	Dir string
	Err error
}

func (e *CorruptedError) Error() string {
	return fmt.Sprintf("store: corrupted: pebble %s: %v", e.Dir, e.Err)
}
func (e *CorruptedError) Unwrap() error        { return e.Err }
func (e *CorruptedError) Is(target error) bool { return target == ErrCorrupted }

// corrupted wraps err as a *CorruptedError when Pebble reports corruption.
func corrupted(dir string, err error) error {
	// Pebble marks corruption with cockroachdb/errors' marks, which the
	// standard errors.Is does not see.
	if err != nil && pebble.IsCorruptionError(err) {
		return &CorruptedError{Dir: dir, Err: err}
	}
	return err
}

var (
	checkpointKey = []byte{prefixMeta, 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't'}
	userLower     = []byte{prefixUser}
	userUpper     = []byte{prefixEnd}
	wipeLower     = []byte{prefixMeta}
	wipeUpper     = []byte{prefixEnd}
)

const (
	// A process may hold dozens of stores (one per task and store name), so
	// each gets a small memtable rather than a large shared write budget;
	// state stores see small, frequent batches.
	pebbleMemTableSize = 4 << 20
	// Reads are mostly served by the stage or by recently written blocks; a
	// modest per-store cache bounds memory at dozens of open stores.
	pebbleCacheSize = 8 << 20
)

// Pebble is an Engine on a Pebble database in one directory.
//
// Invariant 2 (ARCHITECTURE.md): Apply writes the user writes and the
// checkpoint in one Pebble batch, so they become durable together or not at
// all.
//
// Batches are committed without fsync, and Pebble then keeps the tail of its
// WAL (the current 32 KiB block) in process memory until the block fills or
// the database closes, so a crash, even of the process alone, may lose the
// last few applied batches. It loses them whole, each with its checkpoint:
// WAL replay stops at the first incomplete batch. The engine is then an
// older committed state, never a torn one, and the restore replays a little
// more of the changelog past its checkpoint. That is the trade: no fsync per
// store per commit, in exchange for a slightly longer replay after a crash.
type Pebble struct {
	// mu excludes Close from in-flight operations; Pebble panics on use of
	// a closed DB. Get and Range hold it shared, so readers on other
	// goroutines run alongside the task's Apply.
	mu  sync.RWMutex
	db  *pebble.DB // nil once closed
	dir string
	// checkpoint mirrors the stored one (read at open, kept in step by
	// Apply and Wipe) so Checkpoint costs no read; atomic because Apply
	// updates it under the shared lock.
	checkpoint atomic.Int64

	// ranges is an iterator kept from one Range to the next: making one
	// costs more than a short range (a stream join ranges the other side's
	// store for every record), and SetBounds readies a kept one for the
	// next. gets is one kept from one Get to the next, which reads with
	// L6's filters (see Get). An iterator reads the database as it was
	// when it was made, so each is used only while no write came since;
	// every write (Apply, Wipe) counts in gen and drops both, so that they
	// pin no memtable or file past a write. Pebble's compactions count
	// too (openPebble), so that a store that is only read lets the files
	// they replace go at its next read.
	iterMu sync.Mutex
	ranges kept
	gets   kept
	gen    *atomic.Uint64
}

// kept is an iterator kept for the next read (nil: none), and the writes
// gen had counted when it was made.
type kept struct {
	it  *pebble.Iterator
	gen uint64
}

var _ Engine = (*Pebble)(nil)

// OpenPebble opens (creating if needed) the Pebble database in dir, with a
// block cache of its own and the default memtable size. Only one Pebble may
// have dir open at a time; Pebble's lock file enforces this.
func OpenPebble(dir string) (*Pebble, error) { return OpenPebbleWith(dir, PebbleOptions{}) }

// PebbleOptions size the memory of a Pebble store. The zero value is
// OpenPebble's: a block cache of its own (8 MiB) and 4 MiB memtables.
type PebbleOptions struct {
	// Cache is the block cache, shared by every store opened with it: a
	// process with dozens of stores keeps one budget for reads instead of
	// dozens of small caches that each thrash on their own. nil: a cache
	// of 8 MiB for this store alone.
	Cache *Cache
	// MemTableSize is the size of each memtable in bytes; Pebble keeps up
	// to two per store (one being written, one being flushed), so a store
	// holds up to twice this. 0: 4 MiB.
	MemTableSize int64
}

// Cache is a Pebble block cache that stores can share (PebbleOptions.Cache).
// Each store holds a reference of its own while open, so Close may be
// called while stores still use it: its memory goes when the last of them
// closes.
type Cache struct{ c *pebble.Cache }

// NewCache returns a block cache of size bytes.
func NewCache(size int64) *Cache { return &Cache{c: pebble.NewCache(size)} }

// Size returns the bytes the cache holds now.
func (c *Cache) Size() int64 { return c.c.Size() }

// MaxSize returns the cache's capacity in bytes.
func (c *Cache) MaxSize() int64 { return c.c.MaxSize() }

// Close drops the caller's reference. It must be called once.
func (c *Cache) Close() { c.c.Unref() }

// MinMemTableSize is the smallest memtable OpenPebbleWith uses: below it,
// a store flushes tiny sstables so often that compactions dominate.
const MinMemTableSize = 256 << 10

// OpenPebbleWith is OpenPebble with the memory sized by o.
func OpenPebbleWith(dir string, o PebbleOptions) (*Pebble, error) {
	var c *pebble.Cache
	if o.Cache != nil {
		c = o.Cache.c
	} else {
		c = pebble.NewCache(pebbleCacheSize)
		// The DB takes its own reference to the cache; ours is dropped either way.
		defer c.Unref()
	}
	mt := int64(pebbleMemTableSize)
	if o.MemTableSize > 0 {
		mt = max(o.MemTableSize, MinMemTableSize)
	}
	opts := &pebble.Options{
		Cache:        c,
		MemTableSize: uint64(mt),
		Logger:       quietLogger{},
		// Pebble's default reports on-disk corruption through the
		// logger's Fatalf, which ends the process: one damaged store
		// would stop every task of the instance. The read that found
		// it returns an error marked pebble.ErrCorruption anyway,
		// which corrupted turns into a *CorruptedError for the
		// processor to wipe and restore the store.
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			quietLogger{}.Errorf("%s", info)
		}},
	}
	// Bloom filters on every level: most Gets of a stateful operator ask
	// for keys that do not exist yet (a new key, a new window), and a
	// filter answers those without reading a block.
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	return openPebble(dir, opts)
}

// openPebble opens the database in dir with opts and reads its checkpoint.
func openPebble(dir string, opts *pebble.Options) (*Pebble, error) {
	// A compaction replaces files, but a kept iterator pins the ones it
	// read until the next write, or for good in a store that is only read
	// (a global table, after its restore): disk that nothing frees.
	// Counting compactions as writes makes the next read take a fresh
	// iterator instead, and the old files go. (A flush only retires a
	// memtable, which the budget already counts twice per store.)
	gen := new(atomic.Uint64)
	if opts.EventListener == nil {
		opts.EventListener = &pebble.EventListener{}
	}
	opts.EventListener.CompactionEnd = func(pebble.CompactionInfo) { gen.Add(1) }
	db, err := pebble.Open(dir, opts)
	if err != nil {
		if err := corrupted(dir, err); err != nil && errors.Is(err, ErrCorrupted) {
			return nil, err
		}
		return nil, fmt.Errorf("store: open pebble %s: %w", dir, err)
	}
	p := &Pebble{db: db, dir: dir, gen: gen}
	cp, err := p.readCheckpoint()
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	p.checkpoint.Store(cp)
	return p, nil
}

func (p *Pebble) readCheckpoint() (int64, error) {
	v, closer, err := p.db.Get(checkpointKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return NoCheckpoint, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read checkpoint: %w", corrupted(p.dir, err))
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, &CorruptedError{Dir: p.dir, Err: fmt.Errorf("checkpoint of %d bytes", len(v))}
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// Get returns a copy of the value stored under key.
//
// It seeks an iterator kept from the last Get rather than calling Pebble's
// Get, which makes an iterator of every level it reads anew for each key.
// The kept iterator also reads L6's filters, which Pebble's Get never does:
// most keys a stateful operator asks the engine for are new (a bill not
// seen yet, a key not counted yet), and in a database this small almost
// every key lives in L6. BenchmarkPebbleGet (145,000 keys, most in L6, a
// shared block cache): 1.4 µs a random hit and 0.6 µs a miss, against 1.9
// and 2.2 µs with Pebble's Get.
func (p *Pebble) Get(key []byte) ([]byte, bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.db == nil {
		return nil, false, ErrClosed
	}
	k := userKey(key)
	it, gen := p.takeIter(&p.gets)
	if it == nil {
		var err error
		if it, err = p.db.NewIter(&pebble.IterOptions{UseL6Filters: true}); err != nil {
			return nil, false, fmt.Errorf("store: get: %w", err)
		}
	}
	// The default comparer's prefix is the whole key, so a key found is
	// key; compared all the same, as Pebble's Get does.
	if !it.SeekPrefixGE(k) || !bytes.Equal(it.Key(), k) {
		if err := it.Error(); err != nil {
			_ = it.Close()
			return nil, false, fmt.Errorf("store: get: %w", corrupted(p.dir, err))
		}
		p.keepIter(&p.gets, it, gen)
		return nil, false, nil
	}
	v, err := it.ValueAndErr()
	if err != nil {
		_ = it.Close()
		return nil, false, fmt.Errorf("store: get: %w", corrupted(p.dir, err))
	}
	// make, not bytes.Clone: an empty stored value must come back non-nil,
	// since nil means "deleted" everywhere else in this package. A copy,
	// since the iterator's value lasts only until its next move.
	out := make([]byte, len(v))
	copy(out, v)
	p.keepIter(&p.gets, it, gen)
	return out, true, nil
}

// Range calls fn for each key in [start, end) in byte order; a nil bound is
// open. fn must not call Close on this Pebble (it would wait for Range).
func (p *Pebble) Range(start, end []byte, fn func(key, value []byte) error) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.db == nil {
		return ErrClosed
	}
	lower, upper := userLower, userUpper
	if start != nil {
		lower = userKey(start)
	}
	if end != nil {
		upper = userKey(end)
	}
	it, gen := p.takeIter(&p.ranges)
	if it != nil {
		it.SetBounds(lower, upper)
	} else {
		var err error
		if it, err = p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper}); err != nil {
			return fmt.Errorf("store: range: %w", err)
		}
	}
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("store: range: %w", corrupted(p.dir, err))
		}
		if err := fn(it.Key()[1:], v); err != nil {
			p.keepIter(&p.ranges, it, gen)
			return err
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return fmt.Errorf("store: range: %w", corrupted(p.dir, err))
	}
	p.keepIter(&p.ranges, it, gen)
	return nil
}

// takeIter hands out k's iterator if no write came since it was made (nil
// if there is none), and the count of writes a new one would be made at:
// read before it is made, so that a write while it is made leaves it
// unkept rather than kept stale. A reader on another goroutine at the same
// time gets none and makes its own.
func (p *Pebble) takeIter(k *kept) (*pebble.Iterator, uint64) {
	p.iterMu.Lock()
	defer p.iterMu.Unlock()
	gen := p.gen.Load()
	it := k.it
	k.it = nil
	if it != nil && k.gen != gen {
		_ = it.Close()
		it = nil
	}
	return it, gen
}

// keepIter keeps it, made when gen writes had been counted, in k for the
// next read, unless a write came since or k holds another.
func (p *Pebble) keepIter(k *kept, it *pebble.Iterator, gen uint64) {
	p.iterMu.Lock()
	defer p.iterMu.Unlock()
	if k.it != nil || gen != p.gen.Load() {
		_ = it.Close()
		return
	}
	k.it, k.gen = it, gen
}

// wrote counts a write and drops the kept iterators, which read the
// database as it was before it.
func (p *Pebble) wrote() {
	p.gen.Add(1)
	p.iterMu.Lock()
	defer p.iterMu.Unlock()
	for _, k := range []*kept{&p.ranges, &p.gets} {
		if k.it != nil {
			_ = k.it.Close()
			k.it = nil
		}
	}
}

// batchSize is a bound on the bytes of a Pebble batch of ws and a
// checkpoint: its header, and each write's kind, lengths (varints of at
// most 5 bytes: no key or value reaches 4 GiB), prefixed key and value.
func batchSize(ws []Write) int {
	n := 12 + 1 + 5 + len(checkpointKey) + 5 + 8
	for _, w := range ws {
		n += 1 + 5 + 1 + len(w.Key) + 5 + 1 + len(w.Value) + len(w.End)
	}
	return n
}

// Apply writes ws and checkpoint in one batch (invariant 2).
func (p *Pebble) Apply(ws []Write, checkpoint int64) error {
	if checkpoint < NoCheckpoint {
		return fmt.Errorf("store: invalid checkpoint %d", checkpoint)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.db == nil {
		return ErrClosed
	}
	if len(ws) == 0 && checkpoint == NoCheckpoint {
		return nil
	}
	// The batch is made as large as the writes at once: grown by
	// doubling, a commit of many writes copied its bytes twice over.
	b := p.db.NewBatchWithSize(batchSize(ws))
	defer b.Close()
	// Deferred ops encode the prefixed key straight into the batch: no key
	// buffer, no allocation per write.
	for _, w := range ws {
		if w.End != nil {
			if err := b.DeleteRange(userKey(w.Key), userKey(w.End), nil); err != nil {
				return fmt.Errorf("store: apply: %w", err)
			}
			continue
		}
		var op *pebble.DeferredBatchOp
		if w.Value == nil {
			op = b.DeleteDeferred(1 + len(w.Key))
		} else {
			op = b.SetDeferred(1+len(w.Key), len(w.Value))
			copy(op.Value, w.Value)
		}
		op.Key[0] = prefixUser
		copy(op.Key[1:], w.Key)
		if err := op.Finish(); err != nil {
			return fmt.Errorf("store: apply: %w", err)
		}
	}
	if checkpoint != NoCheckpoint {
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(checkpoint))
		if err := b.Set(checkpointKey, v[:], nil); err != nil {
			return fmt.Errorf("store: apply: %w", err)
		}
	}
	err := b.Commit(pebble.NoSync)
	p.wrote() // even on error: the batch may have been applied
	if err != nil {
		return fmt.Errorf("store: apply: %w", corrupted(p.dir, err))
	}
	if checkpoint != NoCheckpoint {
		p.checkpoint.Store(checkpoint)
	}
	return nil
}

// Checkpoint returns the last recorded changelog offset, or NoCheckpoint.
func (p *Pebble) Checkpoint() (int64, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.db == nil {
		return 0, ErrClosed
	}
	return p.checkpoint.Load(), nil
}

// Wipe deletes every key and the checkpoint in one batch, so a crash leaves
// either the old state with its checkpoint or nothing at all.
func (p *Pebble) Wipe() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.db == nil {
		return ErrClosed
	}
	b := p.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(wipeLower, wipeUpper, nil); err != nil {
		return fmt.Errorf("store: wipe: %w", err)
	}
	err := b.Commit(pebble.NoSync)
	p.wrote()
	if err != nil {
		return fmt.Errorf("store: wipe: %w", err)
	}
	p.checkpoint.Store(NoCheckpoint)
	return nil
}

// Flush writes the memtable to sstables and syncs them, so that
// everything applied is durable on disk and the WAL is no longer needed to
// read it (a savepoint's copies are flushed before the savepoint is
// committed).
func (p *Pebble) Flush() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.db == nil {
		return ErrClosed
	}
	if err := p.db.Flush(); err != nil {
		return fmt.Errorf("store: flush: %w", err)
	}
	return nil
}

// ApproximateSize is the database's disk usage, WAL included so that recent
// writes count before a flush; 0 once closed.
func (p *Pebble) ApproximateSize() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.db == nil {
		return 0
	}
	m := p.db.Metrics()
	n := m.DiskSpaceUsage()
	// The WAL's physical size is only sampled as files are synced or
	// rotated, which NoSync commits leave for later; its logical size is
	// current.
	if m.WAL.Size > m.WAL.PhysicalSize {
		n += m.WAL.Size - m.WAL.PhysicalSize
	}
	return int64(n)
}

// Close releases the directory; the memtable is not flushed because the WAL
// already holds every applied batch. Close is idempotent, and waits for
// in-flight Get and Range calls.
func (p *Pebble) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.db == nil {
		return nil
	}
	p.wrote() // Pebble refuses to close with an iterator open
	db := p.db
	p.db = nil
	if err := db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// quietLogger drops Pebble's informational chatter (a process opens many
// stores) but keeps errors; Fatalf must not return, as Pebble relies on it.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}

func (quietLogger) Errorf(format string, args ...any) {
	pebble.DefaultLogger.Errorf(format, args...)
}

func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...)
}

// userKey is k under prefixUser, in a new slice.
func userKey(k []byte) []byte { return append([]byte{prefixUser}, k...) }
