package processor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
				if batch, err = task.AppendChangelogWrites(batch, r); err != nil {
					fail(err)
					return
				}
				n++
			}
			if len(batch) >= restoreBatch {
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
