package task

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
)

// Folding table updates (Config.FoldUpdates), Kafka Streams' record cache
// on the forwarding side: a node whose forwards are the updates of a table
// (exec.Node.FoldKey) holds them back, one per key, and forwards them at the
// task's flush, each as a unit of its own. The held update of a key carries
// the old value of the first update since the last flush and the rest of the
// last one (new value, timestamp, headers), so downstream sees the same
// change it would have seen in steps, in one.
//
// Held updates follow the stage of the stores: what a record unit holds
// joins the fold only when the unit is released, a rolled-back unit's
// updates are dropped with its writes, and an abort drops them all.

// fold is one folding node's held updates, in the order their keys were
// first updated since the last flush (the order they are forwarded in).
type fold struct {
	index   map[string]int // key bytes → updates
	updates []heldUpdate
}

type heldUpdate struct {
	r   exec.Record // the last update, its Value an exec.Change
	old any         // the old value of the first update (nil: absent)
}

// unitUpdate is an update forwarded by the unit being processed; its key
// bytes are unitKeys[from:to].
type unitUpdate struct {
	n        *nodeInst
	r        exec.Record
	from, to int
}

// hold takes an update forwarded by a folding node. Its key is encoded
// here, so that a key that fails to encode fails the unit.
func (t *Task) hold(n *nodeInst, r exec.Record) error {
	if _, ok := r.Value.(exec.Change); !ok {
		return fmt.Errorf("processor: %s folds table updates, but forwarded a %T", n.node.Name, r.Value)
	}
	from := len(t.unitKeys)
	kb, err := n.node.FoldKey(t.unitKeys, r.Key)
	if err != nil {
		return fmt.Errorf("processor: %s: fold key: %w", n.node.Name, err)
	}
	t.unitKeys = kb
	if !t.buffering {
		n.fold.add(kb[from:], r)
		t.unitKeys = t.unitKeys[:from]
		return nil
	}
	t.unitUpdates = append(t.unitUpdates, unitUpdate{n: n, r: r, from: from, to: len(kb)})
	return nil
}

// add folds r, an update of the key kb, into the updates held for it.
func (f *fold) add(kb []byte, r exec.Record) {
	if i, ok := f.index[string(kb)]; ok {
		f.updates[i].r = r
		return
	}
	if f.index == nil {
		f.index = map[string]int{}
	}
	f.index[string(kb)] = len(f.updates)
	f.updates = append(f.updates, heldUpdate{r: r, old: r.Value.(exec.Change).Old})
}

// keepUnitUpdates folds the released unit's updates in.
func (t *Task) keepUnitUpdates() {
	for _, u := range t.unitUpdates {
		u.n.fold.add(t.unitKeys[u.from:u.to], u.r)
	}
	t.dropUnitUpdates()
}

// dropUnitUpdates forgets the unit's updates: kept or rolled back.
func (t *Task) dropUnitUpdates() {
	clear(t.unitUpdates)
	t.unitUpdates, t.unitKeys = t.unitUpdates[:0], t.unitKeys[:0]
}

// flushFolds forwards every held update, the folding nodes in topological
// order so that one folding downstream of another sees its updates before
// it flushes itself. Each update is a unit: if it fails, the error policy
// decides, as for a listener's result.
func (t *Task) flushFolds() error {
	t.cur = recordMeta{} // no input record is being processed
	for _, n := range t.folders {
		f := n.fold
		for i := range f.updates {
			u := &f.updates[i]
			r := u.r
			r.Value = exec.Change{Old: u.old, New: r.Value.(exec.Change).New}
			if err := t.fire(n, r.Timestamp, func() error { return n.forward(r) }); err != nil {
				f.drop()
				return err
			}
		}
		f.drop()
	}
	return nil
}

// dropFolds forgets every held update: the transaction aborted.
func (t *Task) dropFolds() {
	t.dropUnitUpdates()
	for _, n := range t.folders {
		n.fold.drop()
	}
}

func (f *fold) drop() {
	clear(f.index)
	clear(f.updates)
	f.updates = f.updates[:0]
}
