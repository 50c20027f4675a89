package processor

import (
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

// TaskState is where a task is in its lifecycle: for an active task, the
// name of its state in the task lifecycle (DESIGN.md, "Task lifecycle");
// /tasks shows the active tasks that are restoring or running (a
// suspended one shows running until it closes) and the standby copies.
type TaskState string

const (
	TaskRestoring TaskState = "restoring" // the lifecycle's restoring
	TaskRunning   TaskState = "running"   // the lifecycle's running
	// TaskStandby is a standby copy of another instance's task: its
	// stores follow the changelogs (standby.go); it processes nothing.
	// It is not a state of the task lifecycle: a standby is a copy of a
	// task's stores, not a task (Kafka Streams' StandbyTask).
	TaskStandby TaskState = "standby"
)

// TaskStatus describes one task of the instance.
type TaskStatus struct {
	ID       string    `json:"id"`
	State    TaskState `json:"state"`
	Stores   []string  `json:"stores,omitempty"`
	Restored int64     `json:"restored"` // changelog records restored when it opened, or so far
	// RestoreRemaining is, while it restores, the offsets of the store
	// being restored that are left to read (control records included).
	RestoreRemaining int64 `json:"restore_remaining"`
	Processed        int64 `json:"processed"` // input records processed (committed or not)
	// Out counts the records its sinks produced (outputs and repartition
	// records, committed or not).
	Out   int64     `json:"out"`
	Since time.Time `json:"since"` // when it entered its state
	// Lag is, per input topic, the records of the task's partition past
	// the last one it fetched, as of that fetch (control records
	// included, so a caught-up transactional input may show 1).
	Lag map[string]int64 `json:"lag,omitempty"`
	// StoreStats are the stores' read counters as of the last commit.
	StoreStats []StoreStatus `json:"store_stats,omitempty"`
	// Checkpoints are, for a standby task, the changelog offset each
	// store's copy reflects; Restored then counts the changelog records
	// it applied, and Lag the offsets of each changelog past it.
	Checkpoints map[string]int64 `json:"checkpoints,omitempty"`

	engines []store.Engine // for sizes, read when asked
}

// StoreStatus describes one store of a task.
type StoreStatus struct {
	Name string `json:"name"`
	// Gets counts reads; CacheHits those answered by the stage's write
	// or read cache without reading the engine.
	Gets      int64 `json:"gets"`
	CacheHits int64 `json:"cache_hits"`
	// Bytes is the engine's approximate size on disk.
	Bytes int64 `json:"bytes"`
	// MemoryBytes is what the store's stage holds in memory, as
	// state.memory.budget counts it (store.Staged.Bytes): the open
	// transaction's writes, committed values cached for reads, and what
	// operators keep about the store (a stream join's index of its keys,
	// which past its bound gives up segments and slows the join).
	MemoryBytes int64 `json:"memory_bytes"`
}

// Status is a snapshot of the instance, for health checks and operators.
type Status struct {
	// Ready is true while the instance is in its group, with its
	// assignment received, and not restoring: every task it owns is
	// restored and processing.
	Ready bool         `json:"ready"`
	Tasks []TaskStatus `json:"tasks"`
}

// status is written by the loop goroutine and read by HTTP handlers.
type status struct {
	mu     sync.Mutex
	joined bool
	tasks  map[task.ID]*TaskStatus
}

func (s *status) set(id task.ID, st TaskStatus) {
	s.mu.Lock()
	if s.tasks == nil {
		s.tasks = map[task.ID]*TaskStatus{}
	}
	s.tasks[id] = &st
	s.mu.Unlock()
}

func (s *status) remove(id task.ID) {
	s.mu.Lock()
	delete(s.tasks, id)
	s.mu.Unlock()
}

// removeIf removes id's status if it is in state st: a standby closing
// must not remove the status of the active task that replaced it.
func (s *status) removeIf(id task.ID, st TaskState) {
	s.mu.Lock()
	if t := s.tasks[id]; t != nil && t.State == st {
		delete(s.tasks, id)
	}
	s.mu.Unlock()
}

func (s *status) isJoined() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.joined
}

func (s *status) setJoined(j bool) {
	s.mu.Lock()
	s.joined = j
	s.mu.Unlock()
}

// processed refreshes the tasks' counters (loop only).
func (s *status) processed(ts map[task.ID]*task.Task) {
	s.mu.Lock()
	for id, t := range ts {
		st := s.tasks[id]
		if st == nil {
			continue
		}
		st.Processed, st.Out = t.Processed(), t.Out()
		st.StoreStats = st.StoreStats[:0]
		st.engines = st.engines[:0]
		for _, name := range t.Stores() {
			stage := t.Store(name)
			ss := stage.Stats()
			st.StoreStats = append(st.StoreStats, StoreStatus{Name: name, Gets: ss.Gets, CacheHits: ss.StageHits, MemoryBytes: int64(stage.Bytes())})
			st.engines = append(st.engines, t.Engine(name))
		}
	}
	s.mu.Unlock()
}

// restoring records a restore's progress (loop only).
func (s *status) restoring(id task.ID, restored, remaining int64) {
	s.mu.Lock()
	if st := s.tasks[id]; st != nil {
		st.Restored, st.RestoreRemaining = restored, remaining
	}
	s.mu.Unlock()
}

// setLag records the lag of a task's input partition (loop only).
func (s *status) setLag(id task.ID, topic string, lag int64) {
	s.mu.Lock()
	if st := s.tasks[id]; st != nil {
		if st.Lag == nil {
			st.Lag = map[string]int64{}
		}
		st.Lag[topic] = max(lag, 0)
	}
	s.mu.Unlock()
}

// Status returns a snapshot of the instance's tasks and readiness.
func (a *App) Status() Status {
	s := &a.status
	s.mu.Lock()
	out := Status{Ready: s.joined}
	for _, t := range s.tasks {
		c := *t
		c.Stores = append([]string(nil), t.Stores...)
		c.Lag = maps.Clone(t.Lag)
		c.Checkpoints = maps.Clone(t.Checkpoints)
		c.StoreStats = append([]StoreStatus(nil), t.StoreStats...)
		c.engines = slices.Clone(t.engines)
		out.Tasks = append(out.Tasks, c)
		if t.State != TaskRunning && t.State != TaskStandby {
			out.Ready = false
		}
	}
	s.mu.Unlock()
	// Sizes are read outside the lock: Pebble's metrics are not free, and
	// the loop, which updates the status after every fetch, must not wait
	// on a scrape. A closed engine answers 0, so a task closing meanwhile
	// is harmless.
	for i := range out.Tasks {
		c := &out.Tasks[i]
		for j, e := range c.engines {
			c.StoreStats[j].Bytes = e.ApproximateSize()
		}
		c.engines = nil
	}
	sort.Slice(out.Tasks, func(i, j int) bool { return out.Tasks[i].ID < out.Tasks[j].ID })
	return out
}
