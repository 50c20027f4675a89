package processor

import "time"

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
