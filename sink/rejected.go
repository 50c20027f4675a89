package sink

import (
	"context"
	"fmt"
)

// Rejected is implemented by the error a store returns when it refused one
// record of a batch for the record's data (a constraint, a type, a value
// too long): retrying cannot help, and nothing of the batch was written.
// sluice hands that record to the sink's error policy (dead-letter, with
// message in the sluice.error.message header, continue, or stop) and
// writes the rest of the batch without it. Any other error from Prepare or
// Write is taken for a failure of the store (a lost connection): the
// batch is retried whole, after a backoff.
type Rejected interface {
	error
	// Rejected returns the index of the refused record in the batch
	// handed to Prepare or Write, and the store's message.
	Rejected() (index int, message string)
}

// RejectedError is a Rejected for stores that have no error type of their
// own (sinkfile's, a user's).
type RejectedError struct {
	Index   int    // of the record in the batch
	Message string // why the store refused it
	Err     error  // the cause, if any
}

var _ Rejected = (*RejectedError)(nil)

func (e *RejectedError) Error() string {
	return fmt.Sprintf("sink: record %d rejected: %s", e.Index, e.Message)
}

// Rejected returns the record's index and the message.
func (e *RejectedError) Rejected() (int, string) { return e.Index, e.Message }

func (e *RejectedError) Unwrap() error { return e.Err }

// Pinger is implemented by a Participant or Idempotent store that can tell
// whether it is reachable. processor's Run pings every external sink
// before it joins the group and stops with the error if one fails, so an
// unreachable store at start is one clear error rather than a stream of
// aborted transactions; the error should name the store without secrets
// (a database URL without its password).
type Pinger interface {
	Ping(ctx context.Context) error
}
