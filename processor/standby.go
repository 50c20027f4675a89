package processor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

// Standby replicas and warm-up (Kafka Streams' num.standby.replicas and
// KIP-441): an instance keeps shadow copies of other instances' stores by
// following their changelogs, so that a task that moves to it, after a
// failure or a scale-out, restores only the tail past its copy's checkpoint.
//
//   - Each member reports, in its join metadata, the sum of its stores'
//     checkpoints for every task it has local state for (localState). The
//     leader's assignor (assignor.go) prefers the most caught-up member for
//     a task whose owner is gone, places num.standby.replicas standbys per
//     stateful task on members other than its owner, and leaves a task
//     where it is while the member it should move to is further behind than
//     acceptable.recovery.lag: that member gets a warm-up replica (at most
//     max.warmup.replicas in the group) and the leader rejoins after
//     probing.rebalance.interval to check again.
//   - Each member follows the changelog partitions of its standby tasks
//     (standbySet, one read_committed client, one goroutine) and applies
//     them to the tasks' Pebble engines with the checkpoint = the last
//     changelog offset applied, exactly as restore does: a standby copy only
//     ever holds committed changelog data (invariant 4) and its checkpoint
//     is the offset it reflects (invariant 2), so the task that opens on it
//     restores only the tail.
//
// Only persistent stores with a changelog topic have standbys: in-memory
// stores restore in full anyway, and a table read from its source topic
// restores up to the group's committed offset, which a follower of the
// topic would overrun.

// standbyConfig holds the standby and warm-up options.
type standbyConfig struct {
	replicas      int
	acceptableLag int64
	maxWarmups    int
	probeInterval time.Duration
}

func defaultStandbyConfig() standbyConfig {
	return standbyConfig{acceptableLag: 10_000, maxWarmups: 2, probeInterval: 10 * time.Minute}
}

func (c standbyConfig) validate() error {
	var errs []error
	if c.replicas < 0 {
		errs = append(errs, fmt.Errorf("processor: num.standby.replicas must not be negative, got %d", c.replicas))
	}
	if c.acceptableLag < 0 {
		errs = append(errs, fmt.Errorf("processor: acceptable.recovery.lag must not be negative, got %d", c.acceptableLag))
	}
	if c.maxWarmups < 1 {
		errs = append(errs, fmt.Errorf("processor: max.warmup.replicas must be at least 1, got %d", c.maxWarmups))
	}
	if c.probeInterval < time.Second {
		errs = append(errs, fmt.Errorf("processor: probing.rebalance.interval must be at least 1s, got %v", c.probeInterval))
	}
	return errors.Join(errs...)
}

// StandbyReplicas sets num.standby.replicas: how many other instances keep
// a standby copy of each stateful task's stores, following its changelog,
// so that a failover restores only the tail past the copy. Default 0.
func StandbyReplicas(n int) Opt { return opt(func(c *config) { c.standby.replicas = n }) }

// AcceptableRecoveryLag sets acceptable.recovery.lag: a member whose copy of
// a task is at most this many changelog offsets behind the most caught-up
// member counts as caught up, and may take the task over; one further
// behind first gets a warm-up replica, and the task moves once it caught
// up. Default 10,000 (Kafka Streams' default).
func AcceptableRecoveryLag(n int64) Opt { return opt(func(c *config) { c.standby.acceptableLag = n }) }

// MaxWarmupReplicas sets max.warmup.replicas: how many warm-up replicas the
// group keeps at once, bounding the extra changelog reads of a scale-out.
// Default 2.
func MaxWarmupReplicas(n int) Opt { return opt(func(c *config) { c.standby.maxWarmups = n }) }

// ProbingRebalanceInterval sets probing.rebalance.interval: while warm-up
// replicas exist, the group leader rejoins this often so that a warm-up
// that caught up takes its task over. Each probing rebalance aborts the
// open transaction (rebalancing is eager). Default 10m.
func ProbingRebalanceInterval(d time.Duration) Opt {
	return opt(func(c *config) { c.standby.probeInterval = d })
}

// localState is what this instance holds of each task's stores, as offset
// sums for the join metadata. JoinGroupMetadata runs on franz-go's group
// goroutine with no context, so it reads this cache, kept by the loop (tasks
// opened and closed) and the standby follower (each batch applied). The
// engines of the tasks the instance runs are read when asked (an atomic
// load under the engine's shared lock): the leader compares the owner's
// real checkpoints with the warm-ups'. Lock order: localState.mu, then an
// engine's lock; nothing takes localState.mu holding an engine lock.
type localState struct {
	mu struct {
		sync.Mutex
		checkpoints map[task.ID]map[string]int64 // store → checkpoint
		active      map[task.ID]map[string]store.Engine
	}
}

