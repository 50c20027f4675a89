package store

import "errors"

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("store: closed")

// NoCheckpoint is what Engine.Checkpoint reports for an engine that has never
// applied a batch with a changelog offset.
const NoCheckpoint int64 = -1

// Write is one staged mutation. A nil Value deletes Key. A non-nil End
// deletes every key in [Key, End) instead (a range delete: Staged.DropRange,
// replayed from its changelog record), and Value is not used.
type Write struct {
	Key, Value []byte
	End        []byte
}

// Engine is the durable layer beneath a Staged store: Pebble on disk or a
// sorted in-memory map. An Engine is used by one goroutine at a time (the
// task's), except for Get and Range which may also be called concurrently by
// read-only queries.
//
// Invariant 2 (ARCHITECTURE.md) is kept here: Apply writes the batch and the
// changelog offset it reaches in one atomic step, so after a crash the engine
// holds either both or neither.
type Engine interface {
	// Get returns a copy of the value stored under key.
	Get(key []byte) (value []byte, ok bool, err error)
	// Range calls fn for each key in [start, end) in byte order; a nil
	// bound is open. The slices passed to fn are valid only during the call.
	// Returning an error from fn stops the iteration and returns that error.
	Range(start, end []byte, fn func(key, value []byte) error) error
	// Apply atomically writes ws (in order; a later write of a key wins) and
	// records checkpoint as the changelog offset the engine now reflects
	// (the offset of the last changelog record included). A checkpoint of
	// NoCheckpoint leaves the recorded one unchanged.
	Apply(ws []Write, checkpoint int64) error
	// Checkpoint returns the last recorded changelog offset, or NoCheckpoint.
	Checkpoint() (int64, error)
	// Wipe deletes every key and the checkpoint (used before a full restore).
	Wipe() error
	// ApproximateSize is the engine's size in bytes (for metrics and tests).
	ApproximateSize() int64
	Close() error
}
