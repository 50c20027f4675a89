package processor

import (
	"fmt"
	"reflect"

	"github.com/sluice-streams/sluice/internal/optview"
)

// The options the test driver shares with an App (topologytest.Processor):
// optview.Read applies one option to the defaults and reports what it set.

func init() { optview.Read = readShared }

func readShared(o any) (optview.Shared, error) {
	op, ok := o.(Opt)
	if !ok {
		return optview.Shared{}, fmt.Errorf("processor: %T is not a processor.Opt", o)
	}
	base, c := defaultConfig(), defaultConfig()
	op.apply(&c)
	var s optview.Shared
	if c.appID != base.appID {
		s.AppID = new(c.appID)
	}
	if c.foldUpdates != base.foldUpdates {
		s.FoldUpdates = new(c.foldUpdates)
	}
	if len(c.errors) > 0 {
		s.Errors = c.errors
	}
	if c.deadLetter != base.deadLetter {
		s.DeadLetter = new(c.deadLetter)
	}
	if c.maxRecordBytes != base.maxRecordBytes {
		s.MaxRecordBytes = new(c.maxRecordBytes)
	}
	if c.idleTimeout != base.idleTimeout {
		s.IdleTimeout = new(c.idleTimeout)
	}
	// What is left must be the defaults: any other option needs a
	// cluster, or an App, to mean anything.
	c.appID, c.foldUpdates, c.errors, c.deadLetter, c.maxRecordBytes, c.idleTimeout =
		base.appID, base.foldUpdates, base.errors, base.deadLetter, base.maxRecordBytes, base.idleTimeout
	if !reflect.DeepEqual(c, base) {
		return optview.Shared{}, fmt.Errorf("processor: the option sets what has no meaning without a cluster (only ApplicationID, FoldUpdates, OnError, DeadLetterTopic, MaxRecordBytes and IdleTimeout do)")
	}
	return s, nil
}
