package task

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/store"
)

// Folding table updates (Config.FoldUpdates), Kafka Streams' record cache
// on the forwarding side: a node whose forwards are the updates of a table
// (exec.Node.FoldStore) holds them back, one per key, and forwards them at the
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
// A key is told apart by the position of its entry in the store the node
// writes it to right before it forwards (exec.Node.FoldStore): that saves
// a map of keys of its own, the cost of which is a cache miss per record.
type fold struct {
	store   *store.Staged
	slot    []int32 // entry position → 1 + index in updates; 0: none
	updates []heldUpdate
}

type heldUpdate struct {
	r   exec.Record // the last update, its Value an exec.Change
	old any         // the old value of the first update (nil: absent)
	pos int         // the key's entry in store
}

// unitUpdate is an update forwarded by the unit being processed, of the
// key at pos.
type unitUpdate struct {
	n   *nodeInst
	r   exec.Record
	pos int
}

// hold takes an update forwarded by a folding node.
func (t *Task) hold(n *nodeInst, r exec.Record) error {
	if _, ok := r.Value.(exec.Change); !ok {
		return fmt.Errorf("processor: %s folds table updates, but forwarded a %T", n.node.Name, r.Value)
	}
	pos := n.fold.store.Last()
	if !t.buffering {
		n.fold.add(pos, r)
		return nil
	}
	t.unitUpdates = append(t.unitUpdates, unitUpdate{n: n, r: r, pos: pos})
	return nil
}

// add folds r, an update of the key at pos, into the update held for it.
func (f *fold) add(pos int, r exec.Record) {
	if pos >= len(f.slot) {
		f.slot = append(f.slot, make([]int32, pos+1-len(f.slot))...)
	}
	if i := f.slot[pos]; i > 0 {
		f.updates[i-1].r = r
		return
	}
	f.updates = append(f.updates, heldUpdate{r: r, old: r.Value.(exec.Change).Old, pos: pos})
	f.slot[pos] = int32(len(f.updates))
}

// keepUnitUpdates folds the released unit's updates in.
func (t *Task) keepUnitUpdates() {
	for _, u := range t.unitUpdates {
		u.n.fold.add(u.pos, u.r)
	}
	t.dropUnitUpdates()
}

// dropUnitUpdates forgets the unit's updates: kept or rolled back.
func (t *Task) dropUnitUpdates() {
	clear(t.unitUpdates)
	t.unitUpdates = t.unitUpdates[:0]
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
			ch := exec.Change{Old: u.old, New: r.Value.(exec.Change).New}
			if ch.Old == nil && ch.New == nil {
				continue // added and deleted since the last flush: no change
			}
			r.Value = ch
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
	for _, u := range f.updates {
		f.slot[u.pos] = 0
	}
	clear(f.updates)
	f.updates = f.updates[:0]
}
