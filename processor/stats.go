package processor

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

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
	Late atomic.Int64
	// IgnoredDeletes counts the deletes (records without a value) that
	// an aggregation, a window or a join ignored, having no value to add
	// or join, or that an operator changing the key (Map, FlatMap,
	// SelectKey) ignored, having no value to give its function: what
	// Kafka Streams counts as dropped records, late ones aside. A delete
	// reaches them from a table turned into a stream or through a
	// repartition topic. It counts each time it is processed.
	IgnoredDeletes atomic.Int64
	Tasks          atomic.Int64 // tasks currently owned
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

	// loop is the instance loop's wall time in each phase (LoopTime).
	loop loopClock

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

// The phases of the instance loop, as LoopTime names them. They take turns
// on the loop's goroutine, so over a run they add up to nearly its whole
// wall time: what is left is joining the group, rebalances and savepoint
// steps. The tasks process while the loop polls again (pipeline.go): time
// in which any task processes counts as processing, whatever the loop
// does. Their shares are Kafka Streams' thread ratios (poll-ratio,
// process-ratio, commit-ratio); the last three together are the commit,
// during which no record is processed.
const (
	// PhasePoll is the wait in the consumer's poll for records while no
	// task processes: idle time when the input is quiet, or input slower
	// than the job.
	PhasePoll = "poll"
	// PhaseProcess is the tasks processing what the polls returned, on
	// up to num.stream.threads goroutines, and their wall-clock ticks.
	PhaseProcess = "process"
	// PhaseFlush is the tasks' flush before a transaction ends: held
	// (folded) updates forwarded, the stores' changelog records written,
	// two-phase sinks' batches staged.
	PhaseFlush = "flush"
	// PhaseEnd is ending the transaction: the fence check, the sinks'
	// prepares, the broker's commit or abort (under at_least_once, the
	// offset commit), and the sinks told its outcome.
	PhaseEnd = "end"
	// PhaseApply is the committed stages applied to the stores (or
	// discarded, after an abort).
	PhaseApply = "apply"
)

// LoopPhases lists the phases in the loop's order.
var LoopPhases = [...]string{PhasePoll, PhaseProcess, PhaseFlush, PhaseEnd, PhaseApply}

// loopPhase indexes the phases in the order of LoopPhases; loopOther is
// the loop between them.
type loopPhase int

const (
	loopPoll loopPhase = iota
	loopProcess
	loopFlush
	loopEnd
	loopApply
	loopOther
)

// loopClock times the loop's phases. The phase under way counts as it
// runs, not only when it ends: read every second (the console), a poll
// that waits for a whole commit interval would otherwise land in one
// second, and the shares of that second would add up to more than all of
// it.
type loopClock struct {
	mu    sync.Mutex
	spent [loopOther]time.Duration
	cur   loopPhase // loopOther: between phases
	busy  int       // goroutines processing tasks (pipeline.go)
	since time.Time // when the phase under way began
}

// under is the phase under way: the loop's, or processing while a task
// processes and the loop polls or is between phases.
func (c *loopClock) under() loopPhase {
	if c.busy > 0 && (c.cur == loopPoll || c.cur == loopOther) {
		return loopProcess
	}
	return c.cur
}

// count adds the time since the phase under way began to it.
func (c *loopClock) count(now time.Time) {
	if p := c.under(); p != loopOther && !c.since.IsZero() {
		c.spent[p] += now.Sub(c.since)
	}
	c.since = now
}

// enter ends the loop's phase and begins p (loopOther: none).
func (s *Stats) enter(p loopPhase) {
	c := &s.loop
	now := time.Now()
	c.mu.Lock()
	c.count(now)
	c.cur = p
	c.mu.Unlock()
}

// working adds n (1 or -1) to the goroutines processing tasks.
func (s *Stats) working(n int) {
	c := &s.loop
	now := time.Now()
	c.mu.Lock()
	c.count(now)
	c.busy += n
	c.mu.Unlock()
}

// LoopTime returns the wall time the instance loop spent in each phase
// (PhasePoll and the others) since the App was made, the phase under way
// up to now.
func (s *Stats) LoopTime() map[string]time.Duration {
	c := &s.loop
	now := time.Now()
	c.mu.Lock()
	spent := c.spent
	if p := c.under(); p != loopOther && !c.since.IsZero() {
		spent[p] += now.Sub(c.since)
	}
	c.mu.Unlock()
	out := make(map[string]time.Duration, len(LoopPhases))
	for i, name := range LoopPhases {
		out[name] = spent[i]
	}
	return out
}