// note records a store's checkpoint (NoCheckpoint: nothing).
func (l *localState) note(id task.ID, name string, cp int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.checkpoints == nil {
		l.mu.checkpoints = map[task.ID]map[string]int64{}
	}
	if cp == store.NoCheckpoint {
		delete(l.mu.checkpoints[id], name)
		return
	}
	if l.mu.checkpoints[id] == nil {
		l.mu.checkpoints[id] = map[string]int64{}
	}
	l.mu.checkpoints[id][name] = cp
}

// setActive registers the engines of a task the instance runs (nil: the
// task closed; call it before closing the engines, after noting their
// checkpoints).
func (l *localState) setActive(id task.ID, engines map[string]store.Engine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.active == nil {
		l.mu.active = map[task.ID]map[string]store.Engine{}
	}
	if engines != nil {
		l.mu.active[id] = engines
	} else {
		delete(l.mu.active, id)
	}
}

// offsetSums returns, per task with local state, the sum over its stores
// of checkpoint+1 (Kafka Streams' task offset sums; +1 so that a store at
// offset 0 counts).
func (l *localState) offsetSums() map[task.ID]int64 {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[task.ID]int64, len(l.mu.checkpoints)+len(l.mu.active))
	for id, cps := range l.mu.checkpoints {
		var sum int64
		for _, cp := range cps {
			sum += cp + 1
		}
		if sum > 0 {
			out[id] = sum
		}
	}
	for id, engines := range l.mu.active {
		var sum int64
		for _, eng := range engines {
			if cp, err := eng.Checkpoint(); err == nil && cp != store.NoCheckpoint {
				sum += cp + 1
			}
		}
		if sum > 0 {
			out[id] = max(out[id], sum)
		}
	}
	return out
}

// standbyStores are the stores of sub-topology sub that have standbys:
// persistent, with a changelog topic of their own.
func standbyStores(plan *exec.Plan, sub int) []string {
	var out []string
	for _, name := range plan.Subs[sub].Stores {
		if spec := plan.Stores[name]; !spec.InMemory && spec.Source == "" {
			out = append(out, name)
		}
	}
	return out
}

// scanLocalState reads the checkpoints of the stores left in the state
// directory by earlier runs, so that the first join already reports them.
// Run calls it before any session, holding the state directory's lock, so
// no engine is open.
func (a *App) scanLocalState() {
	for _, sub := range a.plan.Subs {
		for p := int32(0); p < a.partitions[sub.ID]; p++ {
			id := task.ID{Sub: sub.ID, Partition: p}
			// The stores that standbys follow, as the task offset sums
			// of every member count them.
			for _, name := range standbyStores(a.plan, sub.ID) {
				dir := statedir.Store(a.dir, id.String(), name)
				if _, err := os.Stat(dir); err != nil {
					continue
				}
				eng, err := store.OpenPebble(dir)
				if err != nil {
					a.log.Warn("reading local checkpoint", "task", id.String(), "store", name, "err", err)
					continue
				}
				if cp, err := eng.Checkpoint(); err == nil {
					a.local.note(id, name, cp)
				}
				eng.Close()
			}
		}
	}
}

// joinMemo makes a static member's restart invisible to the group: the
// first join of a restarted static member (group.instance.id) sends the
// exact join metadata its previous incarnation last sent. A broker that
// compares a returning static member's metadata with what it holds (kfake
// does, byte for byte; Kafka compares only the protocol) then hands back the
// old assignment without a rebalance (KIP-345), which is the point of static
// membership. The stale offsets and owned partitions in it are what the
// group saw last, so a rebalance that happens anyway sees nothing newer than
// it already knew; every later join sends fresh metadata.
type joinMemo struct {
	path string
	mu   sync.Mutex
	old  []byte // the previous incarnation's last metadata; nil once assigned
}

func newJoinMemo(dir string) *joinMemo {
	m := &joinMemo{path: statedir.JoinMemo(dir)}
	m.old, _ = os.ReadFile(m.path)
	return m
}

// previous returns the previous incarnation's metadata until this one got
// its first assignment, or nil.
func (m *joinMemo) previous() []byte {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.old
}

// assigned marks the first assignment received.
func (m *joinMemo) assigned() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.old = nil
	m.mu.Unlock()
}

// save keeps the metadata of a join (a local file write, no network).
func (m *joinMemo) save(b []byte) {
	if m == nil {
		return
	}
	tmp := m.path + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		_ = os.Rename(tmp, m.path)
	}
}

