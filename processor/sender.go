package processor

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sender hands the records the tasks produce to the client on a goroutine
// of its own, so that the client's work for each record (partitioning,
// taking the partition's lock, appending it to a batch) is not on the
// goroutine that processes the task. On a backlog the embedded broker
// serves one partition at a time, so one task processes at a time and its
// goroutine is the job's bound; in a bench profile of a windowed count the
// client's produce was a tenth of the CPU, all of it on the goroutines
// running the tasks (PERFORMANCE.md, "Issue 20, session 44").
//
// Records reach the client in the order send was called: a task's records,
// sent from whichever goroutine runs it, one at a time (pipeline.go), keep
// their order within each partition, as a changelog's must.
//
// The commit sequence flushes the tasks on goroutines of its own and waits
// for them (commit.go): there the records go to the client on the goroutine
// that sent them, as they did before the sender: its one goroutine took
// longer to produce a commit's records than the flushing goroutines did
// (a word count's commit sends most of its records). It calls directSends,
// which waits until the queue is empty, before it flushes the tasks, and
// queueSends after the transaction.
//
// Invariant 1 holds because every record a task sent before directSends is
// with the client when it returns, and every record sent after it is
// with the client when send returns; End then flushes the client's records
// into the transaction.
type sender struct {
	produce func(*kgo.Record, func(*kgo.Record, error))

	mu sync.Mutex
	// cond signals changes of queue and busy, and stopping: records
	// queued (to run), the queue taken or emptied (to send and
	// directSends).
	cond  sync.Cond
	queue []queuedRecord
	spare []queuedRecord // the last batch's memory, for the next queue
	// busy: run took a batch and is producing it.
	busy bool
	// produceOnSend: send produces on the goroutine that calls it
	// (directSends, queueSends).
	produceOnSend bool
	stopped       bool
	done          chan struct{} // closed when run returns
}

type queuedRecord struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
}

// maxQueued bounds the records waiting for the sender's goroutine: a task
// that sends more waits, as it would for the client's own buffer.
const maxQueued = 1 << 14

// newSender returns a sender that produces with produce once started.
func newSender(produce func(*kgo.Record, func(*kgo.Record, error))) *sender {
	s := &sender{produce: produce, done: make(chan struct{})}
	s.cond.L = &s.mu
	return s
}

// start starts the goroutine; stop waits for it.
func (s *sender) start() { go s.run() }

// send queues r for the client. Between directSends and queueSends, and
// after stop, it produces r itself.
func (s *sender) send(r *kgo.Record, promise func(*kgo.Record, error)) {
	s.mu.Lock()
	for len(s.queue) >= maxQueued && !s.stopped {
		s.cond.Wait()
	}
	if s.produceOnSend || s.stopped {
		s.mu.Unlock()
		s.produce(r, promise)
		return
	}
	s.queue = append(s.queue, queuedRecord{r, promise})
	if len(s.queue) == 1 {
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// directSends returns once the client holds every record sent before it;
// from then on send produces on the goroutine that calls it, until
// queueSends.
func (s *sender) directSends() {
	s.mu.Lock()
	for len(s.queue) > 0 || s.busy {
		s.cond.Wait()
	}
	s.produceOnSend = true
	s.mu.Unlock()
}

// queueSends ends directSends: send queues again.
func (s *sender) queueSends() {
	s.mu.Lock()
	s.produceOnSend = false
	s.mu.Unlock()
}

// stop produces what is queued and ends the goroutine; it is idempotent.
// Call it after closing the client, so that a produce waiting for room in
// the client's buffer returns.
func (s *sender) stop() {
	s.mu.Lock()
	s.stopped = true
	s.cond.Broadcast()
	s.mu.Unlock()
	<-s.done
}

func (s *sender) run() {
	defer close(s.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for len(s.queue) == 0 {
			s.busy = false
			s.cond.Broadcast() // directSends waits for this
			if s.stopped {
				return
			}
			s.cond.Wait()
		}
		batch := s.queue
		s.queue, s.spare = s.spare[:0], nil
		s.busy = true
		s.cond.Broadcast() // room for a send waiting on a full queue
		s.mu.Unlock()
		for _, q := range batch {
			s.produce(q.r, q.promise)
		}
		clear(batch)
		s.mu.Lock()
		s.spare = batch
	}
}
