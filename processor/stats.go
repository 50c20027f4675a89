package processor

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/sluice-streams/sluice/topology"
)

// Stats are cumulative counters of an instance, for progress reports and
// tests.
type Stats struct {
	Processed atomic.Int64 // input records processed and committed
	Commits   atomic.Int64
	Aborts    atomic.Int64
	Restored  atomic.Int64 // changelog records restored
	// Combined counts the records that a count's combining sinks
	// (topology.Count with FoldUpdates) kept from its repartition topic:
	// the records they combined, less those they wrote, committed. With
	// Processed it adds up to what the job would have processed without
	// combining.
	Combined atomic.Int64
	// Late counts records that arrived after every window they belong to
	// had closed. A record counts each time it is processed, so one in an
	// aborted transaction may count twice.
	Late  atomic.Int64
	Tasks atomic.Int64 // tasks currently owned
	// Produced counts the records the instance produced: outputs,
	// repartition, changelog and dead-letter records, committed or not.
	Produced atomic.Int64
	// Rebalances counts the partition assignments the instance received.
	Rebalances atomic.Int64

	// ProcessLatency is the time one input record takes through its
	// task, the average over each fetched batch of a task, observed once
	// per record. CommitLatency is the time from flushing the tasks to the
	// end of the transaction and the stores' commit. EndToEndLatency is,
	// per input record, the wall clock when its outputs were produced
	// minus the record's timestamp (a read_committed reader sees them up
	// to a commit later).
	ProcessLatency, CommitLatency, EndToEndLatency *Histogram

	mu sync.Mutex
	// aborts counts aborted transactions by cause.
	aborts map[string]int64
	// failed counts records that failed, by class and action taken. A
	// record counts each time it is processed, so one in an aborted
	// transaction may count twice.
	failed map[FailureKey]int64
}

// FailureKey names a count of failed records.
type FailureKey struct {
	Class  topology.ErrorClass
	Action topology.Action
}

func (s *Stats) addFailure(k FailureKey) {
	s.mu.Lock()
	countIn(&s.failed, k)
	s.mu.Unlock()
}

// Failures returns the counts of failed records by class and action.
func (s *Stats) Failures() map[FailureKey]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.failed)
}
