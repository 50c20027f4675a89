package optview

import (
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
)

// Shared is what processor options set that the test driver understands;
// a nil field was not set.
type Shared struct {
	AppID          *string
	FoldUpdates    *bool
	Errors         map[exec.ErrorClass]exec.ErrorHandler
	DeadLetter     *string
	MaxRecordBytes *int
	IdleTimeout    *time.Duration
}

// Read returns what the processor option opt sets, or an error when it sets
// anything without a meaning outside a cluster (brokers, the guarantee, the
// state directory, ...). processor sets it.
var Read func(opt any) (Shared, error)
