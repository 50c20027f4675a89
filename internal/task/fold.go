package task

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/store"
)

// Folding table updates (Config.FoldUpdates), Kafka Streams' record cache
// on the forwarding side: a node whose forwards are the updates of a table
// (exec.Node.FoldStore) is told to fold (exec.Context.Folding). It then
// writes each update to its store with store.Staged.PutHeld instead of
// forwarding it, and at the task's flush the task hands it each key's held
// update to forward (exec.Unfolder), each as a unit of its own: the key's
// value before its first update since the last flush, its value now, and
// the timestamp and headers of its last update. So downstream sees the
// same change it would have seen in steps, in one.
//
// The held updates live in the store's stage, reached from the entries of
// the values they describe, so they cost no lookup of their own and follow
// the stage: what a unit held goes with its Rollback, and an abort drops
// them all.

// folder returns the store that ni holds its updates in, or nil if it does
// not fold: folding is off, or the plan uses event time (held updates
// would meet the watermark later than their records did), or another node
// folds by the same store first (its held updates are that node's to
// forward).
func (t *Task) folder(ni *nodeInst) *store.Staged {
	if !t.cfg.FoldUpdates || ni.node.FoldStore == "" || t.carryWM {
		return nil
	}
	s := t.stores[ni.node.FoldStore]
	for _, other := range t.folders {
		if other.fold == s {
			return nil
		}
	}
	return s
}

// flushFolds has every folding node forward its held updates, in
// topological order, so that one folding downstream of another gets its
// updates before it flushes itself. Each update is a unit: if it fails,
// the error policy decides, as for a listener's result.
func (t *Task) flushFolds() error {
	t.cur = recordMeta{} // no input record is being processed
	for _, n := range t.folders {
		u := n.proc.(exec.Unfolder)
		err := n.fold.TakeHeld(func(h store.Held) error {
			return t.fire(n, h.Timestamp, func() error { return u.Unfold(h) })
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkFolders makes sure every folding node can forward what it holds.
func (t *Task) checkFolders() error {
	for _, n := range t.folders {
		if _, ok := n.proc.(exec.Unfolder); !ok {
			return fmt.Errorf("processor: task %s: %s folds by store %q but cannot forward what it holds", t.id, n.node.Name, n.node.FoldStore)
		}
	}
	return nil
}
