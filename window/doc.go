// Package window cuts an unbounded stream into finite windows. Windows are
// half-open, [Start, End): a record at exactly End belongs to the next
// window. There is no hidden grace period: how long a window stays open for
// late records is always the caller's explicit choice.
//
//	w := window.Tumbling(time.Minute)
//	for _, b := range w.Assign(ts) { ... } // the one window holding ts
//
// This package holds the window definitions and their assignment; the
// windowed aggregations, triggers and stores build on it.
package window
