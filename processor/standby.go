package processor

import (
	"errors"
	"fmt"
	"time"

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
