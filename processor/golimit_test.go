package processor

import (
	"runtime/debug"
	"testing"
)

// TestLimitGoMemory: the limit is the running Apps' parts of their budgets
// in the Go heap plus the base once, follows Apps as they start and stop,
// returns to what it was after the last, and leaves alone a process whose
// environment sets GOMEMLIMIT or whose Apps do not ask for it.
func TestLimitGoMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	const b1, b2 = 256 << 20, 1 << 30
	a1 := &App{cfg: config{goLimit: true, memoryBudget: b1}}
	a2 := &App{cfg: config{goLimit: true, memoryBudget: b2}}
	off := &App{cfg: config{memoryBudget: b2}}

	release1 := a1.limitGoMemory()
	if got, want := debug.SetMemoryLimit(-1), int64(goLimitBase+goLimitPart(b1)); got != want {
		t.Errorf("one App: limit %d, want %d", got, want)
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
	release2()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after the last stopped: limit %d, want the one before, %d", got, before)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	release := a1.limitGoMemory()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOMEMLIMIT set: limit %d, want it untouched, %d", got, before)
	}
	release()

	if cgoEnabled && goLimitPart(b1) != b1/4 || !cgoEnabled && goLimitPart(b1) != b1 {
		t.Errorf("cgo %v: part of %d in the Go heap %d", cgoEnabled, b1, goLimitPart(b1))
	}
}
