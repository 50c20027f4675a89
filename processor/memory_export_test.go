package processor

// MemoryOf reports the split of a's memory budget and what the early
// commit did, for the tests of the budget.
func MemoryOf(a *App) (stageShare, peakStage, earlyCommits int64) {
	return a.mem.stage, a.mem.peakStage.Load(), a.mem.earlyCommits.Load()
}

// DisableEarlyCommit turns the early commit off, for the negative control.
func DisableEarlyCommit(a *App) { a.mem.noEarly = true }
