package task

import (
	"errors"
	"fmt"
)

// State is where a task is in its lifecycle: Kafka Streams' Task.State,
// with the states sluice has. The driver moves a task with Transition,
// which refuses a move the table below does not allow; the names (String)
// are the ones DESIGN.md ("Task lifecycle") and the processor's /tasks
// status use.
//
//	from       to         when
//	created    restoring  the driver restores its stores from their changelogs
//	created    running    nothing to restore (the test driver has no changelogs)
//	created    closed     it failed to open
//	restoring  running    restored and initialised: it processes records
//	restoring  closed     the restore failed
//	running    suspended  its partitions were revoked or lost: it closes once
//	                      the open transaction ends (which aborts)
//	running    closed     the session ends
//	suspended  running    assigned again in the generation right after the one
//	                      it was held in, before the transaction ended (resumed)
//	suspended  closed     the transaction ended; a task assigned again that
//	                      another member may have owned meanwhile opens anew
//	                      as a new task (created), restoring what it wrote
//
// A closed task is never reopened: the driver creates a new one.
type State uint8

const (
	// Created: New opened its stores; nothing is restored or initialised.
	Created State = iota
	// Restoring: its stores catch up with their changelogs.
	Restoring
	// Running: initialised, processing records.
	Running
	// Suspended: its partitions are gone; it closes, or resumes, once
	// the open transaction ends.
	Suspended
	// Closed: its operators and engines are closed.
	Closed
)

var stateNames = [...]string{Created: "created", Restoring: "restoring", Running: "running", Suspended: "suspended", Closed: "closed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// legal is the table above: legal[from] lists the states from may move to.
var legal = [...][]State{
	Created:   {Restoring, Running, Closed},
	Restoring: {Running, Closed},
	Running:   {Suspended, Closed},
	Suspended: {Running, Closed},
	Closed:    nil,
}

// CanTransition reports whether a task may move from from to to.
func CanTransition(from, to State) bool {
	if int(from) >= len(legal) {
		return false
	}
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

// ErrIllegalTransition is matched by the error of a transition the task's
// lifecycle does not allow: a bug in the driver.
var ErrIllegalTransition = errors.New("task: illegal state transition")

// State returns where the task is in its lifecycle.
func (t *Task) State() State { return t.state }

// Transition moves the task to state to, or returns an error wrapping
// ErrIllegalTransition and leaves it where it is.
func (t *Task) Transition(to State) error {
	if !CanTransition(t.state, to) {
		return fmt.Errorf("%w: task %s from %s to %s", ErrIllegalTransition, t.id, t.state, to)
	}
	t.state = to
	return nil
}
