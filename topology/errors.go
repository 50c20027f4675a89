package topology

import (
	"errors"

	"github.com/sluice-streams/sluice/internal/exec"
)

// ErrorClass says where a record failed: Deserialization, Processing or
// Production.
type ErrorClass string

// The error classes.
const (
	// Deserialization: a source could not decode the record's bytes, or
	// its timestamp is invalid.
	Deserialization ErrorClass = "deserialization"
	// Processing: user code returned an error or panicked.
	Processing ErrorClass = "processing"
	// Production: a sink could not encode or produce a record.
	Production ErrorClass = "production"
)

// Action is what happens to a record that failed: Fail, Continue or
// SendToDeadLetterQueue, the responses of Kafka Streams' exception
// handlers (FAIL, CONTINUE, and KIP-1034's dead-letter queue).
type Action int

// The actions.
const (
	// Fail stops the instance without committing the record, which is
	// processed again after a restart (after the fix).
	Fail Action = iota
	// Continue skips the record, its effects rolled back; it is logged and
	// counted.
	Continue
	// SendToDeadLetterQueue writes the original record to the dead-letter
	// topic with its origin and the error in headers, in the same
	// transaction, then goes on like Continue.
	SendToDeadLetterQueue

	// DeadLetterIt is SendToDeadLetterQueue.
	//
	// Deprecated: use SendToDeadLetterQueue.
	DeadLetterIt = SendToDeadLetterQueue
)

// String is the action as metrics and logs name it: "fail", "continue",
// "dead-letter".
func (a Action) String() string { return exec.Action(a).String() }

// Causes of failures that sluice itself finds, for handlers and callers to
// match with errors.Is on ErrorContext.Err or on the error Run returns.
var (
	// ErrInvalidTimestamp: a record's timestamp (the record's own, or
	// TimestampFrom's) is negative or past the year 9999; a
	// Deserialization error of its source.
	ErrInvalidTimestamp = errors.New("processor: invalid record timestamp")
	// ErrRecordTooLarge: an output record is over the maximum record size
	// (processor.MaxRecordBytes); a Production error of its sink.
	ErrRecordTooLarge = errors.New("processor: record too large")
)

// ErrorContext describes a failed record: its class, the node where it
// failed, its input coordinates and the error. It never holds the payload, so
// handlers that log it do not leak data.
type ErrorContext struct {
	Class ErrorClass
	// Node is the source, operator or sink where the error arose.
	Node string
	// The input record's coordinates.
	Topic     string
	Partition int32
	Offset    int64
	Timestamp int64
	Err       error
}

// ErrorHandler decides the action for a failed record.
type ErrorHandler func(ErrorContext) Action

// Always is the handler that always takes action a.
func Always(a Action) ErrorHandler { return func(ErrorContext) Action { return a } }

// SourceOnError handles the source's decoding errors with h instead of the
// application's handler.
func SourceOnError(h ErrorHandler) SourceOption {
	return sourceOpt(func(c *sourceConfig) { c.onError = h })
}

// SinkOption configures a sink: SinkOnError.
type SinkOption interface {
	applySink(*exec.Node)
}

// sinkOpt is a SinkOption.
type sinkOpt func(*exec.Node)

func (o sinkOpt) applySink(n *exec.Node) { o(n) }

// SinkOnError handles the sink's production errors (a key or value that
// its serde cannot encode) with h instead of the application's handler.
func SinkOnError(h ErrorHandler) SinkOption {
	return sinkOpt(func(n *exec.Node) { n.OnError = h.toExec() })
}

// OnError handles the errors of the operator that produced s (an error
// returned by, or a panic in, its function or processor) with h instead of the
// application's handler.
func OnError[K, V any](s Stream[K, V], h ErrorHandler) Stream[K, V] {
	if s.n.Kind == exec.KindProcessor {
		s.n.OnError = h.toExec()
	} else {
		s.t.errorf(ErrNilFunction, "OnError applies to an operator's stream, not to node %q", s.n.Name)
	}
	return s
}
