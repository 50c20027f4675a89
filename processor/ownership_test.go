package processor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/task"
)

// decider is the decision handleEvents and closeRevoked carry out, so that
// the model check runs against ownership and against the rule it replaced.
type decider interface {
	assign(id task.ID, gen int32) (open bool)
	opened(id task.ID, gen int32)
	revoke(id task.ID) bool
	lose(id task.ID) bool
	pending() bool // some task closes once the transaction ends
	closed() ([]task.ID, map[task.ID]int32)
}

type ownershipDecider struct{ ownership }

func (o *ownershipDecider) pending() bool { return len(o.ownership.closing) > 0 }

// oldDecider is handleEvents before issue 15: an assignment took a task
// off the closing set whatever happened in between, so a task lost and
// assigned again within one batch of events kept its stale engines.
type oldDecider struct {
	open    map[task.ID]bool
	closing map[task.ID]bool
}

func (o *oldDecider) assign(id task.ID, _ int32) bool {
	delete(o.closing, id)
	return !o.open[id]
}
func (o *oldDecider) opened(id task.ID, _ int32) { o.open[id] = true }
func (o *oldDecider) revoke(id task.ID) bool {
	if o.open[id] {
		o.closing[id] = true
	}
	return o.open[id]
}
func (o *oldDecider) lose(id task.ID) bool { return o.revoke(id) }
func (o *oldDecider) pending() bool        { return len(o.closing) > 0 }
func (o *oldDecider) closed() ([]task.ID, map[task.ID]int32) {
	ids := slices.Collect(maps.Keys(o.closing))
	for _, id := range ids {
		delete(o.open, id)
	}
	o.closing = map[task.ID]bool{}
	return ids, nil
}

type ownKind int

const (
	ownAssign ownKind = iota
	ownRevoke
	ownLost
)

// ownEv is one partition change of the group; end says the loop handles
// the batch of events up to and including it.
type ownEv struct {
	kind ownKind
	gen  int32
	ids  []task.ID
	end  bool
}

func (e ownEv) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", [...]string{"assign", "revoke", "lost"}[e.kind])
	if e.kind == ownAssign {
		fmt.Fprintf(&b, "@%d", e.gen)
	}
	fmt.Fprintf(&b, "%v", e.ids)
	if e.end {
		b.WriteString(" |")
	}
	return b.String()
}

// incarnation is one opening of a task in the simulated loop, with what
// happened to its partition while it stayed open.
type incarnation struct {
	gens []int32 // the assignments it served, in order
	lost bool    // its partition was lost while it stayed open
}

// checkOwnership runs evs through d as the loop does (events handled in
// batches; after a batch that left tasks closing, the transaction ends,
// they close and the reopened ones open) and checks the model after every
// batch:
//   - every assigned partition has an open task, and no other is open;
//   - an open task served only consecutive generations and saw no loss: no
//     other member can have owned its partition since it was restored.
func checkOwnership(d decider, evs []ownEv) error {
	open := map[task.ID]*incarnation{}
	assigned := map[task.ID]bool{} // what the group says this member owns
	for i, e := range evs {
		for _, id := range e.ids {
			switch e.kind {
			case ownAssign:
				assigned[id] = true
				if d.assign(id, e.gen) {
					open[id] = &incarnation{}
					d.opened(id, e.gen)
				}
				if inc := open[id]; inc != nil {
					inc.gens = append(inc.gens, e.gen)
				}
			case ownRevoke:
				delete(assigned, id)
				d.revoke(id)
			case ownLost:
				delete(assigned, id)
				d.lose(id)
				if inc := open[id]; inc != nil {
					inc.lost = true
				}
			}
		}
		if !e.end {
			continue
		}
		if d.pending() {
			closing, reopen := d.closed()
			for _, id := range closing {
				delete(open, id)
			}
			for id, gen := range reopen {
				open[id] = &incarnation{gens: []int32{gen}}
				d.opened(id, gen)
			}
		}
		for id := range assigned {
			if open[id] == nil {
				return fmt.Errorf("after event %d: %v assigned but not open", i, id)
			}
		}
		for id, inc := range open {
			if !assigned[id] {
				return fmt.Errorf("after event %d: %v open but not assigned", i, id)
			}
			if inc.lost {
				return fmt.Errorf("after event %d: %v kept its task through a loss of its partition", i, id)
			}
			for j := 1; j < len(inc.gens); j++ {
				if g := inc.gens[j]; g != inc.gens[j-1] && g != inc.gens[j-1]+1 {
					return fmt.Errorf("after event %d: %v kept its task from generation %d to %d: another member may have owned it in between", i, id, inc.gens[j-1], g)
				}
			}
		}
	}
	return nil
}

var ownIDs = []task.ID{{Sub: 0, Partition: 0}, {Sub: 0, Partition: 1}}

