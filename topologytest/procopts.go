package topologytest

import (
	"fmt"
	"maps"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/optview"
	"github.com/sluice-streams/sluice/processor"
)

// Processor applies processor options that mean the same to the driver as
// to an App: processor.ApplicationID, FoldUpdates, OnError,
// DeadLetterTopic, MaxRecordBytes and IdleTimeout, so that a test
// configures the driver with the options its program runs with. Any other
// processor option (brokers, the guarantee, the state directory, ...) has
// no meaning without a cluster: New then fails, naming it.
//
//	d, err := topologytest.New(top, topologytest.Processor(
//		processor.ApplicationID("billing"),
//		processor.FoldUpdates(true)))
func Processor(opts ...processor.Opt) Option {
	return func(d *Driver) {
		for i, o := range opts {
			s, err := optview.Read(o)
			if err != nil {
				d.optErr = fmt.Errorf("topologytest: processor option %d: %w", i, err)
				return
			}
			if s.AppID != nil {
				d.appID = *s.AppID
			}
			if s.FoldUpdates != nil {
				d.x.fold = *s.FoldUpdates
			}
			if len(s.Errors) > 0 {
				if d.errors == nil {
					d.errors = map[exec.ErrorClass]exec.ErrorHandler{}
				}
				maps.Copy(d.errors, s.Errors)
			}
			if s.DeadLetter != nil {
				d.deadLetter = *s.DeadLetter
			}
			if s.MaxRecordBytes != nil {
				d.maxRecordBytes = *s.MaxRecordBytes
			}
			if s.IdleTimeout != nil {
				d.idleTimeout = *s.IdleTimeout
			}
		}
	}
}
