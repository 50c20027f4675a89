package processor

import (
	"sort"
	"sync"
	"time"

	"github.com/sluice-streams/sluice/internal/task"
)

// TaskState is where a task is in its lifecycle.
type TaskState string

const (
	TaskRestoring TaskState = "restoring"
	TaskRunning   TaskState = "running"
)

// TaskStatus describes one task of the instance.
type TaskStatus struct {
	ID        string    `json:"id"`
	State     TaskState `json:"state"`
	Stores    []string  `json:"stores,omitempty"`
	Restored  int64     `json:"restored"`  // changelog records restored when it opened
	Processed int64     `json:"processed"` // input records processed (committed or not)
	Since     time.Time `json:"since"`     // when it entered its state
}

// Status is a snapshot of the instance, for health checks and operators.
type Status struct {
	// Ready is true while the instance is in its group and not restoring:
	// every task it owns is restored and processing.
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

func (s *status) setJoined(j bool) {
	s.mu.Lock()
	s.joined = j
	s.mu.Unlock()
}

// processed refreshes the processed counts from the tasks (loop only).
func (s *status) processed(ts map[task.ID]*task.Task) {
	s.mu.Lock()
	for id, t := range ts {
		if st := s.tasks[id]; st != nil {
			st.Processed = t.Processed()
		}
	}
	s.mu.Unlock()
}

// Status returns a snapshot of the instance's tasks and readiness.
func (a *App) Status() Status {
	s := &a.status
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Status{Ready: s.joined}
	for _, t := range s.tasks {
		c := *t
		c.Stores = append([]string(nil), t.Stores...)
		out.Tasks = append(out.Tasks, c)
		if t.State != TaskRunning {
			out.Ready = false
		}
	}
	sort.Slice(out.Tasks, func(i, j int) bool { return out.Tasks[i].ID < out.Tasks[j].ID })
	return out
}
