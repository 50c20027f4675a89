package processor

import (
	"sync/atomic"

	"github.com/sluice-streams/sluice/store"
)

// The memory budget (state.memory.budget, MemoryBudget): how the bytes of
// an instance's state are split, and the early commit that keeps the
// stages within their share.

const (
	// DefaultMemoryBudget is state.memory.budget's default: 256 MiB, which
	// with the Kafka clients' buffers and the Go runtime fits a container
	// of 512 MiB.
	DefaultMemoryBudget = 256 << 20
	// MinMemoryBudget is the smallest budget accepted.
	MinMemoryBudget = 8 << 20

	// maxMemTable caps a store's memtable however few stores share the
	// budget: past it a larger memtable only delays flushes.
	maxMemTable = 64 << 20
	// minReadCache is the smallest read cache a stage keeps; below it
	// the stage hardly caches anything between commits.
	minReadCache = 64 << 10
)

// memory is the budget's split, decided at Run once the partitions are
// known.
//
//   - Half is one Pebble block cache, shared by every store the instance
//     opens (tasks, standby copies, global tables): reads of a large state
//     go where the keys are hot, not to whichever store's small cache.
//   - A quarter is memtables. Pebble keeps up to two per store (one being
//     written, one being flushed), so each store gets a quarter of the
//     budget divided by twice the number of stores the instance could hold
//     (every task's, as when it runs alone, plus the global tables). The
//     number does not change with rebalances, and more instances only
//     leave each of them below its share.
//   - A quarter is the stages (store.Staged): each transaction's writes
//     until its commit, and committed values cached for reads. A stage's
//     read cache is at most a half of the share divided by the number of
//     stores, so that what stays cached after a commit leaves at least
//     half the share for the writes. When the stages of the active tasks
//     hold the whole share after a poll, the instance commits then, before
//     the commit interval is over, and the stages are applied and dropped
//     to their read caches: the stage never has to grow past the budget
//     to wait for a commit. The commit is an ordinary one: invariant 2
//     holds (the stage is applied only after the Kafka commit), and so do
//     exactly-once results, which never depended on when commits happen.
//     The next poll is bounded too (boundPolls): to what the stages' free
//     share holds at the recent polls' largest bytes per record.
type memory struct {
	budget    int64
	stores    int // Pebble stores the instance could hold
	cache     *store.Cache
	pebble    store.PebbleOptions
	readCache int   // each stage's read cache bound
	stage     int64 // the stages' share

	// earlyCommits counts commits asked for by a full stage; peakStage
	// is the largest stage seen after a poll (tests).
	earlyCommits atomic.Int64
	peakStage    atomic.Int64
	// noEarly turns the early commit off (tests: the negative control).
	noEarly bool
}

// planMemory splits the budget; Run calls it once the partitions are known,
// before any store opens.
func (a *App) planMemory() {
	b := a.cfg.memoryBudget
	n := 0
	for _, sub := range a.plan.Subs {
		for _, name := range sub.Stores {
			if !a.plan.Stores[name].InMemory {
				n += int(a.partitions[sub.ID])
			}
		}
	}
	n += len(a.plan.Globals)
	n = max(n, 1)
	m := &a.mem
	m.budget, m.stores = b, n
	if m.cache == nil {
		m.cache = store.NewCache(b / 2)
	}
	m.pebble = store.PebbleOptions{
		Cache:        m.cache,
		MemTableSize: min(max(b/4/int64(2*n), store.MinMemTableSize), maxMemTable),
	}
	m.stage = b / 4
	m.readCache = int(min(max(m.stage/2/int64(n), minReadCache), store.DefaultReadCache))
	if floor := int64(n) * (2*m.pebble.MemTableSize + int64(m.readCache)); floor > b/2 {
		a.log.Warn("state.memory.budget is too small for the stores this instance may hold",
			"budget", b, "stores", n, "memtable", m.pebble.MemTableSize, "readCache", m.readCache)
	}
}

// releaseMemory drops the App's reference to the shared cache; stores
// still open keep theirs.
func (a *App) releaseMemory() {
	if a.mem.cache != nil {
		a.mem.cache.Close()
		a.mem.cache = nil
	}
}

// stageFull says whether the stages hold their whole share, so that the
// transaction should end now (an early commit) rather than wait for the
// commit interval; stage is the stages' estimated bytes (collect).
func (m *member) stageFull(stage int64) bool {
	mem := &m.a.mem
	if stage > mem.peakStage.Load() {
		mem.peakStage.Store(stage)
	}
	return mem.stage > 0 && !mem.noEarly && stage >= mem.stage
}