// standbySet follows the changelogs of the instance's standby tasks. The
// loop says which tasks it should hold (set, release); a goroutine of its
// own opens their engines, starts consuming at each engine's checkpoint + 1
// and applies what it reads.
//
// Lock order: standbySet.mu, then status.mu or localState.mu (leaves). The
// loop takes mu to change the set, so once release returns the follower
// touches none of that task's engines, status or directory.
type standbySet struct {
	a      *App
	cl     *kgo.Client
	adm    *kadm.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		tasks map[task.ID]*standbyTask
		byTP  map[string]map[int32]*standbyStore
	}
}

type standbyTask struct {
	id      task.ID
	pending bool // engines not opened yet
	stores  []*standbyStore
	applied int64 // changelog records applied since it became standby
	since   time.Time
	lag     map[string]int64
}

type standbyStore struct {
	t     *standbyTask
	name  string
	topic string
	eng   store.Engine
}

// standbyPoll bounds how long the follower waits for records before it
// looks for new standby tasks to open.
const standbyPoll = 200 * time.Millisecond

// startStandbys starts the follower of a session; stop it with close.
func (a *App) startStandbys() (*standbySet, error) {
	cl, err := kgo.NewClient(a.cfg.kgoOpts(
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // invariant 4
		kgo.KeepControlRecords(),                     // the checkpoint may reach a commit marker, as in restore
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	if err != nil {
		return nil, fmt.Errorf("processor: standby client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &standbySet{a: a, cl: cl, adm: kadm.NewClient(cl), cancel: cancel, done: make(chan struct{})}
	s.mu.tasks = map[task.ID]*standbyTask{}
	s.mu.byTP = map[string]map[int32]*standbyStore{}
	go s.run(ctx)
	return s, nil
}

// set makes ids the standby tasks (loop only): tasks no longer in it are
// closed now; new ones open on the follower's goroutine.
func (s *standbySet) set(ids map[task.ID]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.mu.tasks {
		if !ids[id] {
			s.closeLocked(id)
		}
	}
	for id := range ids {
		if s.mu.tasks[id] == nil && len(standbyStores(s.a.plan, id.Sub)) > 0 {
			s.mu.tasks[id] = &standbyTask{id: id, pending: true, since: time.Now()}
		}
	}
}

// release closes the standby copy of id, if any, so that the task can open
// its directories as an active task (loop only).
func (s *standbySet) release(id task.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(id)
}

func (s *standbySet) closeLocked(id task.ID) {
	st := s.mu.tasks[id]
	if st == nil {
		return
	}
	delete(s.mu.tasks, id)
	rm := map[string][]int32{}
	for _, ss := range st.stores {
		rm[ss.topic] = append(rm[ss.topic], id.Partition)
		delete(s.mu.byTP[ss.topic], id.Partition)
		if cp, err := ss.eng.Checkpoint(); err == nil {
			s.a.local.note(id, ss.name, cp)
		}
		if err := ss.eng.Close(); err != nil {
			s.a.log.Warn("close standby store", "task", id.String(), "store", ss.name, "err", err)
		}
	}
	if len(rm) > 0 {
		s.cl.RemoveConsumePartitions(rm)
	}
	if !st.pending {
		s.a.status.removeIf(id, TaskStandby)
		s.a.log.Info("standby closed", "task", id.String(), "applied", st.applied)
	}
}

// close stops the follower and closes every standby engine (session end).
func (s *standbySet) close() {
	s.cancel()
	s.cl.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.mu.tasks {
		s.closeLocked(id)
	}
}

func (s *standbySet) run(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		if err := s.openPending(ctx); err != nil && ctx.Err() == nil {
			s.a.log.Warn("opening standby tasks", "err", err)
		}
		pctx, cancel := context.WithTimeout(ctx, standbyPoll)
		fs := s.cl.PollFetches(pctx)
		cancel()
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				s.a.log.Warn("standby fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		if err := s.apply(fs); err != nil {
			s.a.log.Warn("standby apply failed: the copy rewinds to its checkpoint", "err", err)
		}
	}
}

// openPending opens the engines of new standby tasks and starts following
// their changelogs. The offsets are listed first, without the lock; the
// engines are opened under it, so that a release cannot miss one.
func (s *standbySet) openPending(ctx context.Context) error {
	s.mu.Lock()
	var topics []string
	seen := map[string]bool{}
	for _, st := range s.mu.tasks {
		if st.pending {
			for _, name := range standbyStores(s.a.plan, st.id.Sub) {
				if t := names.Changelog(s.a.cfg.appID, name); !seen[t] {
					seen[t] = true
					topics = append(topics, t)
				}
			}
		}
	}
	s.mu.Unlock()
	if len(topics) == 0 {
		return nil
	}
	sort.Strings(topics)
	starts, err := s.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	ends, err := s.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	add := map[string]map[int32]kgo.Offset{}
	var errs []error
	for _, st := range s.mu.tasks {
		if !st.pending {
			continue
		}
		if err := s.openLocked(st, starts, ends, add); err != nil {
			errs = append(errs, err)
		}
	}
	if len(add) > 0 {
		s.cl.AddConsumePartitions(add)
	}
	return errors.Join(errs...)
}

func (s *standbySet) openLocked(st *standbyTask, starts, ends kadm.ListedOffsets, add map[string]map[int32]kgo.Offset) error {
	id := st.id
	var opened []*standbyStore
	fail := func(err error) error {
		for _, ss := range opened {
			ss.eng.Close()
		}
		return fmt.Errorf("processor: standby task %s: %w", id, err)
	}
	offsets := map[string]kgo.Offset{}
	for _, name := range standbyStores(s.a.plan, id.Sub) {
		topic := names.Changelog(s.a.cfg.appID, name)
		start, okS := starts.Lookup(topic, id.Partition)
		end, okE := ends.Lookup(topic, id.Partition)
		if !okS || !okE || start.Err != nil || end.Err != nil {
			return fail(fmt.Errorf("no offsets for %s/%d", topic, id.Partition))
		}
		dir := statedir.Store(s.a.dir, id.String(), name)
		eng, err := s.a.openCopy(id, name, dir)
		if err != nil {
			return fail(err)
		}
		opened = append(opened, &standbyStore{t: st, name: name, topic: topic, eng: eng})
		cp, err := eng.Checkpoint()
		if err != nil {
			return fail(err)
		}
		// The rule restore follows too (checkpoint.go).
		rp := resumeFrom(cp, start.Offset, end.Offset)
		if rp.wipe {
			s.a.log.Warn("standby copy is inconsistent with its changelog: wiping it", "task", id.String(), "store", name,
				"why", rp.why, "local_checkpoint", cp, "log_start", start.Offset, "log_end", end.Offset)
			if err := eng.Wipe(); err != nil {
				return fail(err)
			}
			s.a.local.note(id, name, store.NoCheckpoint)
		}
		offsets[topic] = kgo.NewOffset().At(rp.from)
	}
	st.stores, st.pending = opened, false
	st.lag = map[string]int64{}
	for _, ss := range opened {
		if s.mu.byTP[ss.topic] == nil {
			s.mu.byTP[ss.topic] = map[int32]*standbyStore{}
		}
		s.mu.byTP[ss.topic][id.Partition] = ss
		if add[ss.topic] == nil {
			add[ss.topic] = map[int32]kgo.Offset{}
		}
		add[ss.topic][id.Partition] = offsets[ss.topic]
		if cp, _ := ss.eng.Checkpoint(); cp != store.NoCheckpoint {
			s.a.local.note(id, ss.name, cp)
		}
	}
	s.reportLocked(st)
	s.a.log.Info("standby opened", "task", id.String())
	return nil
}

// apply writes what was fetched into the standby engines, each batch with
// the offset of its last record (control records included) as the
// checkpoint. Records at or below an engine's checkpoint are skipped: a
// fetch may still carry records of a partition that was removed and added
// again from the same checkpoint.
func (s *standbySet) apply(fs kgo.Fetches) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	touched := map[*standbyTask]bool{}
	// failed are the tasks a store of which could not apply a batch: the
	// consumer is already past it, so going on would raise the
	// checkpoint over the hole, and a task promoted from the copy would
	// restore only past it. They are rewound: closed, and reopened at
	// their checkpoints.
	failed := map[*standbyTask]bool{}
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		ss := s.mu.byTP[fp.Topic][fp.Partition]
		if ss == nil || failed[ss.t] {
			return
		}
		fail := func(err error) {
			errs = append(errs, fmt.Errorf("processor: standby task %s: store %s: %w", ss.t.id, ss.name, err))
			failed[ss.t] = true
		}
		cp, err := ss.eng.Checkpoint()
		if err != nil {
			fail(err)
			return
		}
		last := cp
		batch := make([]store.Write, 0, min(len(fp.Records), restoreBatch))
		var n int64
		for _, r := range fp.Records {
			if r.Offset <= cp {
				continue
			}
			last = r.Offset
			if !r.Attrs.IsControl() {
				batch = append(batch, store.Write{Key: r.Key, Value: r.Value})
				n++
			}
			if len(batch) == restoreBatch {
				if err := ss.eng.Apply(batch, last); err != nil {
					fail(err)
					return
				}
				batch = batch[:0]
			}
		}
		if last != cp {
			if err := ss.eng.Apply(batch, last); err != nil {
				fail(err)
				return
			}
			s.a.local.note(ss.t.id, ss.name, last)
		}
		ss.t.applied += n
		if fp.HighWatermark > 0 {
			ss.t.lag[ss.topic] = max(fp.HighWatermark-last-1, 0)
		}
		touched[ss.t] = true
	})
	for st := range touched {
		if !failed[st] {
			s.reportLocked(st)
		}
	}
	for st := range failed {
		s.rewindLocked(st)
	}
	return errors.Join(errs...)
}

