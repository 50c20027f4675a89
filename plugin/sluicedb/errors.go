package sluicedb

import (
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/sink"
)

// ErrConnection is wrapped by an adapter's error when the connection to the
// database failed or was lost: the transaction did not happen (or, for a
// commit, may have), and a retry after reconnecting is the remedy.
var ErrConnection = errors.New("sluicedb: database connection failed")

// RowError is a record the database (or the Table's Row function) rejected:
// a constraint, a type, a value too long. Retrying cannot help; the record
// belongs in a dead-letter topic, or stops the application. The batch it
// was in was not written.
type RowError struct {
	Table     string
	Index     int // of the record in the batch handed to the sink
	Topic     string
	Partition int32
	Offset    int64
	Code      string // SQLSTATE, or MySQL's error number; "" for Row's own error
	Message   string // the database's message
	Err       error  // the driver's error
}

func (e *RowError) Error() string {
	code := ""
	if e.Code != "" {
		code = " (" + e.Code + ")"
	}
	return fmt.Sprintf("sluicedb: table %s rejected record %d (%s/%d@%d): %s%s", e.Table, e.Index, e.Topic, e.Partition, e.Offset, e.Message, code)
}

func (e *RowError) Unwrap() error { return e.Err }

var _ sink.Rejected = (*RowError)(nil)

// Rejected makes a RowError a sink.Rejected: sluice's runtime hands the
// record to the sink's error policy with the database's message.
func (e *RowError) Rejected() (int, string) { return e.Index, e.Message }
