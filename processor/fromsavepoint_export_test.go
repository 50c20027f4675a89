package processor

import "github.com/sluice-streams/sluice/internal/layout"

// SetRescale replaces package rescale's Route and Merge for a start from a
// savepoint; it returns the restore.
func SetRescale(route func(layout.StoreKind, []byte, int32) (int32, bool, error), merge func(layout.StoreKind, []byte, [][]byte) ([]byte, error)) (restore func()) {
	pr, pm := rescaleRoute, rescaleMerge
	rescaleRoute, rescaleMerge = route, merge
	return func() { rescaleRoute, rescaleMerge = pr, pm }
}

// CanResizeTimeState reports whether a rescale can lay a time state out
// for other input widths (resizeTimeState is set).
func CanResizeTimeState() bool { return resizeTimeState != nil }
