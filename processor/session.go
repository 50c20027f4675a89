package processor

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/txn"
)

// A session is one membership of the consumer group with its txn.Session:
// runSession builds it, and its member owns it until the loop returns.
// The loop is in loop.go, the commit sequence in commit.go, the rebalance
// events and the tasks they open and close in events.go.

// event is a partition change reported by the group, handled by the loop.
type event struct {
	assigned bool  // else revoked or lost
	lost     bool  // lost, not revoked: the coordinator expired the member
	gen      int32 // the generation of an assignment
	parts    map[string][]int32
	// standby, when set, is the member's standby tasks from its new
	// assignment (reported before the partitions are assigned).
	standby map[task.ID]bool
	// savepoint: a savepoint control message waits (savepoint_member.go).
	savepoint bool
}

// member is the instance as one member of the consumer group, for one
// session: what Kafka Streams' StreamThread is, with its consumer, producer,
// tasks and loop (sluice's num.stream.threads are goroutines within it, not
// members of their own). runSession builds a new one after a retryable
// failure. The loop's goroutine owns all of it
// except evMu/events/wake, which the group callbacks append to and end the
// poll with, and what the tasks share while the loop lends them to other
// goroutines (parallel): sent, the sender (out), and the produce
// accounting under prodMu.
type member struct {
	a     *App
	sess  txn.Session
	adm   *kadm.Client
	tasks map[task.ID]*task.Task
	// own decides which tasks open, stay and close as partitions move
	// (ownership.go); its closing tasks close after the open
	// transaction ends.
	own ownership

	evMu   sync.Mutex
	events []event
	wake   context.CancelFunc // ends the poll in progress (nil between polls)

	prodMu     sync.Mutex
	prodErr    error
	onProduced func(*kgo.Record, error) // m.produced, made once
	out        *sender                  // hands the tasks' records to the client (sender.go)

	inTxn       bool
	txnStart    time.Time
	uncommitted int64
	work        *pipeline   // runs the tasks' records (pipeline.go)
	sent        atomic.Bool // something was produced in the open transaction
	pollMax     int         // records the next poll may take (boundPolls)
	perRecord   float64     // stage bytes per record, a decaying maximum (boundPolls)

	// firstSent is when the open transaction's first record was produced
	// (Unix nanoseconds; 0: none yet): the broker's clock for the
	// transaction's timeout starts there, not at Begin (prepareDeadline).
	firstSent atomic.Int64

	// standby follows the changelogs of wantStandby, minus the tasks
	// open here (standby.go).
	standby     *standbySet
	wantStandby map[task.ID]bool

	probeMu sync.Mutex
	probe   *time.Timer // the leader's next probing rebalance
	stopped bool        // no more probes: the session ends

	extRT *externals // external sinks' runtime, made on first use (external.go)

	bounds       *memberBounds // a bounded run's progress, made on first use (bounded.go)
	assignedLast bool          // the last partition event was an assignment
}

