package processor

import (
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/broker"
)

// HookedBroker is edgeBroker for the external tests that answer or hold
// back the embedded broker's requests through kfake's hooks (they skip
// when SLUICE_TEST_BROKERS is set).
func HookedBroker(t *testing.T) *broker.Broker {
	t.Helper()
	return edgeBroker(t)
}

// SetSinkBackoff sets the backoff after a sink's failed prepare, for the
// negative control of the abort-rate test; it returns the restore.
func SetSinkBackoff(lo, hi time.Duration) (restore func()) {
	plo, phi := sinkBackoffMin, sinkBackoffMax
	sinkBackoffMin, sinkBackoffMax = lo, hi
	return func() { sinkBackoffMin, sinkBackoffMax = plo, phi }
}

// UnboundPrepares lets a commit's prepares take the whole commit's time,
// for the negative control of the hanging-sink test; it returns the
// restore.
func UnboundPrepares() (restore func()) {
	prev := prepareDeadline
	prepareDeadline = func(time.Time, time.Duration) time.Time { return time.Now().Add(time.Hour) }
	return func() { prepareDeadline = prev }
}
