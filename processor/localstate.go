package processor

import (
	"os"
	"sync"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

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
				eng, err := store.OpenPebbleWith(dir, a.mem.pebble)
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