// nextOwnEvents lists the events that can follow, given what the group
// has assigned to this member and the last generation: an eager revoke or
// a loss of everything it owns, or an assignment of any subset in the next
// generation or one later (this member missed one), with or without a
// revoke before it; each ending the batch or not.
func nextOwnEvents(assigned []task.ID, gen int32) []ownEv {
	var out []ownEv
	add := func(e ownEv) {
		out = append(out, e)
		e.end = true
		out = append(out, e)
	}
	if len(assigned) > 0 {
		add(ownEv{kind: ownRevoke, gen: gen, ids: assigned})
		add(ownEv{kind: ownLost, gen: gen, ids: assigned})
	}
	for _, g := range []int32{gen + 1, gen + 2} {
		for mask := range 1 << len(ownIDs) {
			var ids []task.ID
			for i, id := range ownIDs {
				if mask&(1<<i) != 0 {
					ids = append(ids, id)
				}
			}
			add(ownEv{kind: ownAssign, gen: g, ids: ids})
		}
	}
	return out
}

func afterOwnEvent(assigned []task.ID, gen int32, e ownEv) ([]task.ID, int32) {
	switch e.kind {
	case ownAssign:
		return e.ids, e.gen
	default:
		return nil, gen
	}
}

// eachOwnSequence calls fn with every sequence of n events, the last one
// ending its batch.
func eachOwnSequence(n int, fn func([]ownEv)) {
	var walk func(seq []ownEv, assigned []task.ID, gen int32)
	walk = func(seq []ownEv, assigned []task.ID, gen int32) {
		if len(seq) == n {
			last := seq[n-1]
			last.end = true
			fn(append(slices.Clone(seq[:n-1]), last))
			return
		}
		for _, e := range nextOwnEvents(assigned, gen) {
			a, g := afterOwnEvent(assigned, gen, e)
			walk(append(slices.Clip(seq), e), a, g)
		}
	}
	walk(nil, nil, 0)
}

func randomOwnSequence(rng *rand.Rand, n int) []ownEv {
	var (
		seq      []ownEv
		assigned []task.ID
		gen      int32
	)
	for range n {
		next := nextOwnEvents(assigned, gen)
		e := next[rng.IntN(len(next))]
		seq = append(seq, e)
		assigned, gen = afterOwnEvent(assigned, gen, e)
	}
	seq[n-1].end = true
	return seq
}

func newOwnershipDecider() decider { return &ownershipDecider{newOwnership()} }
func newOldDecider() decider {
	return &oldDecider{open: map[task.ID]bool{}, closing: map[task.ID]bool{}}
}

// TestOwnershipModel checks the task ownership rule against the model over
// every sequence of up to 4 partition changes (in every batching) and over
// random longer ones: a task whose partition another member may have owned
// is always reopened (restored), and the set of open tasks is the set
// assigned once a batch was handled.
func TestOwnershipModel(t *testing.T) {
	n := 0
	for length := 1; length <= 4; length++ {
		eachOwnSequence(length, func(evs []ownEv) {
			n++
			if err := checkOwnership(newOwnershipDecider(), evs); err != nil {
				t.Fatalf("%v\nevents: %v", err, evs)
			}
		})
	}
	rng := rand.New(rand.NewPCG(15, 9))
	for range 5_000 {
		evs := randomOwnSequence(rng, 2+rng.IntN(30))
		n++
		if err := checkOwnership(newOwnershipDecider(), evs); err != nil {
			t.Fatalf("%v\nevents: %v", err, evs)
		}
	}
	t.Logf("%d sequences", n)
}

// TestOwnershipModelCatchesTheOldRule is the negative control: the rule
// before issue 15 fails the model, on a partition lost and assigned again
// within one batch among others.
func TestOwnershipModelCatchesTheOldRule(t *testing.T) {
	var first []ownEv
	failed := 0
	for length := 1; length <= 4; length++ {
		eachOwnSequence(length, func(evs []ownEv) {
			if err := checkOwnership(newOldDecider(), evs); err != nil {
				if first == nil {
					first = evs
					t.Logf("old rule: %v\nevents: %v", err, evs)
				}
				failed++
			}
		})
	}
	if failed == 0 {
		t.Fatal("the model check passed the old rule, which keeps a task lost and assigned again in one batch")
	}
	lostThenAssigned := []ownEv{
		{kind: ownAssign, gen: 1, ids: ownIDs[:1], end: true},
		{kind: ownLost, ids: ownIDs[:1]},
		{kind: ownAssign, gen: 3, ids: ownIDs[:1], end: true},
	}
	err := checkOwnership(newOldDecider(), lostThenAssigned)
	if err == nil {
		t.Fatalf("the old rule passed %v", lostThenAssigned)
	}
	t.Logf("old rule: %v\nevents: %v", err, lostThenAssigned)
	if err := checkOwnership(newOwnershipDecider(), lostThenAssigned); err != nil {
		t.Fatal(err)
	}
}
