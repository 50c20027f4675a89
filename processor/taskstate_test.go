package processor

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestTaskStatesAreTheLifecycles: the /tasks names of active tasks are the
// task lifecycle's; standby is not one of its states.
func TestTaskStatesAreTheLifecycles(t *testing.T) {
	if TaskRestoring != TaskState(task.Restoring.String()) || TaskRunning != TaskState(task.Running.String()) {
		t.Errorf("/tasks names %q, %q; lifecycle %q, %q", TaskRestoring, TaskRunning, task.Restoring, task.Running)
	}
	for s := task.Created; s <= task.Closed; s++ {
		if TaskState(s.String()) == TaskStandby {
			t.Errorf("lifecycle state %d is named %q, which /tasks uses for standby copies", s, s)
		}
	}
}

// TestMemberSuspendsAndResumes: a revoked (or lost) task is suspended once,
// however many events say so; kept by ownership it runs again; and a move
// the lifecycle forbids is a fatal error, not a panic.
func TestMemberSuspendsAndResumes(t *testing.T) {
	top := topology.New()
	topology.Count(topology.GroupByKey(topology.From(top, "in", serde.String, serde.String)),
		topology.Materialized("counts", serde.String, serde.Int64))
	built, err := top.Build()
	if err != nil {
		t.Fatal(err)
	}
	plan := exec.BuiltPlan(built)
	id := task.ID{Sub: 0, Partition: 0}
	tk, err := task.New(id, plan.Subs[0], plan, task.Config{
		AppID: "ts", StateDir: t.TempDir(), Send: func(*kgo.Record, func(*kgo.Record, error)) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	m := &member{tasks: map[task.ID]*task.Task{id: tk}}
	for _, s := range []task.State{task.Restoring, task.Running} {
		if err := tk.Transition(s); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func(task.ID) error
		want task.State
	}{
		{"revoked", m.suspend, task.Suspended},
		{"then lost", m.suspend, task.Suspended},
		{"kept", m.resume, task.Running},
		{"the same assignment again", m.resume, task.Running},
		{"revoked again", m.suspend, task.Suspended},
		{"kept again", m.resume, task.Running},
	}
	for _, s := range steps {
		if err := s.do(id); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := tk.State(); got != s.want {
			t.Fatalf("%s: %s, want %s", s.name, got, s.want)
		}
	}
	// A task not open here is not moved.
	if err := m.suspend(task.ID{Sub: 0, Partition: 9}); err != nil {
		t.Fatal(err)
	}
	// Closed, it can be suspended no more: a bug in the member, fatal.
	if err := tk.Close(); err != nil {
		t.Fatal(err)
	}
	err = m.suspend(id)
	var fatal fatalError
	if !errors.Is(err, task.ErrIllegalTransition) || !errors.As(err, &fatal) {
		t.Fatalf("suspending a closed task: %v, want a fatal ErrIllegalTransition", err)
	}
	if tk.State() != task.Closed {
		t.Fatalf("a refused move changed the state to %s", tk.State())
	}
}