// rewindLocked closes a standby task's copy and queues it to open again:
// its consumer restarts at each store's checkpoint + 1, so the batch that
// failed is read again instead of skipped.
func (s *standbySet) rewindLocked(st *standbyTask) {
	s.closeLocked(st.id)
	s.mu.tasks[st.id] = &standbyTask{id: st.id, pending: true, since: st.since, applied: st.applied}
}

// reportLocked publishes a standby task's status (/tasks, metrics).
func (s *standbySet) reportLocked(st *standbyTask) {
	names := make([]string, len(st.stores))
	engines := make([]store.Engine, len(st.stores))
	checkpoints := map[string]int64{}
	for i, ss := range st.stores {
		names[i], engines[i] = ss.name, ss.eng
		if cp, err := ss.eng.Checkpoint(); err == nil {
			checkpoints[ss.name] = cp
		}
	}
	stats := make([]StoreStatus, len(names))
	for i, n := range names {
		stats[i] = StoreStatus{Name: n}
	}
	lag := make(map[string]int64, len(st.lag))
	for k, v := range st.lag {
		lag[k] = v
	}
	s.a.status.set(st.id, TaskStatus{ID: st.id.String(), State: TaskStandby, Stores: names, Restored: st.applied,
		Since: st.since, Lag: lag, Checkpoints: checkpoints, StoreStats: stats, engines: engines})
}

