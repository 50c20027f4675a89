package processor

import "time"

// SetSinkBackoff sets the backoff after a sink's failed prepare, for the
// negative control of the abort-rate test; it returns the restore.
func SetSinkBackoff(lo, hi time.Duration) (restore func()) {
	plo, phi := sinkBackoffMin, sinkBackoffMax
	sinkBackoffMin, sinkBackoffMax = lo, hi
	return func() { sinkBackoffMin, sinkBackoffMax = plo, phi }
}
