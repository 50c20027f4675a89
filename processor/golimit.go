package processor

import (
	"os"
	"runtime/debug"
	"sync"
)

// The Go memory limit (state.memory.go.limit, LimitGoMemory): the Go
// runtime's soft memory limit, set from the memory budgets of the Apps
// running in the process, so that the collector keeps the heap near what
// they need rather than letting it grow to twice the live heap (GOGC's
// default), which is how a process's RSS grows with its state although the
// state stays within its budget.
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

// processBase is what a process's RSS may hold beyond the memory budgets
// of its Apps, once a process: the bound the limit is set for.
const processBase = 256 << 20

// outsideGo is the part of processBase for memory that is neither the Go
// runtime's nor in a budget, which no Go limit holds: the binary's and
// the C libraries' pages, the C allocator's overhead on Pebble's blocks
// and memtables, Pebble's memory beyond its cache and memtables. A count
// of 10M keys peaked at 35 MiB of it (PERFORMANCE.md, "Issue 20, session
// 48"); without it the limit let RSS pass the bound although the Go
// memory stayed under the limit.
const outsideGo = 64 << 20

// goLimitBase is what the limit allows beyond the budgets' parts in the
// Go heap, once a process: the Kafka clients' fetches and produce buffers,
// what operators and in-memory stores hold, and the runtime's own.
const goLimitBase = processBase - outsideGo

// pebbleInGoHeap says whether Pebble allocates its block cache and
// memtables in the Go heap: without cgo it does (its manual allocator
// falls back to make), with cgo they are C memory, outside the limit.
var pebbleInGoHeap = !cgoEnabled

// goLimits tracks the running Apps that limit the Go memory.
var goLimits struct {
	sync.Mutex
	inHeap map[*App]int64 // each App's budget part in the Go heap
	prev   int64          // the limit before the first of them set one
	// prevGC is GOGC's percent before the first of them turned it off;
	// gcOff says whether it did (GOGC unset in the environment).
	prevGC int
	gcOff  bool
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
// that takes the App's part back out when it stops, restoring the limit
// from before when it was the last.
func (a *App) limitGoMemory() (release func()) {
	if !a.cfg.goLimit || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	goLimits.Lock()
	defer goLimits.Unlock()
	first := len(goLimits.inHeap) == 0
	if first {
		goLimits.inHeap = map[*App]int64{}
		goLimits.prev = debug.SetMemoryLimit(-1)
	}
	goLimits.inHeap[a] = goLimitPart(a.cfg.memoryBudget)
	setGoLimit()
	// After the limit: with GOGC off and no limit, nothing would collect.
	if first {
		if goLimits.gcOff = os.Getenv("GOGC") == ""; goLimits.gcOff {
			goLimits.prevGC = debug.SetGCPercent(-1)
		}
	}
	return func() {
		goLimits.Lock()
		defer goLimits.Unlock()
		delete(goLimits.inHeap, a)
		if len(goLimits.inHeap) == 0 {
			// The percent first, for the same reason.
			if goLimits.gcOff {
				debug.SetGCPercent(goLimits.prevGC)
			}
			debug.SetMemoryLimit(goLimits.prev)
			return
		}
		setGoLimit()
	}
}

// setGoLimit sets the limit from the running Apps' parts; goLimits is
// locked.
func setGoLimit() {
	var sum int64 = goLimitBase
	for _, p := range goLimits.inHeap {
		sum += p
	}
	debug.SetMemoryLimit(sum)
}
