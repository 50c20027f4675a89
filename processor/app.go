package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
)

// ErrDataLoss is returned when input records were lost (offset out of range,
// or truncated logs) under exactly_once: sluice stops loudly instead of
// silently resetting.
var ErrDataLoss = errors.New("processor: input records lost")

// App runs a topology as one instance of an application. Instances with the
// same application.id share the work.
type App struct {
	cfg   config
	built *topology.Built
	plan  *exec.Plan
	log   *slog.Logger

	// resolved at Run
	subOf      map[string]int // runtime source topic → sub-topology
	partitions map[int]int32  // sub-topology → tasks
	// internalPartitions: runtime repartition topic → partitions
	internalPartitions map[string]int32
	globals            map[string]store.Engine
	changelogs         map[string]bool
	txnID              string
	dir                string
	threads            int // num.stream.threads, resolved

	stats   Stats
	status  status
	queries queries // what interactive queries read (query.go)
	// local is the local state reported in the join metadata, memo the
	// static member's last join metadata (standby.go).
	local localState
	memo  *joinMemo
}

// Stats are cumulative counters of an instance, for progress reports and
// tests.
type Stats struct {
	Processed atomic.Int64 // input records processed and committed
	Commits   atomic.Int64
	Aborts    atomic.Int64
	Restored  atomic.Int64 // changelog records restored
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
	Class  exec.ErrorClass
	Action exec.Action
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

// New validates the configuration and the topology. It starts nothing.
func New(t *topology.Topology, opts ...Opt) (*App, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	built, err := t.Build()
	if err := errors.Join(err, cfg.validate()); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, built: built, plan: built.Plan(), log: cfg.logger, threads: cfg.threads}
	if a.threads == 0 {
		a.threads = runtime.GOMAXPROCS(0)
	}
	a.stats.ProcessLatency, a.stats.CommitLatency, a.stats.EndToEndLatency = newHistogram(), newHistogram(), newHistogram()
	return a, nil
}

// Topology is the built topology the app runs.
func (a *App) Topology() *topology.Built { return a.built }

// Stats returns the instance's counters.
func (a *App) Stats() *Stats { return &a.stats }

// Run runs the instance until ctx is canceled (then it commits, closes its
// tasks and leaves the group, returning nil) or a fatal error.
func (a *App) Run(ctx context.Context) error {
	a.dir = filepath.Join(a.cfg.stateDir, a.cfg.appID)
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return fmt.Errorf("processor: state.dir: %w", err)
	}
	unlock, err := lockDir(a.dir)
	if err != nil {
		return err
	}
	defer unlock()
	inst := a.cfg.instanceID
	if inst == "" {
		if inst, err = persistentID(a.dir); err != nil {
			return err
		}
	}
	a.txnID = a.cfg.appID + "-" + inst
	if err := a.prepareTopics(ctx); err != nil {
		return err
	}
	a.queries.setWidths(a.partitions)
	a.scanLocalState()
	if a.cfg.instanceID != "" {
		a.memo = newJoinMemo(a.dir)
	}
	g, err := a.startGlobals(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer g.close()
	a.globals = g.engines
	failures := 0
	for {
		commits := a.stats.Commits.Load()
		err := a.runSession(ctx)
		if err == nil || ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		// Fatal unless named retryable or corrupted (errclass.go): a
		// retryable session is rebuilt (a new producer epoch fences the
		// old one) and its tasks reopen from their committed state; a
		// corrupted store is wiped first, and restores. Sessions that
		// keep failing without a commit stop the instance.
		if err := a.recoverFrom(err); err != nil {
			return err
		}
		if a.stats.Commits.Load() == commits {
			failures++
		} else {
			failures = 1
		}
		if failures >= maxSessionFailures {
			return fmt.Errorf("processor: %d sessions in a row failed without a commit: %w", failures, err)
		}
		a.log.Warn("rebuilding session", "err", err, "attempt", failures)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(failures) * 200 * time.Millisecond):
		}
	}
}

