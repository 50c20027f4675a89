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

// goLimitBase is what the limit allows beyond the budgets' parts in the
// Go heap, once a process: the Kafka clients' fetches and produce buffers,
// what operators and in-memory stores hold, and the runtime's own.
const goLimitBase = 256 << 20

// pebbleInGoHeap says whether Pebble allocates its block cache and
// memtables in the Go heap: without cgo it does (its manual allocator
// falls back to make), with cgo they are C memory, outside the limit.
var pebbleInGoHeap = !cgoEnabled

// goLimits tracks the running Apps that limit the Go memory.
var goLimits struct {
	sync.Mutex
	inHeap map[*App]int64 // each App's budget part in the Go heap
	prev   int64          // the limit before the first of them set one
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
	if len(goLimits.inHeap) == 0 {
		goLimits.inHeap = map[*App]int64{}
		goLimits.prev = debug.SetMemoryLimit(-1)
	}
	goLimits.inHeap[a] = goLimitPart(a.cfg.memoryBudget)
	setGoLimit()
	return func() {
		goLimits.Lock()
		defer goLimits.Unlock()
		delete(goLimits.inHeap, a)
		if len(goLimits.inHeap) == 0 {
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