func (a *App) runSession(ctx context.Context) (err error) {
	m := &member{a: a, tasks: map[task.ID]*task.Task{}, own: newOwnership(), pollMax: firstPoll}
	m.work = newPipeline(m, a.threads)
	m.onProduced = m.produced
	m.out = newSender(func(r *kgo.Record, promise func(*kgo.Record, error)) {
		m.sess.Produce(context.Background(), r, promise)
	})
	topics := make([]string, 0, len(a.subOf))
	for t := range a.subOf {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	changelogs := a.changelogs
	asg := &assignor{subOf: a.subOf, endpoint: a.cfg.endpoint, onRouting: a.queries.setRouting, inSession: true,
		stateful: a.statefulSubs(), standby: a.cfg.standby, local: &a.local, memo: a.memo,
		onStandby: func(ids []task.ID) { m.enqueue(event{standby: taskSet(ids)}) },
		onProbe:   m.scheduleProbe}
	opts := a.cfg.kgoOpts(
		kgo.ConsumerGroup(a.cfg.appID),
		kgo.ConsumeTopics(topics...),
		kgo.Balancers(asg),
		kgo.SessionTimeout(a.cfg.sessionTimeout),
		kgo.RebalanceTimeout(a.cfg.rebalanceTimeout),
		kgo.TransactionTimeout(a.cfg.txnTimeout),
		kgo.RecordPartitioner(&partitioner{changelogs: changelogs, manual: kgo.ManualPartitioner()}),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, parts map[string][]int32) {
			// The generation the assignment belongs to: franz-go
			// stores it from the join before the sync that assigns.
			_, gen := cl.GroupMetadata()
			m.enqueue(event{assigned: true, gen: gen, parts: parts})
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) { m.enqueue(event{parts: parts}) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			m.enqueue(event{lost: true, parts: parts})
		}),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(1<<20),
	)
	if a.cfg.instanceID != "" {
		opts = append(opts, kgo.InstanceID(a.cfg.instanceID))
	}
	if a.cfg.guarantee == txn.ExactlyOnce {
		// Lost input stops the instance loudly instead of resetting.
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	} else {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	if len(a.cfg.hooks) > 0 {
		opts = append(opts, kgo.WithHooks(a.cfg.hooks...))
	}
	m.sess, err = txn.NewSession(a.cfg.guarantee, a.txnID, opts...)
	if err != nil {
		return fatalError{err}
	}
	asg.client.Store(m.sess.Client())
	a.spc.attach(m)
	m.adm = kadm.NewClient(m.sess.Client())
	if a.cfg.guarantee == txn.ExactlyOnce {
		// Initialise the transactional producer now: this fences a dead
		// incarnation with the same transactional id and aborts the
		// transaction it left open, before any restore waits on it.
		if _, _, err := m.sess.Client().ProducerID(ctx); err != nil {
			m.sess.Close()
			return fmt.Errorf("processor: init producer id: %w", err)
		}
	}
	if m.standby, err = a.startStandbys(); err != nil {
		m.sess.Close()
		return err
	}
	m.out.start()
	defer func() {
		m.stopProbes()
		a.status.setJoined(false)
		a.queries.setRouting(nil)
		m.closeTasks(m.allTasks())
		m.standby.close()
		m.sess.Close()
		m.out.stop() // after Close: a produce it waits on returns
		a.stats.Tasks.Store(0)
	}()
	return m.loop(ctx)
}

// enqueue hands the loop a partition change and ends the poll it waits in,
// so that assigned tasks open (and restore) at once, not when the poll
// would have ended: up to a commit interval later.
func (m *member) enqueue(e event) {
	m.evMu.Lock()
	m.events = append(m.events, e)
	if m.wake != nil {
		m.wake()
	}
	m.evMu.Unlock()
}

func (m *member) takeEvents() []event {
	m.evMu.Lock()
	defer m.evMu.Unlock()
	evs := m.events
	m.events = nil
	return evs
}

// send produces inside the current transaction, remembering the first
// failure so that the transaction aborts instead of committing a gap. The
// sender hands r to the client; the commit sequence waits for it to have
// done so before it ends the transaction.
func (m *member) send(r *kgo.Record, promise func(*kgo.Record, error)) {
	if !m.sent.Load() {
		m.sent.Store(true) // once per transaction: the tasks' goroutines share it
		m.firstSent.CompareAndSwap(0, time.Now().UnixNano())
	}
	if promise == nil {
		// Most records: no closure to allocate.
		m.out.send(r, m.onProduced)
		return
	}
	m.out.send(r, func(r *kgo.Record, err error) {
		m.produced(r, err)
		promise(r, err)
	})
}

// produced is the promise of every record the instance produces.
func (m *member) produced(r *kgo.Record, err error) {
	m.a.stats.Produced.Add(1)
	if err != nil {
		m.prodMu.Lock()
		if m.prodErr == nil {
			m.prodErr = fmt.Errorf("processor: produce to %s: %w", r.Topic, err)
		}
		m.prodMu.Unlock()
	}
}