// maxSessionFailures bounds how often a session is rebuilt without a commit
// in between.
const maxSessionFailures = 10

func (a *App) deadLetterTopic() string {
	if a.cfg.deadLetter != "" {
		return a.cfg.deadLetter
	}
	return a.cfg.appID + "-dlq"
}

// prepareTopics resolves partition counts and creates the internal topics
// with the partition counts and configs they need.
func (a *App) prepareTopics(ctx context.Context) error {
	// The first requests of the instance: a refused login or TLS
	// handshake shows here, and stops it with ErrAuthentication.
	ctx, watch, stop := withAuthWatch(ctx)
	defer stop()
	cl, err := kgo.NewClient(a.cfg.kgoOpts(watch)...)
	if err != nil {
		return fatalError{fmt.Errorf("processor: admin client: %w", err)}
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	a.subOf = map[string]int{}
	var user []string
	for _, sub := range a.plan.Subs {
		topics, internal := sub.SourceTopics()
		for i, t := range topics {
			if internal[i] {
				t = task.InternalTopic(a.cfg.appID, t)
			} else {
				user = append(user, t)
			}
			a.subOf[t] = sub.ID
		}
	}
	details, err := adm.ListTopics(ctx, user...)
	if err != nil {
		if aerr := authFailure(ctx, err); aerr != nil {
			return aerr
		}
		return fmt.Errorf("processor: list source topics: %w", err)
	}
	counts := map[string]int32{}
	for _, t := range user {
		d, ok := details[t]
		if !ok || d.Err != nil {
			return fatalError{fmt.Errorf("processor: source topic %q does not exist; create it first", t)}
		}
		counts[t] = int32(len(d.Partitions))
	}
	// Sub-topologies reading repartition topics get their width from the
	// sub-topology writing them: iterate to a fixpoint.
	writer := map[string]int{} // runtime repartition topic → writing sub
	for _, sub := range a.plan.Subs {
		for _, n := range sub.Nodes {
			if n.Kind == exec.KindSink && n.Internal {
				writer[task.InternalTopic(a.cfg.appID, n.Topics[0])] = sub.ID
			}
		}
	}
	a.partitions = map[int]int32{}
	for range len(a.plan.Subs) + 1 {
		for _, sub := range a.plan.Subs {
			topics, internal := sub.SourceTopics()
			var w int32
			for i, t := range topics {
				if internal[i] {
					t = task.InternalTopic(a.cfg.appID, t)
					w = max(w, a.partitions[writer[t]])
				} else {
					w = max(w, counts[t])
				}
			}
			a.partitions[sub.ID] = w
		}
	}
	// Co-partitioned user inputs must agree, where a key must meet its
	// state: a stateless sub-topology may merge inputs of any widths.
	for _, sub := range a.plan.Subs {
		if a.growable(sub.ID) {
			continue
		}
		topics, internal := sub.SourceTopics()
		for i, t := range topics {
			if !internal[i] && counts[t] != a.partitions[sub.ID] {
				return fatalError{fmt.Errorf("processor: sub-topology %d reads %s with %d partitions but needs %d: co-partitioned inputs must have equal partition counts", sub.ID, t, counts[t], a.partitions[sub.ID])}
			}
		}
	}
	type topicSpec struct {
		partitions int32
		configs    map[string]*string
	}
	want := map[string]topicSpec{}
	owner := map[string]int{} // internal topic → the sub-topology whose width it has
	a.internalPartitions = map[string]int32{}
	for topic, sub := range writer {
		want[topic] = topicSpec{a.partitions[sub], nil}
		owner[topic] = sub
		a.internalPartitions[topic] = a.partitions[sub]
	}
	var widest int32
	for _, n := range a.partitions {
		widest = max(widest, n)
	}
	a.changelogs = map[string]bool{}
	compact, compactDelete := "compact", "compact,delete"
	for name, sub := range a.plan.StoreSub {
		if a.plan.Stores[name].Source != "" {
			continue // its source topic is its changelog
		}
		t := task.ChangelogTopic(a.cfg.appID, name)
		a.changelogs[t] = true
		configs := map[string]*string{"cleanup.policy": &compact}
		if spec := a.plan.Stores[name]; spec.Windowed && spec.Retention > 0 {
			// Windowed stores expire their own entries; the log may
			// drop what is older than any window can stay open
			// (Kafka Streams' windowed changelogs).
			retention := strconv.FormatInt(spec.Retention.Milliseconds(), 10)
			configs = map[string]*string{"cleanup.policy": &compactDelete, "retention.ms": &retention}
		}
		want[t] = topicSpec{a.partitions[sub], configs}
		owner[t] = sub
	}
	names := make([]string, 0, len(want))
	for t := range want {
		names = append(names, t)
	}
	sort.Strings(names)
	existing, err := adm.ListTopics(ctx, append(names, a.deadLetterTopic())...)
	if err != nil {
		return fmt.Errorf("processor: list internal topics: %w", err)
	}
	// The dead-letter topic is made if missing, as wide as the widest
	// sub-topology; one that exists is used as it is.
	if dlq := a.deadLetterTopic(); existing[dlq].Err != nil || existing[dlq].Topic == "" {
		if err := createTopic(ctx, adm, dlq, widest, nil); err != nil {
			return err
		}
	}
	for _, t := range names {
		w := want[t]
		if d, ok := existing[t]; ok && d.Err == nil {
			if int32(len(d.Partitions)) != w.partitions {
				return fatalError{fmt.Errorf("%w: internal topic %s has %d partitions, but sub-topology %d now has %d (inputs %s); "+
					"adding partitions would move keys away from their state or their repartitioned stream. "+
					"Restore the partition count, or reset the application (sluice reset) to rebuild its state at the new count",
					ErrRepartitioned, t, len(d.Partitions), owner[t], w.partitions, strings.Join(a.userInputs(owner[t], writer), ", "))}
			}
			continue
		}
		if err := createTopic(ctx, adm, t, w.partitions, w.configs); err != nil {
			return err
		}
	}
	return nil
}

// ErrRepartitioned is returned when the input topics of a sub-topology that
// keeps state or writes a repartition topic have a partition count other
// than its internal topics: a key would no longer reach the task holding its
// state. Only sub-topologies that read user topics into stateless operators
// and user topics may grow their inputs, at start or while running.
var ErrRepartitioned = errors.New("processor: input partitions changed")

// growable reports whether sub-topology sub may have its input partitions
// added to: it keeps no state and reads and writes no repartition topic, so
// a key's records need no particular task.
func (a *App) growable(sub int) bool {
	s := a.plan.Subs[sub]
	if len(s.Stores) > 0 {
		return false
	}
	for _, n := range s.Nodes {
		if n.Internal && (n.Kind == exec.KindSink || n.Kind == exec.KindSource) {
			return false
		}
	}
	return true
}

// userInputs names the user topics whose partition counts set the width of
// sub-topology sub: its own, or those of the sub-topologies writing the
// repartition topics it reads.
func (a *App) userInputs(sub int, writer map[string]int) []string {
	var out []string
	seen := map[int]bool{}
	var walk func(s int)
	walk = func(s int) {
		if seen[s] {
			return
		}
		seen[s] = true
		topics, internal := a.plan.Subs[s].SourceTopics()
		for i, t := range topics {
			if !internal[i] {
				out = append(out, t)
			} else if w, ok := writer[task.InternalTopic(a.cfg.appID, t)]; ok {
				walk(w)
			}
		}
	}
	walk(sub)
	sort.Strings(out)
	return slices.Compact(out)
}

// createTopic creates topic, accepting that another instance just did.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("processor: create %s: %w", topic, err)
	}
	return nil
}

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

