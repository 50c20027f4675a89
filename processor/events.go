package processor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/topology"
)

// Rebalance events: partitions assigned, revoked and lost, and the tasks
// they open (restoring their stores) and close.

// handleEvents applies partition changes, as ownership decides: new tasks
// open and restore at once; revoked and lost tasks are marked closing and
// close after the transaction ends (it aborts: the session saw the
// rebalance), and those assigned again whose partition another member may
// have owned meanwhile open again after that, restoring what it wrote.
// mustAbort reports a revocation. The tasks must be idle (pipeline.go).
func (m *member) handleEvents(ctx context.Context, evs []event) (mustAbort bool, err error) {
	if len(evs) == 0 {
		return false, nil
	}
	for _, e := range evs {
		if e.savepoint {
			continue // it only woke the loop (savepoint_member.go)
		}
		if e.standby != nil {
			m.wantStandby = e.standby
			m.syncStandbys()
			continue
		}
		// Bounded runs: between a revocation and the next assignment
		// the member holds no task but is not done (bounded.go).
		m.assignedLast = e.assigned
		if e.assigned {
			m.a.stats.Rebalances.Add(1)
			m.a.log.Info("partitions assigned", "generation", e.gen, "standby", len(m.wantStandby), "tasks", m.taskList(e.parts))
		}
		if !e.assigned {
			// Polled records of the partitions may be in the open
			// transaction: it must not commit their offsets.
			mustAbort = mustAbort || len(e.parts) > 0
		}
		for topic, ps := range e.parts {
			sub, ok := m.a.subOf[topic]
			if !ok {
				continue
			}
			for _, p := range ps {
				id := task.ID{Sub: sub, Partition: p}
				switch {
				case e.lost:
					if m.own.lose(id) {
						if err := m.suspend(id); err != nil {
							return mustAbort, err
						}
					}
					continue
				case !e.assigned:
					if m.own.revoke(id) {
						if err := m.suspend(id); err != nil {
							return mustAbort, err
						}
					}
					continue
				}
				if p >= m.a.partitions[sub] && !m.a.growable(sub) {
					// The input grew while running (the group's
					// leader saw it): stop before a key meets a
					// task without its state.
					return mustAbort, fatalError{fmt.Errorf("%w: %s now has partition %d, but sub-topology %d keeps state or repartitions and has %d partitions; "+
						"restore the partition count, or reset the application (sluice reset) to rebuild its state at the new count",
						ErrRepartitioned, topic, p, sub, m.a.partitions[sub])}
				}
				if !m.own.assign(id, e.gen) {
					if m.own.isClosing(id) {
						// To be reopened: whatever this
						// transaction did with it must not
						// commit.
						mustAbort = true
					} else if err := m.resume(id); err != nil {
						return mustAbort, err
					}
					continue
				}
				if err := m.openTask(ctx, id, e.gen); err != nil {
					return mustAbort, err
				}
			}
		}
		if e.assigned {
			// In the group once its assignment's tasks are open: the
			// generation is known from the join, before the assignment
			// arrives (franz-go calls OnPartitionsAssigned for every
			// generation, an empty assignment included).
			m.a.status.setJoined(true)
		}
	}
	m.a.stats.Tasks.Store(int64(len(m.tasks)))
	return mustAbort, nil
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
func (m *member) closeRevoked(ctx context.Context) error {
	closing, reopen := m.own.closed()
	for _, id := range closing {
		if t := m.tasks[id]; t != nil {
			m.closeTasks([]*task.Task{t})
		}
	}
	m.a.stats.Tasks.Store(int64(len(m.tasks)))
	if len(closing) > 0 {
		m.syncStandbys()
	}
	for _, id := range slices.SortedFunc(maps.Keys(reopen), cmpTaskID) {
		m.a.log.Info("task reopens: another instance may have owned its partitions meanwhile", "task", id.String())
		if err := m.openTask(ctx, id, reopen[id]); err != nil {
			return err
		}
	}
	m.a.stats.Tasks.Store(int64(len(m.tasks)))
	return nil
}

// taskList names the tasks of an assignment's partitions, sorted, for
// the log: "0_1,1_0".
func (m *member) taskList(parts map[string][]int32) string {
	var ids []task.ID
	for topic, ps := range parts {
		if sub, ok := m.a.subOf[topic]; ok {
			for _, p := range ps {
				ids = append(ids, task.ID{Sub: sub, Partition: p})
			}
		}
	}
	slices.SortFunc(ids, cmpTaskID)
	ids = slices.Compact(ids)
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = id.String()
	}
	return strings.Join(s, ",")
}

func cmpTaskID(a, b task.ID) int {
	if a.Sub != b.Sub {
		return a.Sub - b.Sub
	}
	return int(a.Partition) - int(b.Partition)
}

