package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
)

// The instance loop: poll, hand each task its records (processed on up to
// num.stream.threads goroutines while the loop polls again: pipeline.go),
// and end the transaction every commit interval and on a rebalance.

func (m *member) loop(ctx context.Context) error {
	interval := m.a.cfg.commitInterval
	// No task runs once the loop returns: whatever returns without ending
	// the transaction (a closed client) leaves the tasks to be closed.
	defer m.work.drain()
	for {
		if !m.inTxn {
			if err := m.sess.Begin(); err != nil {
				return err
			}
			m.inTxn, m.txnStart = true, time.Now()
			m.sent.Store(false)
			m.firstSent.Store(0)
		}
		if ctx.Err() != nil {
			_, err := m.end(true, AbortShutdown)
			return err
		}
		// What is polled and what the tasks still hold stay within
		// one poll's bound together.
		take, err := m.work.room(m.pollMax)
		if err != nil {
			m.end(false, AbortProcessing)
			return fatalError{err}
		}
		pctx, cancel := context.WithDeadline(ctx, m.txnStart.Add(interval))
		m.evMu.Lock()
		if m.wake = cancel; len(m.events) > 0 {
			cancel() // events wait: handle them first
		}
		m.evMu.Unlock()
		m.a.stats.enter(loopPoll)
		fs := m.sess.PollRecords(pctx, take)
		m.a.stats.enter(loopOther)
		m.evMu.Lock()
		m.wake = nil
		m.evMu.Unlock()
		cancel()
		if fs.IsClientClosed() {
			return nil
		}
		// Every record polled is either processed in this transaction,
		// or the transaction aborts and the consumer rewinds: the
		// session commits the offsets of everything polled.
		evs := m.takeEvents()
		if len(evs) > 0 {
			// Rebalance events open, suspend and close tasks: the
			// loop's alone.
			if err := m.work.drain(); err != nil {
				m.end(false, AbortProcessing)
				return fatalError{err}
			}
		}
		mustAbort, err := m.handleEvents(ctx, evs)
		if err != nil {
			m.end(false, AbortRebalance)
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			var lost *kgo.ErrDataLoss
			if errors.As(err, &lost) || errors.Is(err, kerr.OffsetOutOfRange) {
				ferr = errors.Join(ferr, fatalError{fmt.Errorf("%w: %s/%d: %v", ErrDataLoss, t, p, err)})
				return
			}
			m.a.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
		})
		if ferr != nil {
			m.end(false, AbortProcessing)
			return ferr
		}
		var perr error
		// A task's partitions (of co-partitioned topics) are merged by
		// record timestamp within the fetch, so a join sees the other
		// side as of the record's time where the fetch allows it
		// (Kafka Streams picks the lowest timestamp across a task's
		// partitions too); each partition keeps its order.
		batches := map[task.ID][][]*kgo.Record{}
		var order []task.ID
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if perr != nil || len(fp.Records) == 0 {
				return
			}
			sub, ok := m.a.subOf[fp.Topic]
			if !ok {
				perr = fmt.Errorf("processor: records of unexpected topic %s", fp.Topic)
				return
			}
			id := task.ID{Sub: sub, Partition: fp.Partition}
			if t := m.tasks[id]; t == nil || m.own.isClosing(id) {
				// Polled just before a revocation: leave them to the
				// next owner, and abort so that their offsets are
				// not committed.
				mustAbort = true
				return
			}
			if batches[id] == nil {
				order = append(order, id)
			}
			batches[id] = append(batches[id], fp.Records)
		})
		// Bounded runs: records past the ends are cut (bounded.go).
		m.trimBounded(batches)
		// Savepoints: user input polled after the pause waits.
		m.cutPausedInput(batches)
		m.a.stats.enter(loopProcess)
		if perr == nil {
			for _, id := range order {
				m.work.add(id, m.tasks[id], batches[id])
			}
			perr = m.work.failed()
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) > 0 {
				last := fp.Records[len(fp.Records)-1].Offset
				if sub, ok := m.a.subOf[fp.Topic]; ok {
					m.a.status.setLag(task.ID{Sub: sub, Partition: fp.Partition}, fp.Topic, fp.LastStableOffset-last-1)
				}
			}
		})
		if perr != nil {
			// A record that cannot be processed stops the instance
			// without committing it (invariant 6): it is reprocessed
			// after the fix.
			m.end(false, AbortProcessing)
			return fatalError{perr}
		}
		// The busy tasks tick once their records are processed (run).
		now := time.Now().UnixMilli()
		for id, t := range m.tasks {
			if !m.work.idle(id) {
				continue
			}
			if err := t.Tick(now); err != nil {
				m.end(false, AbortProcessing)
				return fatalError{err}
			}
		}
		stage := m.collect()
		m.a.stats.enter(loopOther)
		if m.a.cfg.bounded && !mustAbort {
			// Bounded runs: end the tasks whose inputs ended; once
			// every task has, commit and stop (bounded.go).
			if err := m.work.drain(); err != nil {
				m.end(false, AbortProcessing)
				return fatalError{err}
			}
			done, err := m.stepBounded(ctx, polledParts(fs))
			if err != nil {
				m.end(false, AbortProcessing)
				return fatalError{err}
			}
			if done {
				open := m.inTxn
				committed, err := m.end(true, AbortShutdown)
				if err == nil && open && !committed {
					// The last transaction aborted (the group moved
					// on and fenced it, a produce failed): what it
					// fired is not in. A new session, whose producer
					// epoch also ends that transaction at the broker,
					// takes up what is left from the committed state.
					return errRetryable{errors.New("processor: a bounded run's last transaction aborted")}
				}
				m.a.bnd.summary.Finished = committed && err == nil
				return err
			}
		}
		// A full stage ends the transaction early (memory.go).
		early := m.stageFull(stage)
		if mustAbort || len(m.own.closing) > 0 || time.Since(m.txnStart) >= interval || early {
			if early && !mustAbort {
				m.a.mem.earlyCommits.Add(1)
			}
			if _, err := m.end(!mustAbort, AbortRebalance); err != nil {
				return err
			}
			m.ext().pause(ctx) // after a sink's abort: its backoff
			if err := m.closeRevoked(ctx); err != nil {
				return err
			}
		}
		// Savepoints: pause, answer, resume or stop (savepoint_member.go).
		if stop, err := m.stepSavepoint(ctx); err != nil || stop {
			return err
		}
	}
}

