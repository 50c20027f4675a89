package processor

import (
	"time"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

// IgnoreSavepoints makes the instance ignore savepoint requests, as an
// instance that is stuck or gone would: the coordinator's refusal test.
func IgnoreSavepoints(a *App) { a.spDeaf.Store(true) }

// SetSavepointMargin sets how long past a request's deadline an instance
// waits for the release; it returns a func restoring the default.
func SetSavepointMargin(d time.Duration) (restore func()) {
	old := spMargin
	spMargin = d
	return func() { spMargin = old }
}

// SetSavepointHistory sets how far back a starting instance looks for a
// savepoint in progress; it returns a func restoring the default.
func SetSavepointHistory(d time.Duration) (restore func()) {
	old := spHistory
	spHistory = d
	return func() { spHistory = old }
}

// SavepointPartsTaken counts the store copies savepoints took from the
// instances' checkpoints so far (in this process).
func SavepointPartsTaken() int64 { return spTaken.Load() }

// SetSavepointOld makes a answer savepoints as a sluice that predates
// checkpoints (or not): its stores are copied from their changelogs.
func SetSavepointOld(a *App, old bool) { a.spOld.Store(old) }

// SetSavepointNoCheckpoints makes TakeSavepoint copy every store from its
// changelog; it returns the restore.
func SetSavepointNoCheckpoints(v bool) (restore func()) {
	old := spNoCheckpoints
	spNoCheckpoints = v
	return func() { spNoCheckpoints = old }
}

// SetSavepointTrustCheckpoints makes TakeSavepoint take checkpoints
// without checking their offsets against the cut (negative controls
// only); it returns the restore.
func SetSavepointTrustCheckpoints(v bool) (restore func()) {
	old := spTrustCheckpoints
	spTrustCheckpoints = v
	return func() { spTrustCheckpoints = old }
}

// SetSavepointCheckpoint replaces how an instance checkpoints a store for
// a savepoint (fn gets the engine, task id text, store name and the
// directory to write); set it before the instances start. It returns the
// restore.
func SetSavepointCheckpoint(fn func(eng *store.Pebble, task, name, dir string) (int64, error)) (restore func()) {
	old := spTakeCheckpoint
	spTakeCheckpoint = func(eng *store.Pebble, id task.ID, name, dir string) (int64, error) {
		return fn(eng, id.String(), name, dir)
	}
	return func() { spTakeCheckpoint = old }
}

// SavepointPartsRefused counts the checkpoints savepoints refused as not
// at their cut so far (in this process).
func SavepointPartsRefused() int64 { return spRefused.Load() }
