package processor

// IgnoreSavepoints makes the instance ignore savepoint requests, as an
// instance that is stuck or gone would: the coordinator's refusal test.
func IgnoreSavepoints(a *App) { a.spDeaf.Store(true) }