func (m *member) openTask(ctx context.Context, id task.ID, gen int32) error {
	// A standby copy of the task closes first: its directories are the
	// task's, and the restore below replays only the tail past its
	// checkpoint.
	m.standby.release(id)
	// A start from a savepoint: copies the seed wrote verbatim are taken
	// in whole, and the restore below reads only past them.
	takenIn := m.a.takeIn(ctx, m.adm, id)
	sub := m.a.plan.Subs[id.Sub]
	t, err := task.New(id, sub, m.a.plan, task.Config{
		AppID: m.a.cfg.appID, StateDir: m.a.dir, Send: m.send,
		Errors: m.a.cfg.errors, DeadLetter: m.a.deadLetterTopic(), MaxRecordBytes: m.a.cfg.maxRecordBytes,
		InternalPartitions: m.a.internalPartitions, IdleTimeout: m.a.cfg.idleTimeout, FoldUpdates: m.a.cfg.foldUpdates,
		Pebble: m.a.mem.pebble, ReadCache: m.a.mem.readCache,
		OnLate:          func() { m.a.stats.Late.Add(1) },
		OnIgnoredDelete: func() { m.a.stats.IgnoredDeletes.Add(1) },
		Globals:         m.a.globals,
		OnAction: func(ec exec.ErrorContext, act exec.Action) {
			m.a.stats.addFailure(FailureKey{topology.ErrorClass(ec.Class), topology.Action(act)})
			m.a.log.Warn("record failed", "class", string(ec.Class), "action", act.String(), "node", ec.Node,
				"topic", ec.Topic, "partition", ec.Partition, "offset", ec.Offset, "err", ec.Err)
		},
	})
	if err != nil {
		return openFailed(id, err)
	}
	start := time.Now()
	if err := t.Transition(task.Restoring); err != nil {
		t.Close()
		return fatalError{err}
	}
	m.a.status.set(id, TaskStatus{ID: id.String(), State: stateOf(t), Stores: t.Stores(), Since: start})
	// Queries see the task from now on: 503 while it restores, or its
	// engines as they are if the caller accepts stale reads.
	m.a.queries.opened(t)
	opened := false
	defer func() {
		if !opened {
			m.a.queries.closed(id)
		}
	}()
	total := takenIn
	for _, name := range t.Stores() {
		topic, src := names.Changelog(m.a.cfg.appID, name), (*sourceChangelog)(nil)
		if spec := m.a.plan.Stores[name]; spec.Source != "" {
			topic, src = spec.Source, &sourceChangelog{group: m.a.cfg.appID, accepts: spec.SourceAccepts}
		}
		prog := &restoreProgress{task: id.String(), store: name, log: m.a.log, report: func(restored, remaining int64) {
			m.a.status.restoring(id, total+restored, remaining)
		}}
		n, err := restore(ctx, m.adm, m.a.cfg.kgoOpts, topic, id.Partition, t.Engine(name), 2*m.a.cfg.txnTimeout, src, prog)
		if err != nil {
			t.Close()
			m.a.status.remove(id)
			return fmt.Errorf("processor: task %s: %w", id, err)
		}
		total += n
	}
	m.a.stats.Restored.Add(total)
	if err := t.Init(); err != nil {
		t.Close()
		return fatalError{err}
	}
	// Invariant 7: what earlier owners left prepared in the task's
	// external sinks is resolved before it processes (external.go).
	if err := m.ext().open(ctx, t); err != nil {
		m.ext().close(id)
		t.Close()
		m.a.status.remove(id)
		return err
	}
	// Anchor wall-clock schedules at the time the task opened.
	if err := t.Tick(time.Now().UnixMilli()); err != nil {
		t.Close()
		return fatalError{err}
	}
	if err := t.Transition(task.Running); err != nil {
		t.Close()
		return fatalError{err}
	}
	m.tasks[id] = t
	m.own.opened(id, gen)
	opened = true
	m.a.local.setActive(id, m.a.standbyEngines(t))
	m.a.queries.restored(id)
	m.a.status.set(id, TaskStatus{ID: id.String(), State: stateOf(t), Stores: t.Stores(), Restored: total, Since: time.Now()})
	m.a.log.Info("task opened", "task", id.String(), "restored", total, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (m *member) allTasks() []*task.Task {
	ts := make([]*task.Task, 0, len(m.tasks))
	for _, t := range m.tasks {
		ts = append(ts, t)
	}
	return ts
}

func (m *member) closeTasks(ts []*task.Task) {
	for _, t := range ts {
		m.a.queries.closed(t.ID()) // before Close: see queries
		m.ext().close(t.ID())      // its sink writers stop before its partitions move
		m.a.closingLocal(t)
		if err := t.Close(); err != nil {
			m.a.log.Warn("close task", "task", t.ID().String(), "err", err)
		}
		delete(m.tasks, t.ID())
		m.own.forget(t.ID())
		m.a.status.remove(t.ID())
		m.a.log.Info("task closed", "task", t.ID().String())
	}
}
