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
// runSession builds it, and its instance owns it until the loop returns.
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
}

// instance is the state of one session: the loop's goroutine owns all of it
// except evMu/events/wake, which the group callbacks append to and end the
// poll with, and what the tasks share while the loop lends them to other
// goroutines (parallel): sent, and the produce accounting under prodMu.
type instance struct {
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
	onProduced func(*kgo.Record, error) // in.produced, made once

	inTxn       bool
	txnStart    time.Time
	uncommitted int64
	sent        atomic.Bool // something was produced in the open transaction
	pollMax     int         // records the next poll may take (boundPolls)

	// standby follows the changelogs of wantStandby, minus the tasks
	// open here (standby.go).
	standby     *standbySet
	wantStandby map[task.ID]bool

	probeMu sync.Mutex
	probe   *time.Timer // the leader's next probing rebalance
	stopped bool        // no more probes: the session ends
}

func (a *App) runSession(ctx context.Context) (err error) {
	in := &instance{a: a, tasks: map[task.ID]*task.Task{}, own: newOwnership(), pollMax: firstPoll}
	in.onProduced = in.produced
	topics := make([]string, 0, len(a.subOf))
	for t := range a.subOf {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	changelogs := a.changelogs
	opts := a.cfg.kgoOpts(
		kgo.ConsumerGroup(a.cfg.appID),
		kgo.ConsumeTopics(topics...),
		kgo.Balancers(&assignor{subOf: a.subOf, endpoint: a.cfg.endpoint, onRouting: a.queries.setRouting,
			stateful: a.statefulSubs(), standby: a.cfg.standby, local: &a.local, memo: a.memo,
			onStandby: func(ids []task.ID) { in.enqueue(event{standby: taskSet(ids)}) },
			onProbe:   in.scheduleProbe}),
		kgo.SessionTimeout(a.cfg.sessionTimeout),
		kgo.RebalanceTimeout(a.cfg.rebalanceTimeout),
		kgo.TransactionTimeout(a.cfg.txnTimeout),
		kgo.RecordPartitioner(&partitioner{changelogs: changelogs, manual: kgo.ManualPartitioner()}),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			// The generation the assignment belongs to: franz-go
			// stores it from the join before the sync that assigns.
			_, gen := cl.GroupMetadata()
			in.enqueue(event{assigned: true, gen: gen, parts: m})
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { in.enqueue(event{parts: m}) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { in.enqueue(event{lost: true, parts: m}) }),
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
	in.sess, err = txn.NewSession(a.cfg.guarantee, a.txnID, opts...)
	if err != nil {
		return fatalError{err}
	}
	in.adm = kadm.NewClient(in.sess.Client())
	if a.cfg.guarantee == txn.ExactlyOnce {
		// Initialise the transactional producer now: this fences a dead
		// incarnation with the same transactional id and aborts the
		// transaction it left open, before any restore waits on it.
		if _, _, err := in.sess.Client().ProducerID(ctx); err != nil {
			in.sess.Close()
			return fmt.Errorf("processor: init producer id: %w", err)
		}
	}
	if in.standby, err = a.startStandbys(); err != nil {
		in.sess.Close()
		return err
	}
	defer func() {
		in.stopProbes()
		a.status.setJoined(false)
		a.queries.setRouting(nil)
		in.closeTasks(in.allTasks())
		in.standby.close()
		in.sess.Close()
		a.stats.Tasks.Store(0)
	}()
	return in.loop(ctx)
}

// enqueue hands the loop a partition change and ends the poll it waits in,
// so that assigned tasks open (and restore) at once, not when the poll
// would have ended: up to a commit interval later.
func (in *instance) enqueue(e event) {
	in.evMu.Lock()
	in.events = append(in.events, e)
	if in.wake != nil {
		in.wake()
	}
	in.evMu.Unlock()
}

func (in *instance) takeEvents() []event {
	in.evMu.Lock()
	defer in.evMu.Unlock()
	evs := in.events
	in.events = nil
	return evs
}

// send produces inside the current transaction, remembering the first
// failure so that the transaction aborts instead of committing a gap.
func (in *instance) send(r *kgo.Record, promise func(*kgo.Record, error)) {
	if !in.sent.Load() {
		in.sent.Store(true) // once per transaction: the tasks' goroutines share it
	}
	if promise == nil {
		// Most records: no closure to allocate.
		in.sess.Produce(context.Background(), r, in.onProduced)
		return
	}
	in.sess.Produce(context.Background(), r, func(r *kgo.Record, err error) {
		in.produced(r, err)
		promise(r, err)
	})
}

// produced is the promise of every record the instance produces.
func (in *instance) produced(r *kgo.Record, err error) {
	in.a.stats.Produced.Add(1)
	if err != nil {
		in.prodMu.Lock()
		if in.prodErr == nil {
			in.prodErr = fmt.Errorf("processor: produce to %s: %w", r.Topic, err)
		}
		in.prodMu.Unlock()
	}
}
