package topologytest

import "github.com/twmb/franz-go/pkg/kgo"

// SetDefaultOptions makes New apply opts before its own until restore is
// called, to run whole tests under an option. Tests that use it must not
// run in parallel.
func SetDefaultOptions(opts ...Option) (restore func()) {
	prev := defaultOptions
	defaultOptions = opts
	return func() { defaultOptions = prev }
}

// WithoutAbortHooks, after AbortTransactions, aborts without returning the
// operators' in-memory state and the punctuation schedules to the last
// commit: the behaviour before issue 15, the abort checker's negative
// control.
func WithoutAbortHooks() Option {
	return func(d *Driver) {
		if d.ab != nil {
			d.ab.skipHooks = true
		}
	}
}

// Keep appends every driver New makes to *ds.
func Keep(ds *[]*Driver) Option { return func(d *Driver) { *ds = append(*ds, d) } }

// Outputs is every record d committed to an output topic, by topic.
func Outputs(d *Driver) map[string][]*kgo.Record { return d.outputs }

// Aborts counts the transactions d aborted under AbortTransactions.
func Aborts(d *Driver) int {
	if d.ab == nil {
		return 0
	}
	return d.ab.aborts
}
