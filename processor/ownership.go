package processor

import (
	"maps"
	"slices"

	"github.com/sluice-streams/sluice/internal/task"
)

// ownership decides, from the partition changes the group reports, which
// tasks the loop opens, keeps and closes. It does no I/O, so that the rule
// can be checked against a model over every short sequence of events
// (ownership_test.go); handleEvents and closeRevoked carry its decisions out.
//
// The rule (DESIGN.md, "Task lifecycle"): a task's engines may be kept only
// while nobody else can have owned its partition. Between two assignments of
// consecutive generations nobody did: each generation gives a partition to
// one member, and the previous owner (this one) is fenced by the generation
// from committing after it. So a task that was revoked, or simply assigned
// again, keeps its engines if the new assignment's generation is the next
// one after the generation it holds. Otherwise — a generation went by in
// between (this member's join was slow), or the partitions were lost (the
// coordinator expired this member: any number of generations may have gone
// by) — another member may have committed to its changelogs and input
// offsets, so the task is closed once the open transaction ended and opened
// again, which restores the tail another member wrote.
type ownership struct {
	// held maps each open task to the generation of the assignment it
	// was opened or last kept in.
	held map[task.ID]int32
	// closing maps each open task that closes once the open transaction
	// ends to whether it was lost (then it can never be kept).
	closing map[task.ID]bool
	// reopen maps closing tasks that were assigned again to the
	// generation they open in once closed.
	reopen map[task.ID]int32
}

func newOwnership() ownership {
	return ownership{held: map[task.ID]int32{}, closing: map[task.ID]bool{}, reopen: map[task.ID]int32{}}
}

// assign reports the task's partition assigned in generation gen. open
// reports that the task must be opened now: it is not open here.
func (o *ownership) assign(id task.ID, gen int32) (open bool) {
	had, ok := o.held[id]
	if !ok {
		return true
	}
	lost, closing := o.closing[id]
	if !lost && (gen == had+1 || gen == had && !closing) {
		// Nobody else can have owned it since (gen == had: the same
		// assignment reported again): keep the task and its engines;
		// a revoke before is undone.
		delete(o.closing, id)
		delete(o.reopen, id)
		o.held[id] = gen
		return false
	}
	// Another member may have moved it on: close it after the
	// transaction, then restore it.
	if _, ok := o.closing[id]; !ok {
		o.closing[id] = false
	}
	o.reopen[id] = gen
	return false
}

// opened records that the task opened in generation gen.
func (o *ownership) opened(id task.ID, gen int32) { o.held[id] = gen }

// revoke reports the task's partition revoked; closing reports that the
// task is open here (and now closes after the transaction ends, unless it
// is assigned again in the next generation first).
func (o *ownership) revoke(id task.ID) (closing bool) {
	if _, ok := o.held[id]; !ok {
		return false
	}
	delete(o.reopen, id)
	if _, ok := o.closing[id]; !ok {
		o.closing[id] = false
	}
	return true
}

// lose reports the task's partition lost: the task always closes.
func (o *ownership) lose(id task.ID) (closing bool) {
	if _, ok := o.held[id]; !ok {
		return false
	}
	delete(o.reopen, id)
	o.closing[id] = true
	return true
}

// isClosing reports whether the task closes once the open transaction ends.
func (o *ownership) isClosing(id task.ID) bool {
	_, ok := o.closing[id]
	return ok
}

// closed takes the closing tasks, after the transaction they took part in
// ended: the caller closes them, then opens reopen, each in its generation.
func (o *ownership) closed() (closing []task.ID, reopen map[task.ID]int32) {
	closing = slices.Collect(maps.Keys(o.closing))
	for _, id := range closing {
		delete(o.held, id)
	}
	reopen = o.reopen
	o.closing, o.reopen = map[task.ID]bool{}, map[task.ID]int32{}
	return closing, reopen
}

// forget drops a task that closed (or failed to open) outside the
// sequence above.
func (o *ownership) forget(id task.ID) {
	delete(o.held, id)
	delete(o.closing, id)
	delete(o.reopen, id)
}
