package processor

import "github.com/sluice-streams/sluice/internal/task"

// The member moves its tasks through their lifecycle (task.State; DESIGN.md,
// "Task lifecycle"): openTask from created through restoring to running,
// handleEvents to suspended when their partitions are revoked or lost and
// back to running when ownership keeps them, closeTasks to closed. A move
// the lifecycle does not allow is a bug: fatal.

// stateOf is the /tasks state of an active task: its lifecycle state's name.
func stateOf(t *task.Task) TaskState { return TaskState(t.State().String()) }

// suspend moves the open task id to suspended once its partitions were
// revoked or lost: it closes, or resumes, once the open transaction ends.
// Revoked and then lost, it is suspended once.
func (m *member) suspend(id task.ID) error {
	t := m.tasks[id]
	if t == nil || t.State() == task.Suspended {
		return nil
	}
	if err := t.Transition(task.Suspended); err != nil {
		return fatalError{err}
	}
	return nil
}

// resume moves the task id back to running when ownership keeps it: it was
// assigned again in the generation right after the one it was held in. A
// task that was not suspended (the same assignment reported again) stays.
func (m *member) resume(id task.ID) error {
	t := m.tasks[id]
	if t == nil || t.State() != task.Suspended {
		return nil
	}
	if err := t.Transition(task.Running); err != nil {
		return fatalError{err}
	}
	return nil
}