// statefulSubs are the sub-topologies whose tasks can have standbys.
func (a *App) statefulSubs() map[int]bool {
	out := map[int]bool{}
	for _, sub := range a.plan.Subs {
		if len(standbyStores(a.plan, sub.ID)) > 0 {
			out[sub.ID] = true
		}
	}
	return out
}

// taskSet makes a set of ids, never nil.
func taskSet(ids []task.ID) map[task.ID]bool {
	out := make(map[task.ID]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// standbyEngines are the engines of t's stores that standbys follow.
func (a *App) standbyEngines(t *task.Task) map[string]store.Engine {
	out := map[string]store.Engine{}
	for _, name := range standbyStores(a.plan, t.ID().Sub) {
		if eng := t.Engine(name); eng != nil {
			out[name] = eng
		}
	}
	return out
}

// closingLocal keeps the checkpoints of a task about to close: its state
// stays on disk, and the next join reports it.
func (a *App) closingLocal(t *task.Task) {
	for name, eng := range a.standbyEngines(t) {
		if cp, err := eng.Checkpoint(); err == nil {
			a.local.note(t.ID(), name, cp)
		}
	}
	a.local.setActive(t.ID(), nil)
}

// syncStandbys hands the follower the standby tasks it should hold: those
// of the latest assignment that are not open here as active tasks (a task
// revoked from here waits until it closed). Loop only.
func (m *member) syncStandbys() {
	want := make(map[task.ID]bool, len(m.wantStandby))
	for id := range m.wantStandby {
		if m.tasks[id] == nil {
			want[id] = true
		}
	}
	m.standby.set(want)
}

// scheduleProbe arranges the leader's probing rebalance (group goroutine):
// after probing.rebalance.interval the member rejoins, and the leader
// balances again with the warm-ups' new offset sums.
func (m *member) scheduleProbe() {
	m.probeMu.Lock()
	defer m.probeMu.Unlock()
	if m.stopped || m.probe != nil {
		return
	}
	m.a.log.Info("warm-up replicas assigned: probing rebalance scheduled", "in", m.a.cfg.standby.probeInterval)
	m.probe = time.AfterFunc(m.a.cfg.standby.probeInterval, func() {
		m.probeMu.Lock()
		m.probe = nil
		stopped := m.stopped
		m.probeMu.Unlock()
		if !stopped {
			m.sess.Client().ForceRebalance()
		}
	})
}

func (m *member) stopProbes() {
	m.probeMu.Lock()
	defer m.probeMu.Unlock()
	m.stopped = true
	if m.probe != nil {
		m.probe.Stop()
		m.probe = nil
	}
}