func (in *instance) loop(ctx context.Context) error {
	interval := in.a.cfg.commitInterval
	for {
		if !in.inTxn {
			if err := in.sess.Begin(); err != nil {
				return err
			}
			in.inTxn, in.txnStart = true, time.Now()
			in.sent.Store(false)
		}
		if ctx.Err() != nil {
			_, err := in.end(true, AbortShutdown)
			return err
		}
		pctx, cancel := context.WithDeadline(ctx, in.txnStart.Add(interval))
		in.evMu.Lock()
		if in.wake = cancel; len(in.events) > 0 {
			cancel() // events wait: handle them first
		}
		in.evMu.Unlock()
		fs := in.sess.PollRecords(pctx, in.pollMax)
		in.evMu.Lock()
		in.wake = nil
		in.evMu.Unlock()
		cancel()
		if fs.IsClientClosed() {
			return nil
		}
		// Every record polled is either processed in this transaction,
		// or the transaction aborts and the consumer rewinds: the
		// session commits the offsets of everything polled.
		mustAbort, err := in.handleEvents(ctx)
		if err != nil {
			in.end(false, AbortRebalance)
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
			in.a.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
		})
		if ferr != nil {
			in.end(false, AbortProcessing)
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
			sub, ok := in.a.subOf[fp.Topic]
			if !ok {
				perr = fmt.Errorf("processor: records of unexpected topic %s", fp.Topic)
				return
			}
			id := task.ID{Sub: sub, Partition: fp.Partition}
			if t := in.tasks[id]; t == nil || in.own.isClosing(id) {
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
		if perr == nil {
			start := time.Now()
			var n int
			n, perr = in.process(order, batches)
			in.boundPolls(n, time.Since(start))
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) > 0 {
				last := fp.Records[len(fp.Records)-1].Offset
				if sub, ok := in.a.subOf[fp.Topic]; ok {
					in.a.status.setLag(task.ID{Sub: sub, Partition: fp.Partition}, fp.Topic, fp.LastStableOffset-last-1)
				}
			}
		})
		if perr != nil {
			// A record that cannot be processed stops the instance
			// without committing it (invariant 6): it is reprocessed
			// after the fix.
			in.end(false, AbortProcessing)
			return fatalError{perr}
		}
		now := time.Now().UnixMilli()
		for _, t := range in.tasks {
			if err := t.Tick(now); err != nil {
				in.end(false, AbortProcessing)
				return fatalError{err}
			}
		}
		if mustAbort || len(in.own.closing) > 0 || time.Since(in.txnStart) >= interval {
			if _, err := in.end(!mustAbort, AbortRebalance); err != nil {
				return err
			}
			if err := in.closeRevoked(ctx); err != nil {
				return err
			}
		}
	}
}

