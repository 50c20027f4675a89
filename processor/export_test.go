package processor

import "time"

// SetSinkBackoff sets the backoff after a sink's failed prepare, for the
// negative control of the abort-rate test; it returns the restore.
func SetSinkBackoff(lo, hi time.Duration) (restore func()) {
	plo, phi := sinkBackoffMin, sinkBackoffMax
	sinkBackoffMin, sinkBackoffMax = lo, hi
	return func() { sinkBackoffMin, sinkBackoffMax = plo, phi }
}

// SetPrepareTimeout sets the bound of a commit's prepares, for the negative
// control of the hanging-sink test; it returns the restore.
func SetPrepareTimeout(d time.Duration) (restore func()) {
	prev := prepareTimeout
	prepareTimeout = func(time.Duration) time.Duration { return d }
	return func() { prepareTimeout = prev }
}
