package processor

import "github.com/sluice-streams/sluice/internal/layout"

// SetRescaleRoute replaces package rescale's Route for a start from a
// savepoint; it returns the restore.
func SetRescaleRoute(route func(layout.StoreKind, []byte, int32) (int32, bool, error)) (restore func()) {
	pr := rescaleRoute
	rescaleRoute = route
	return func() { rescaleRoute = pr }
}

// SetTakeInCopy replaces how a start from a savepoint copies a store copy
// into the state directory (store.CopyDir); it returns the restore.
func SetTakeInCopy(fn func(src, dst string) error) (restore func()) {
	old := takeInCopy
	takeInCopy = fn
	return func() { takeInCopy = old }
}
