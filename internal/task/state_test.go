package task

import (
	"errors"
	"fmt"
	"testing"
)

// TestStateTransitions checks every pair of states against the lifecycle
// table (state.go, DESIGN.md "Task lifecycle"): a legal move happens, an
// illegal one returns ErrIllegalTransition and leaves the task where it was.
func TestStateTransitions(t *testing.T) {
	all := []State{Created, Restoring, Running, Suspended, Closed}
	legalMoves := map[[2]State]bool{
		{Created, Restoring}: true,
		{Created, Running}:   true,
		{Created, Closed}:    true,
		{Restoring, Running}: true,
		{Restoring, Closed}:  true,
		{Running, Suspended}: true,
		{Running, Closed}:    true,
		{Suspended, Running}: true,
		{Suspended, Closed}:  true,
	}
	for _, from := range all {
		for _, to := range all {
			want := legalMoves[[2]State{from, to}]
			t.Run(fmt.Sprintf("%s_to_%s", from, to), func(t *testing.T) {
				if got := CanTransition(from, to); got != want {
					t.Fatalf("CanTransition = %t, want %t", got, want)
				}
				tk := &Task{id: ID{Sub: 1, Partition: 2}, state: from}
				err := tk.Transition(to)
				switch {
				case want && err != nil:
					t.Fatalf("legal move refused: %v", err)
				case want && tk.State() != to:
					t.Fatalf("state %s after the move, want %s", tk.State(), to)
				case !want && !errors.Is(err, ErrIllegalTransition):
					t.Fatalf("illegal move: err %v, want ErrIllegalTransition", err)
				case !want && tk.State() != from:
					t.Fatalf("state %s after a refused move, want %s unchanged", tk.State(), from)
				}
			})
		}
	}
	// A state outside the table moves nowhere and names itself.
	if CanTransition(State(9), Closed) || State(9).String() != "State(9)" {
		t.Errorf("State(9): CanTransition %t, String %q", CanTransition(State(9), Closed), State(9))
	}
}

// TestStateNames pins the names: /tasks and DESIGN.md show them.
func TestStateNames(t *testing.T) {
	for s, want := range map[State]string{Created: "created", Restoring: "restoring", Running: "running", Suspended: "suspended", Closed: "closed"} {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", s, s, want)
		}
	}
}

// TestNewTaskIsCreatedAndCloseCloses: New starts a task in created, Close
// ends it in closed from wherever it is.
func TestNewTaskIsCreatedAndCloseCloses(t *testing.T) {
	for _, through := range [][]State{nil, {Restoring}, {Running}, {Restoring, Running, Suspended}, {Running, Suspended, Running}} {
		tk := newCountTask(t)
		if tk.State() != Created {
			t.Fatalf("new task in %s, want created", tk.State())
		}
		for _, s := range through {
			if err := tk.Transition(s); err != nil {
				t.Fatal(err)
			}
		}
		if err := tk.Close(); err != nil {
			t.Fatal(err)
		}
		if tk.State() != Closed {
			t.Fatalf("after %v and Close: %s, want closed", through, tk.State())
		}
		if err := tk.Transition(Created); !errors.Is(err, ErrIllegalTransition) {
			t.Fatalf("closed task reopened: %v", err)
		}
	}
}

// newCountTask opens, without initialising, the stateful task of the word
// count.
func newCountTask(tb testing.TB) *Task {
	tb.Helper()
	p := plan(tb, wordCount())
	tk, err := New(ID{1, 0}, p.Subs[1], p, Config{AppID: "state", StateDir: tb.TempDir(), Send: (&discard{}).send})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tk.Close() })
	return tk
}
