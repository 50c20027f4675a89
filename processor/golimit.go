package processor

import (
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sluice-streams/sluice/internal/memstat"
)

// The Go memory limit (state.memory.go.limit, LimitGoMemory): the Go
// runtime's soft memory limit, set from the memory budgets of the Apps
// running in the process and from what the process holds outside Go, so
// that the collector keeps the heap near what they need rather than
// letting it grow to twice the live heap (GOGC's default), which is how a
// process's RSS grows with its state although the state stays within its
// budget. The bound is on the RSS: the budgets plus MemoryBase.
//
// While the limit is set, GOGC is off too (unless the environment sets
// GOGC: the user's choice wins), as the Go GC guide advises for a process
// given a memory limit: the collector then runs when the heap nears the
// limit, not each time the live heap doubles. An instance's live heap is
// small (fetched records, stages, produce buffers), and with GOGC's
// default it was collected over and over: in Nexmark's q2, with the broker
// in another process, the collector took 17 % of the job's CPU, and the
// job used 40 % less CPU with the limit and GOGC off (PERFORMANCE.md,
// "Issue 20, session 47"). Memory stays near the limit either way; it is
// a soft limit, which a live heap near it can pass.

// MemoryBase is what, with LimitGoMemory, a process's RSS may hold beyond
// the memory budgets of its Apps, once a process: the Kafka clients, the
// operators, the Go runtime, the binary. With the budgets it is the bound
// the Go memory limit keeps RSS under: 512 MiB with the default budget.
const MemoryBase = 256 << 20

// outsideGoReserve is the part of MemoryBase left, at the least, for memory
// that is neither the Go runtime's nor in a budget, which no Go limit
// holds: the binary's and the C libraries' pages, the C allocator's
// overhead on Pebble's blocks and memtables, Pebble's memory beyond its
// cache and memtables. A count of 10M keys peaked at 35 MiB of it
// (PERFORMANCE.md, "Issue 20, session 48"); with the whole base for the
// Go memory, RSS passed the bound there although the Go memory stayed
// under its limit.
const outsideGoReserve = 64 << 20

// goLimitBase is what the limit allows at the least beyond the budgets'
// parts in the Go heap, once a process: the Kafka clients' fetches and
// produce buffers, what operators and in-memory stores hold, and the
// runtime's own.
const goLimitBase = MemoryBase - outsideGoReserve

// The limit follows the memory outside Go. It is the bound (the budgets
// plus MemoryBase) less what the process holds outside the Go runtime
// now, re-read every adjustEvery, less limitMargin, and never less than
// the floor (the budgets' parts in the Go heap plus goLimitBase). Where
// Pebble's cache and memtables are not full, as with a small state, the
// Go heap gets their room and the collector runs less; as they fill, the
// limit comes down to the floor.
const adjustEvery = 100 * time.Millisecond

// limitMargin is kept below the bound for what the soft limit lets the
// heap pass it by and for what grows outside Go between two readings:
// with none, a store loaded with 1 KB values peaked at 517 and 519 MiB
// against a bound of 512, its Go memory 12–14 MiB over the limit
// (PERFORMANCE.md, "Issue 20, session 48").
const limitMargin = 32 << 20

// outsideGoMemory is what the process holds outside the Go runtime now
// (false where it cannot be read: the limit is the floor then); a
// variable for the tests.
var outsideGoMemory = memstat.OutsideGo

// pebbleInGoHeap says whether Pebble allocates its block cache and
// memtables in the Go heap: without cgo it does (its manual allocator
// falls back to make), with cgo they are C memory, outside the limit.
var pebbleInGoHeap = !cgoEnabled

// goLimits tracks the running Apps that limit the Go memory.
var goLimits struct {
	sync.Mutex
	budgets map[*App]int64 // each App's memory budget
	prev    int64          // the limit before the first of them set one
	// prevGC is GOGC's percent before the first of them turned it off;
	// gcOff says whether it did (GOGC unset in the environment).
	prevGC int
	gcOff  bool
	// stop ends the goroutine that adjusts the limit, and done is closed
	// when it has; both nil while no App limits the Go memory.
	stop, done chan struct{}
}

// goLimitPart is the part of budget b in the Go heap: the stages' quarter,
// and the block cache and memtables too when Pebble allocates there.
func goLimitPart(b int64) int64 {
	if pebbleInGoHeap {
		return b
	}
	return b / 4
}

// limitGoMemory sets the limit for a starting App, unless the environment
// sets one (GOMEMLIMIT: the user's choice wins). It returns the function
// that takes the App's budget back out when it stops, restoring the limit
// from before when it was the last.
func (a *App) limitGoMemory() (release func()) {
	if !a.cfg.goLimit || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	goLimits.Lock()
	defer goLimits.Unlock()
	first := len(goLimits.budgets) == 0
	if first {
		goLimits.budgets = map[*App]int64{}
		goLimits.prev = debug.SetMemoryLimit(-1)
	}
	goLimits.budgets[a] = a.cfg.memoryBudget
	setGoLimitLocked()
	if first {
		// After the limit: with GOGC off and no limit, nothing would
		// collect.
		if goLimits.gcOff = os.Getenv("GOGC") == ""; goLimits.gcOff {
			goLimits.prevGC = debug.SetGCPercent(-1)
		}
		goLimits.stop, goLimits.done = make(chan struct{}), make(chan struct{})
		go adjustGoLimit(goLimits.stop, goLimits.done)
	}
	return func() {
		goLimits.Lock()
		delete(goLimits.budgets, a)
		if len(goLimits.budgets) > 0 {
			setGoLimitLocked()
			goLimits.Unlock()
			return
		}
		// The percent first, for the same reason.
		if goLimits.gcOff {
			debug.SetGCPercent(goLimits.prevGC)
		}
		debug.SetMemoryLimit(goLimits.prev)
		// Closed under the lock, so that the goroutine, which adjusts
		// under it too, cannot set a limit after the restore; waited
		// for outside it.
		close(goLimits.stop)
		done := goLimits.done
		goLimits.stop, goLimits.done = nil, nil
		goLimits.Unlock()
		<-done
	}
}

// adjustGoLimit re-sets the limit every adjustEvery until stop is closed.
func adjustGoLimit(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(adjustEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		goLimits.Lock()
		select {
		case <-stop: // the last App stopped while this waited for the lock
		default:
			setGoLimitLocked()
		}
		goLimits.Unlock()
	}
}

// setGoLimitLocked sets the limit from the running Apps' budgets and the
// memory outside Go now; goLimits is locked.
func setGoLimitLocked() {
	floor, bound := int64(goLimitBase), int64(MemoryBase)
	for _, b := range goLimits.budgets {
		floor += goLimitPart(b)
		bound += b
	}
	limit := floor
	if out, ok := outsideGoMemory(); ok {
		limit = max(floor, bound-out-limitMargin)
	}
	debug.SetMemoryLimit(limit)
}