// process runs each task over its batch of the poll: in order on the loop's
// goroutine, or with num.stream.threads > 1 on up to that many goroutines at
// once, each task on one of them. The loop waits for all, so the tasks are
// the loop's again afterwards. The error is the first task's in order.
func (in *instance) process(order []task.ID, batches map[task.ID][][]*kgo.Record) (int, error) {
	type result struct {
		n   int
		err error
	}
	// The largest batches first, taken by whichever goroutine is free, so
	// that none is left with the longest at the end.
	size := make(map[task.ID]int, len(order))
	for _, id := range order {
		for _, p := range batches[id] {
			size[id] += len(p)
		}
	}
	slices.SortStableFunc(order, func(a, b task.ID) int { return size[b] - size[a] })
	results := make([]result, len(order))
	var failed atomic.Bool
	parallel(len(order), in.a.threads, func(i int) {
		if failed.Load() {
			return // the transaction aborts: spare the other tasks
		}
		id := order[i]
		start := time.Now()
		n, err := processMerged(in.tasks[id], batches[id])
		if n > 0 {
			// One clock read per batch: the average per record, and
			// each record's age when its outputs went out.
			now := time.Now()
			in.a.stats.ProcessLatency.observe(now.Sub(start)/time.Duration(n), uint64(n))
			var ages histBatch
			for _, p := range batches[id] {
				for _, r := range p {
					ages.add(max(now.Sub(r.Timestamp), 0))
				}
			}
			in.a.stats.EndToEndLatency.observeBatch(&ages)
		}
		results[i] = result{n, err}
		if err != nil {
			failed.Store(true)
		}
	})
	n := 0
	var err error
	for _, r := range results {
		if n += r.n; r.err != nil {
			err = r.err
			break
		}
	}
	in.uncommitted += int64(n)
	return n, err
}

