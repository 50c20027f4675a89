package processor

import (
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimitGoMemory: the limit is the running Apps' parts of their budgets
// in the Go heap plus the base once, follows Apps as they start and stop,
// returns to what it was after the last, and leaves alone a process whose
// environment sets GOMEMLIMIT or whose Apps do not ask for it (the limit
// at its floor: nothing known outside Go). GOGC is off while the limit is
// set, and back at its percent after the last App, unless the environment
// sets GOGC.
func TestLimitGoMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	// Nothing known outside Go: the limit is its floor throughout
	// (TestLimitGoMemoryFollowsOutside has the rest).
	defer func(f func() (int64, bool)) { outsideGoMemory = f }(outsideGoMemory)
	outsideGoMemory = func() (int64, bool) { return 0, false }
	before := debug.SetMemoryLimit(-1)
	// A percent of our own, to tell a restore from the default.
	const percent = 137
	defer debug.SetGCPercent(debug.SetGCPercent(percent))
	const b1, b2 = 256 << 20, 1 << 30
	a1 := &App{cfg: config{goLimit: true, memoryBudget: b1}}
	a2 := &App{cfg: config{goLimit: true, memoryBudget: b2}}
	off := &App{cfg: config{memoryBudget: b2}}

	release1 := a1.limitGoMemory()
	if got, want := debug.SetMemoryLimit(-1), int64(goLimitBase+goLimitPart(b1)); got != want {
		t.Errorf("one App: limit %d, want %d", got, want)
	}
	if got := gcPercent(); got != -1 {
		t.Errorf("one App: GOGC %d, want off (-1)", got)
	}
	release2 := a2.limitGoMemory()
	releaseOff := off.limitGoMemory()
	if got, want := debug.SetMemoryLimit(-1), int64(goLimitBase+goLimitPart(b1)+goLimitPart(b2)); got != want {
		t.Errorf("two Apps and one without: limit %d, want %d", got, want)
	}
	releaseOff()
	release1()
	if got, want := debug.SetMemoryLimit(-1), int64(goLimitBase+goLimitPart(b2)); got != want {
		t.Errorf("after the first stopped: limit %d, want %d", got, want)
	}
	if got := gcPercent(); got != -1 {
		t.Errorf("after the first stopped, one still running: GOGC %d, want off (-1)", got)
	}
	release2()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after the last stopped: limit %d, want the one before, %d", got, before)
	}
	if got := gcPercent(); got != percent {
		t.Errorf("after the last stopped: GOGC %d, want the one before, %d", got, percent)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	release := a1.limitGoMemory()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set: limit %d, want it untouched, %d", got, before)
	}
	if got := gcPercent(); got != percent {
		t.Errorf("with GOMEMLIMIT set: GOGC %d, want it untouched, %d", got, percent)
	}
	release()

	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "137")
	release = a1.limitGoMemory()
	if got, want := debug.SetMemoryLimit(-1), int64(goLimitBase+goLimitPart(b1)); got != want {
		t.Errorf("with GOGC set: limit %d, want %d", got, want)
	}
	if got := gcPercent(); got != percent {
		t.Errorf("with GOGC set: GOGC %d, want it untouched, %d", got, percent)
	}
	release()
	if got := gcPercent(); got != percent {
		t.Errorf("with GOGC set, after the App: GOGC %d, want %d", got, percent)
	}

	if cgoEnabled && goLimitPart(b1) != b1/4 || !cgoEnabled && goLimitPart(b1) != b1 {
		t.Errorf("cgo %v: part of %d in the Go heap %d", cgoEnabled, b1, goLimitPart(b1))
	}
}

// gcPercent reads GOGC's percent (-1: off).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestLimitGoMemoryFollowsOutside: the limit is the bound (the budgets
// plus MemoryBase) less the memory outside Go and limitMargin, set at
// once when an App starts and re-set as that memory changes, never under
// the floor (the budgets' parts in the Go heap plus goLimitBase); after
// the last App it is the limit from before and stays so. Negative
// controls, put in by hand, each caught: the goroutine never adjusting,
// the floor left out, the goroutine left running after the last App.
func TestLimitGoMemoryFollowsOutside(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var out atomic.Int64
	defer func(f func() (int64, bool)) { outsideGoMemory = f }(outsideGoMemory)
	outsideGoMemory = func() (int64, bool) { return out.Load(), true }
	before := debug.SetMemoryLimit(-1)
	const b = 256 << 20
	// ceiling is the bound less the margin: the limit with nothing outside Go.
	floor, ceiling := int64(goLimitBase+goLimitPart(b)), int64(MemoryBase+b-limitMargin)
	limit := func() int64 { return debug.SetMemoryLimit(-1) }
	// becomes waits, within a bound, for the goroutine to set want.
	becomes := func(what string, want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for limit() != want && time.Now().Before(deadline) {
			time.Sleep(adjustEvery / 4)
		}
		if got := limit(); got != want {
			t.Errorf("%s: limit %d, want %d", what, got, want)
		}
	}

	out.Store(40 << 20)
	release := (&App{cfg: config{goLimit: true, memoryBudget: b}}).limitGoMemory()
	if got, want := limit(), ceiling-40<<20; got != want {
		t.Errorf("at the start, 40 MiB outside Go: limit %d, want %d", got, want)
	}
	out.Store(100 << 20)
	becomes("100 MiB outside Go", ceiling-100<<20)
	out.Store(ceiling) // more outside than the bound: the floor
	becomes("everything outside Go", floor)
	out.Store(10 << 20)
	becomes("10 MiB outside Go", ceiling-10<<20)
	release()
	if got := limit(); got != before {
		t.Errorf("after the last App: limit %d, want the one before, %d", got, before)
	}
	out.Store(20 << 20)
	time.Sleep(3 * adjustEvery)
	if got := limit(); got != before {
		t.Errorf("after the last App, the memory outside Go changed: limit %d, want it left at %d", got, before)
	}
}