// collect takes the tasks' runs that ended since it last did: their
// records join the transaction's, and they size the next poll. It returns
// the stages' estimated bytes.
func (m *member) collect() int64 {
	r := m.work.take()
	m.uncommitted += int64(r.n)
	stage := m.work.stageBytes(m.tasks, m.perRecord)
	m.boundPolls(r.n, r.took, r.grew, stage)
	return stage
}

// firstPoll bounds the first poll of a session, before the instance knows
// how fast it processes: Kafka Streams' max.poll.records.
const firstPoll = 1000

// boundPolls sets how many records the next poll may take from how fast
// the last n took, and from how much the stages grew with them (grew
// bytes, to stage in all).
//
// By time: as many as take one commit interval, and never more than a
// quarter of the transaction timeout (and of the rebalance timeout, within
// which a member must rejoin). A transaction holds every record of its
// polls, so one poll that took longer than the timeout would abort on the
// broker, and so would every retry of it: the instance could never get
// past a backlog of slow records. And a poll that took longer than the
// commit interval makes a transaction of its own however fast the job is:
// on a backlog, each task's stage would then hold a whole run's writes.
//
// By memory: as many as the stages' free share of the memory budget holds
// at the recent polls' largest bytes per record (after an early commit,
// at least half the share is free), so that a poll overruns the share by
// an eighth at most before the instance commits (memory.go).
func (m *member) boundPolls(n int, took time.Duration, grew, stage int64) {
	if n == 0 || took <= 0 {
		return
	}
	cfg := &m.a.cfg
	budget := min(cfg.txnTimeout/4, cfg.rebalanceTimeout/4, cfg.commitInterval)
	limit := float64(n) * float64(budget) / float64(took)
	share := m.a.mem.stage
	if share > 0 && grew > 0 {
		// Bytes per record: the largest of the recent growing polls',
		// decaying by an eighth a poll. The last poll's own average
		// would let a poll of small records size the next for many
		// more of them, and records vary (keys of 0 to 400 bytes in a
		// row). A poll that did not grow the stages (it updated keys
		// already staged) says nothing of the next, which may bring
		// new keys: it keeps the estimate. Sized by such a poll alone,
		// one poll overran the share twice over.
		m.perRecord = max(float64(grew)/float64(n), m.perRecord*7/8)
	}
	if share > 0 && m.perRecord > 0 {
		free := share - stage
		switch {
		case free <= 0:
			free = share / 2 // the early commit that follows leaves at least this
		case free < share/8:
			// Not a poll of a few records after another: the stage
			// overruns its share by an eighth at most.
			free = share / 8
		}
		limit = min(limit, float64(free)/m.perRecord)
	}
	m.pollMax = int(min(max(1, limit), 1<<30))
}

// parallel calls fn(i) once for every i < n, on up to workers goroutines
// (the caller's among them), and returns when all calls have.
func parallel(n, workers int, fn func(i int)) {
	if workers = min(workers, n); workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
			fn(i)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// processMerged runs process (a task's Process) over the task's fetched
// partitions merged by record timestamp (ties: the earlier partition in
// the fetch), each partition in its own order, and returns how many
// records it processed: all of them, or those before the first error.
func processMerged(process func(*kgo.Record) error, parts [][]*kgo.Record) (int, error) {
	if len(parts) == 1 {
		for i, r := range parts[0] {
			if err := process(r); err != nil {
				return i, err
			}
		}
		return len(parts[0]), nil
	}
	parts = slices.Clone(parts) // the caller's stay whole
	n := 0
	for {
		next := -1
		for i, p := range parts {
			if len(p) > 0 && (next < 0 || p[0].Timestamp.Before(parts[next][0].Timestamp)) {
				next = i
			}
		}
		if next < 0 {
			return n, nil
		}
		r := parts[next][0]
		parts[next] = parts[next][1:]
		if err := process(r); err != nil {
			return n, err
		}
		n++
	}
}