// firstPoll bounds the first poll of a session, before the instance knows
// how fast it processes: Kafka Streams' max.poll.records.
const firstPoll = 1000

// boundPolls sets how many records the next poll may take from how fast
// the last n took: as many as take a quarter of the transaction timeout
// (and of the rebalance timeout, within which a member must rejoin). A
// transaction holds every record of its polls, so one poll that took
// longer than the timeout would abort on the broker, and so would every
// retry of it: the instance could never get past a backlog of slow records.
// A fast job polls everything buffered, as before.
func (in *instance) boundPolls(n int, took time.Duration) {
	if n == 0 || took <= 0 {
		return
	}
	budget := min(in.a.cfg.txnTimeout, in.a.cfg.rebalanceTimeout) / 4
	in.pollMax = int(min(max(1, float64(n)*float64(budget)/float64(took)), 1<<30))
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

// processMerged processes a task's fetched partitions merged by record
// timestamp (ties: the earlier partition in the fetch), each partition in
// its own order, and returns how many records it processed.
func processMerged(t *task.Task, parts [][]*kgo.Record) (int, error) {
	if len(parts) == 1 {
		for i, r := range parts[0] {
			if err := t.Process(r); err != nil {
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
		if err := t.Process(r); err != nil {
			return n, err
		}
		n++
	}
}

// end flushes the tasks and ends the transaction; then it applies (commit)
// or discards (abort) every task's stage. This is the commit sequence of
// DESIGN.md. cause is why it aborts when commit is false; a failure on the
// way names its own cause.
func (in *instance) end(commit bool, cause string) (bool, error) {
	if !in.inTxn {
		return false, nil
	}
	in.inTxn = false
	start := time.Now()
	tasks := in.allTasks()
	flushErrs := make([]error, len(tasks))
	parallel(len(tasks), in.a.threads, func(i int) { flushErrs[i] = tasks[i].Flush() })
	flushErr := errors.Join(flushErrs...)
	if flushErr != nil {
		commit, cause = false, AbortFlush
	}
	if commit && cause != AbortShutdown && len(in.own.closing) == 0 && !in.sent.Load() && in.uncommitted == 0 && in.clean() {
		// Nothing polled, produced or staged: there is nothing to
		// commit, so the transaction stays open for the next period.
		// Ending it empty would also cost the next commit up to 500ms:
		// franz-go learns that the broker fences zombies through the
		// group (KIP-447) only from the answer to a TxnOffsetCommit, and
		// after a commit without one it holds the next End back for
		// 500ms to let a rebalance settle.
		in.inTxn, in.txnStart = true, time.Now()
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), in.a.cfg.txnTimeout+10*time.Second)
	defer cancel()
	in.prodMu.Lock()
	failed := in.prodErr
	in.prodMu.Unlock()
	if failed != nil && commit {
		commit, cause = false, AbortProduce
	}
	if commit {
		// Invariant 3: a commit with records but no input offset is
		// fenced too (fence.go).
		fctx, ferr := in.fence(ctx)
		if ferr != nil {
			in.a.log.Warn("aborting a transaction that cannot be fenced", "err", ferr)
			commit, cause = false, AbortCommit
		} else {
			ctx = fctx
		}
	}
	committed, err := in.sess.End(ctx, commit)
	in.prodMu.Lock()
	if err == nil && in.prodErr != nil && committed {
		// A record failed after End's flush began; Kafka aborted the
		// transaction for us and End reports it, but be defensive.
		err = in.prodErr
	}
	failed = in.prodErr
	in.prodErr = nil
	in.prodMu.Unlock()
	if committed {
		// Each task applies its stage to its own engines.
		commitErrs := make([]error, len(tasks))
		parallel(len(tasks), in.a.threads, func(i int) { commitErrs[i] = tasks[i].Commit() })
		if cerr := errors.Join(commitErrs...); cerr != nil {
			return true, cerr
		}
		in.a.stats.Commits.Add(1)
		in.a.status.processed(in.tasks)
		in.a.stats.Processed.Add(in.uncommitted)
		took := time.Since(start)
		in.a.stats.CommitLatency.observe(took, 1)
		in.a.log.Debug("committed", "records", in.uncommitted, "tasks", len(in.tasks),
			"transaction", time.Since(in.txnStart).Round(time.Millisecond), "commit", took.Round(time.Microsecond))
	} else {
		for _, t := range in.tasks {
			t.Abort()
		}
		if commit {
			cause = AbortCommit // asked to commit, but the transaction aborted
		}
		in.a.stats.addAbort(cause)
		in.a.log.Debug("aborted", "cause", cause, "records", in.uncommitted, "err", err)
	}
	in.uncommitted = 0
	if err != nil {
		return committed, fmt.Errorf("processor: end transaction: %w", err)
	}
	if flushErr != nil {
		return false, flushErr
	}
	if failed != nil && commit {
		return false, failed
	}
	return committed, nil
}

// handleEvents applies partition changes, as ownership decides: new tasks
// open and restore at once; revoked and lost tasks are marked closing and
// close after the transaction ends (it aborts: the session saw the
// rebalance), and those assigned again whose partition another member may
// have owned meanwhile open again after that, restoring what it wrote.
// mustAbort reports a revocation.
func (in *instance) handleEvents(ctx context.Context) (mustAbort bool, err error) {
	evs := in.takeEvents()
	if len(evs) == 0 {
		return false, nil
	}
	for _, e := range evs {
		if e.standby != nil {
			in.wantStandby = e.standby
			in.syncStandbys()
			continue
		}
		if e.assigned {
			in.a.stats.Rebalances.Add(1)
			in.a.log.Info("partitions assigned", "generation", e.gen, "standby", len(in.wantStandby))
		}
		if !e.assigned {
			// Polled records of the partitions may be in the open
			// transaction: it must not commit their offsets.
			mustAbort = mustAbort || len(e.parts) > 0
		}
		for topic, ps := range e.parts {
			sub, ok := in.a.subOf[topic]
			if !ok {
				continue
			}
			for _, p := range ps {
				id := task.ID{Sub: sub, Partition: p}
				switch {
				case e.lost:
					in.own.lose(id)
					continue
				case !e.assigned:
					in.own.revoke(id)
					continue
				}
				if p >= in.a.partitions[sub] && !in.a.growable(sub) {
					// The input grew while running (the group's
					// leader saw it): stop before a key meets a
					// task without its state.
					return mustAbort, fatalError{fmt.Errorf("%w: %s now has partition %d, but sub-topology %d keeps state or repartitions and has %d partitions; "+
						"restore the partition count, or reset the application (sluice reset) to rebuild its state at the new count",
						ErrRepartitioned, topic, p, sub, in.a.partitions[sub])}
				}
				if !in.own.assign(id, e.gen) {
					if in.own.isClosing(id) {
						// To be reopened: whatever this
						// transaction did with it must not
						// commit.
						mustAbort = true
					}
					continue
				}
				if err := in.openTask(ctx, id, e.gen); err != nil {
					return mustAbort, err
				}
			}
		}
		if e.assigned {
			// In the group once its assignment's tasks are open: the
			// generation is known from the join, before the assignment
			// arrives (franz-go calls OnPartitionsAssigned for every
			// generation, an empty assignment included).
			in.a.status.setJoined(true)
		}
	}
	in.a.stats.Tasks.Store(int64(len(in.tasks)))
	return mustAbort, nil
}

// clean reports whether no task has writes staged.
func (in *instance) clean() bool {
	for _, t := range in.tasks {
		for _, name := range t.Stores() {
			if t.Store(name).Dirty() > 0 {
				return false
			}
		}
	}
	return true
}

// closeRevoked closes the tasks whose partitions were revoked or lost,
// after the transaction they took part in ended, and opens again those of
// them that were assigned again but may have changed elsewhere meanwhile
// (ownership): they restore the tail another member wrote.
//
// Work at revoke time is bounded: the revoked tasks' transaction was
// already aborted by the caller (no flush past its end), and closing a
// task closes its operators and engines (Pebble's Close does not flush the
// memtable: the WAL holds every applied batch). Nothing restores here but
// the reopened tasks; a task that becomes a standby here only registers,
// and its engines open on the follower's goroutine.
func (in *instance) closeRevoked(ctx context.Context) error {
	closing, reopen := in.own.closed()
	for _, id := range closing {
		if t := in.tasks[id]; t != nil {
			in.closeTasks([]*task.Task{t})
		}
	}
	in.a.stats.Tasks.Store(int64(len(in.tasks)))
	if len(closing) > 0 {
		in.syncStandbys()
	}
	for _, id := range slices.SortedFunc(maps.Keys(reopen), cmpTaskID) {
		in.a.log.Info("task reopens: another instance may have owned its partitions meanwhile", "task", id.String())
		if err := in.openTask(ctx, id, reopen[id]); err != nil {
			return err
		}
	}
	in.a.stats.Tasks.Store(int64(len(in.tasks)))
	return nil
}

func cmpTaskID(a, b task.ID) int {
	if a.Sub != b.Sub {
		return a.Sub - b.Sub
	}
	return int(a.Partition) - int(b.Partition)
}

func (in *instance) openTask(ctx context.Context, id task.ID, gen int32) error {
	// A standby copy of the task closes first: its directories are the
	// task's, and the restore below replays only the tail past its
	// checkpoint.
	in.standby.release(id)
	sub := in.a.plan.Subs[id.Sub]
	t, err := task.New(id, sub, in.a.plan, task.Config{
		AppID: in.a.cfg.appID, StateDir: in.a.dir, Send: in.send,
		Errors: in.a.cfg.errors, DeadLetter: in.a.deadLetterTopic(), MaxRecordBytes: in.a.cfg.maxRecordBytes,
		InternalPartitions: in.a.internalPartitions, IdleTimeout: in.a.cfg.idleTimeout, FoldUpdates: in.a.cfg.foldUpdates,
		OnLate:  func() { in.a.stats.Late.Add(1) },
		Globals: in.a.globals,
		OnAction: func(ec exec.ErrorContext, act exec.Action) {
			in.a.stats.addFailure(FailureKey{ec.Class, act})
			in.a.log.Warn("record failed", "class", string(ec.Class), "action", act.String(), "node", ec.Node,
				"topic", ec.Topic, "partition", ec.Partition, "offset", ec.Offset, "err", ec.Err)
		},
	})
	if err != nil {
		return openFailed(id, err)
	}
	start := time.Now()
	in.a.status.set(id, TaskStatus{ID: id.String(), State: TaskRestoring, Stores: t.Stores(), Since: start})
	// Queries see the task from now on: 503 while it restores, or its
	// engines as they are if the caller accepts stale reads.
	in.a.queries.opened(t)
	opened := false
	defer func() {
		if !opened {
			in.a.queries.closed(id)
		}
	}()
	var total int64
	for _, name := range t.Stores() {
		topic, src := task.ChangelogTopic(in.a.cfg.appID, name), (*sourceChangelog)(nil)
		if spec := in.a.plan.Stores[name]; spec.Source != "" {
			topic, src = spec.Source, &sourceChangelog{group: in.a.cfg.appID, accepts: spec.SourceAccepts}
		}
		prog := &restoreProgress{task: id.String(), store: name, log: in.a.log, report: func(restored, remaining int64) {
			in.a.status.restoring(id, total+restored, remaining)
		}}
		n, err := restore(ctx, in.adm, in.a.cfg.kgoOpts, topic, id.Partition, t.Engine(name), 2*in.a.cfg.txnTimeout, src, prog)
		if err != nil {
			t.Close()
			in.a.status.remove(id)
			return fmt.Errorf("processor: task %s: %w", id, err)
		}
		total += n
	}
	in.a.stats.Restored.Add(total)
	if err := t.Init(); err != nil {
		t.Close()
		return fatalError{err}
	}
	// Anchor wall-clock schedules at the time the task opened.
	if err := t.Tick(time.Now().UnixMilli()); err != nil {
		t.Close()
		return fatalError{err}
	}
	in.tasks[id] = t
	in.own.opened(id, gen)
	opened = true
	in.a.local.setActive(id, in.a.standbyEngines(t))
	in.a.queries.restored(id)
	in.a.status.set(id, TaskStatus{ID: id.String(), State: TaskRunning, Stores: t.Stores(), Restored: total, Since: time.Now()})
	in.a.log.Info("task opened", "task", id.String(), "restored", total, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (in *instance) allTasks() []*task.Task {
	ts := make([]*task.Task, 0, len(in.tasks))
	for _, t := range in.tasks {
		ts = append(ts, t)
	}
	return ts
}

func (in *instance) closeTasks(ts []*task.Task) {
	for _, t := range ts {
		in.a.queries.closed(t.ID()) // before Close: see queries
		in.a.closingLocal(t)
		if err := t.Close(); err != nil {
			in.a.log.Warn("close task", "task", t.ID().String(), "err", err)
		}
		delete(in.tasks, t.ID())
		in.own.forget(t.ID())
		in.a.status.remove(t.ID())
		in.a.log.Info("task closed", "task", t.ID().String())
	}
}

// partitioner sends changelog records to the task's partition and the rest
// with topicPartitioner.
type partitioner struct {
	changelogs map[string]bool
	manual     kgo.Partitioner
}

func (p *partitioner) ForTopic(t string) kgo.TopicPartitioner {
	if p.changelogs[t] {
		return p.manual.ForTopic(t)
	}
	return &topicPartitioner{manual: p.manual.ForTopic(t), next: -1}
}

// topicPartitioner sends watermark records, which name their partition,
// where they say; records with a key by Kafka's default (murmur2) hash of
// it (keyHasher), so that repartition topics and co-partitioned user topics
// agree; and
// records without a key to one partition after another, a batch's worth to
// each, as Kafka's uniform sticky partitioner does.
//
// It does not ask to hear of new batches (kgo.TopicPartitionerOnNewBatch):
// kgo then holds the topic's lock only while it partitions a record, not
// while it buffers it, and stream threads producing to one topic do not
// wait for each other. kgo calls it under that lock.
type topicPartitioner struct {
	manual kgo.TopicPartitioner
	next   int // the partition of records without a key; -1 before the first
	bytes  int // what went there
}

// stickyBytes is how much of the records without a key goes to one
// partition before the next: Kafka's default batch.size.
const stickyBytes = 16 << 10

func isWatermark(r *kgo.Record) bool {
	return len(r.Headers) > 0 && r.Headers[0].Key == exec.HeaderWatermark
}

func (p *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return isWatermark(r) || r.Key != nil
}

func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	switch {
	case isWatermark(r):
		return p.manual.Partition(r, n)
	case r.Key != nil:
		return keyHasher.Partition(r, n)
	}
	if p.next < 0 {
		p.next = mrand.IntN(n) // instances start apart
	} else if p.bytes >= stickyBytes {
		p.next, p.bytes = p.next+1, 0
	}
	p.bytes += len(r.Value)
	return p.next % n
}

// lockDir takes an exclusive lock on dir so that two instances never share
// a state directory.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("processor: lock state dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fatalError{fmt.Errorf("processor: state dir %s is in use by another instance: %w", dir, err)}
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// persistentID returns the instance id kept in dir, creating it once.
func persistentID(dir string) (string, error) {
	path := filepath.Join(dir, "instance.id")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("processor: write instance id: %w", err)
	}
	return id, nil
}
