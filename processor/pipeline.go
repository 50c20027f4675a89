package processor

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
)

// The tasks process their polled records on up to num.stream.threads
// goroutines while the loop polls again: a task's records wait only for
// that task's earlier ones, not for the poll's other tasks. A fetch often
// holds one partition (a batch larger than max.partition.fetch.bytes comes
// only as a fetch's first partition), so a loop that waited for each poll's
// tasks would process about one task at a time whatever the thread count.
//
// A task is the loop's while it is idle, and one goroutine's while it has
// records queued or running: the loop ticks only idle tasks, and waits for
// every task to be idle (drain) before anything else touches them: the
// commit sequence, rebalance events, a bounded run's step, a savepoint's.
// The loop polls again once no task waits for a goroutine and fewer records
// than a poll may take are queued or running, and that poll takes what the
// bound leaves: every record in hand is processed before the transaction
// ends, so together they stay within the time the bound allows (loop.go).

// pipeline runs the tasks' batches.
type pipeline struct {
	m       *member
	threads int
	run     func(*task.Task, [][][]*kgo.Record) (runTotals, error) // m.run; tests replace it

	mu      sync.Mutex
	changed sync.Cond          // a run began or ended
	queued  map[task.ID]*queue // tasks with records queued or running
	ready   []*queue           // queued and not running, in order
	running int                // goroutines running tasks
	pending int                // records queued or running
	err     error              // the first processing error
	done    runTotals          // runs ended since the last take
}

// queue holds a task's batches, in poll order.
type queue struct {
	id      task.ID
	t       *task.Task
	batches [][][]*kgo.Record
	running bool
	stage   int64 // the task's stage bytes before its run
}

// runTotals sums the runs that ended: records processed, the time their
// runs took, and the bytes the stages grew by.
type runTotals struct {
	n    int
	took time.Duration
	grew int64
}

func newPipeline(m *member, threads int) *pipeline {
	p := &pipeline{m: m, threads: max(threads, 1), run: m.run, queued: map[task.ID]*queue{}}
	p.changed.L = &p.mu
	return p
}

// add queues task t's batch (its partitions of one poll) behind its
// earlier ones, and starts a goroutine if one is free. Loop only.
func (p *pipeline) add(id task.ID, t *task.Task, batch [][]*kgo.Record) {
	n := 0
	for _, part := range batch {
		n += len(part)
	}
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queued[id]
	if q == nil {
		q = &queue{id: id, t: t, stage: t.StageBytes()} // idle: the loop's
		p.queued[id] = q
	}
	if len(q.batches) == 0 && !q.running {
		p.ready = append(p.ready, q)
	}
	q.batches = append(q.batches, batch)
	p.pending += n
	if len(p.ready) > 0 && p.running < p.threads {
		p.running++
		p.m.a.stats.working(1)
		go p.work()
	}
}

// work runs ready tasks until none is left.
func (p *pipeline) work() {
	p.mu.Lock()
	for len(p.ready) > 0 {
		q := p.ready[0]
		p.ready = p.ready[1:]
		batches := q.batches
		q.batches, q.running = nil, true
		n := 0
		for _, b := range batches {
			for _, part := range b {
				n += len(part)
			}
		}
		// The loop may wait in room for this task to leave ready.
		p.changed.Broadcast()
		failed, stage := p.err != nil, q.stage
		p.mu.Unlock()
		var r runTotals
		var err error
		if !failed { // after a failure the transaction aborts: spare the rest
			r, err = p.run(q.t, batches)
		}
		after := q.t.StageBytes()
		r.grew = after - stage
		p.mu.Lock()
		p.pending -= n
		p.done.n += r.n
		p.done.took += r.took
		p.done.grew += max(r.grew, 0)
		if err != nil && p.err == nil {
			p.err = err
		}
		q.running = false
		q.stage = after
		if len(q.batches) > 0 {
			p.ready = append(p.ready, q)
		} else {
			delete(p.queued, q.id)
		}
		p.changed.Broadcast()
	}
	p.running--
	p.m.a.stats.working(-1)
	p.changed.Broadcast()
	p.mu.Unlock()
}

// room waits until the loop may poll again: until no task waits for a
// goroutine, and fewer than limit records (what one poll may take, sized
// by the serial rate) are queued or running. It returns how many records
// the poll may take, limit less those, and the first processing error.
// Every record polled is processed before the transaction ends, so the
// records in hand, not only the next poll's, must fit the time the poll
// bound allows.
func (p *pipeline) room(limit int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for (len(p.ready) > 0 || p.pending >= limit) && p.err == nil {
		p.changed.Wait()
	}
	return max(limit-p.pending, 1), p.err
}

// drain waits until every task is idle again, the loop's, and returns the
// first processing error (then forgotten: the transaction aborts).
func (p *pipeline) drain() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.running > 0 {
		p.changed.Wait()
	}
	err := p.err
	p.err = nil
	return err
}

// failed returns the first processing error so far.
func (p *pipeline) failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// idle reports whether task id is the loop's. Loop only: only the loop
// makes a task busy.
func (p *pipeline) idle(id task.ID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queued[id] == nil
}

// take returns the runs that ended since the last take.
func (p *pipeline) take() runTotals {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.done
	p.done = runTotals{}
	return r
}

// stageBytes estimates the tasks' stages: an idle task's as it is, a busy
// one's as it was before its run, and the records queued or running at
// perRecord bytes each. Loop only.
func (p *pipeline) stageBytes(tasks map[task.ID]*task.Task, perRecord float64) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := int64(float64(p.pending) * perRecord)
	for id, t := range tasks {
		if q := p.queued[id]; q != nil {
			n += q.stage
		} else {
			n += t.StageBytes()
		}
	}
	return n
}

// run processes a task's batches in order, then ticks it: the task is the
// calling goroutine's.
func (m *member) run(t *task.Task, batches [][][]*kgo.Record) (runTotals, error) {
	var r runTotals
	for _, batch := range batches {
		start := time.Now()
		n, err := processMerged(t.Process, batch)
		r.n += n
		if n > 0 {
			// One clock read per batch: the average per record, and
			// each record's age when its outputs went out.
			now := time.Now()
			r.took += now.Sub(start)
			m.a.stats.ProcessLatency.observe(now.Sub(start)/time.Duration(n), uint64(n))
			var ages histBatch
			for _, part := range batch {
				for _, rec := range part {
					ages.add(max(now.Sub(rec.Timestamp), 0))
				}
			}
			m.a.stats.EndToEndLatency.observeBatch(&ages)
		}
		if err != nil {
			return r, err
		}
	}
	return r, t.Tick(time.Now().UnixMilli())
}
