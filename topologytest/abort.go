package topologytest

import (
	"fmt"
	"math/rand/v2"

	"github.com/sluice-streams/sluice/store"
)

// AbortTransactions makes the driver commit the way an instance does,
// several records to a transaction, and abort some transactions at random
// before processing their records again: what an instance does after
// every eager rebalance, a failed produce or a transaction timeout. The
// seed fixes the choices, so a failure replays.
//
// Each Pipe and AdvanceWallClock is then one step of an open transaction,
// which ends after a random number of steps (1 to 6), before the wall clock
// moves, and whenever the test reads (ReadRecords, the store accessors,
// Watermark, StoreEntries, Close): a read_committed reader sees outputs
// only once they commit. A transaction that ends aborts with probability
// one half, at most three times in a row: every task aborts (Task.Abort,
// as the instance calls it: stores, time and operator state return to the
// last commit), its outputs and repartition records are dropped, as Kafka
// drops an aborted transaction's records, global tables return to where
// they were when it began, and its steps run again, with the same input
// records at the same offsets and the same wall-clock times.
//
// A topology whose results are exactly-once gives the same outputs, store
// contents and errors under any seed as without the option: the option is a
// checker of that. A step that fails (its error is returned by Pipe) aborts
// the open transaction, and the steps before it run again; so with this
// option OnError handlers and counters see the records of an aborted
// transaction once more, as they would in production.
func AbortTransactions(seed uint64) Option {
	return func(d *Driver) {
		d.ab = &aborter{d: d, rng: rand.New(rand.NewPCG(seed, seed^0x5eed))}
	}
}

// aborter is the driver's transaction under AbortTransactions.
type aborter struct {
	d   *Driver
	rng *rand.Rand
	// skipHooks leaves operators' in-memory state unreturned on abort:
	// the checker's negative control (task.Config.SkipAbortHooks).
	skipHooks bool

	steps []func() error // the open transaction's steps, to run again
	size  int            // the open transaction ends after size steps
	wall  int64          // the wall clock its steps ran at
	// outputs holds how many records each output topic had when the open
	// transaction began, and undo the global-table writes it made, each
	// with the value it replaced.
	outputs map[string]int
	undo    []globalUndo
	// Aborts counts the transactions aborted.
	aborts int
}

type globalUndo struct {
	e     store.Engine
	key   []byte
	value []byte // nil: the key was absent
}

// step runs fn as the next step of the open transaction.
func (a *aborter) step(fn func() error) error {
	d := a.d
	if len(a.steps) > 0 && d.wall != a.wall {
		// The wall clock moves between transactions only, so that
		// every step of one runs again at the time it first ran.
		if err := a.end(); err != nil {
			return err
		}
	}
	if len(a.steps) == 0 {
		a.begin()
	}
	if _, err := d.run(fn); err != nil {
		// run aborted every task: the transaction's earlier steps
		// run again, without the failed one.
		if rerr := a.replay(); rerr != nil {
			return rerr
		}
		return err
	}
	a.steps = append(a.steps, fn)
	if len(a.steps) >= a.size {
		return a.end()
	}
	return nil
}

// begin opens a transaction.
func (a *aborter) begin() {
	d := a.d
	a.size = 1 + a.rng.IntN(6)
	a.wall = d.wall
	clear(a.outputs)
	if a.outputs == nil {
		a.outputs = map[string]int{}
	}
	for topic, rs := range d.outputs {
		a.outputs[topic] = len(rs)
	}
	clear(a.undo)
	a.undo = a.undo[:0]
}

// end ends the open transaction, aborting it and running its steps again
// as the seed says, then committing.
func (a *aborter) end() error {
	for range 3 {
		if len(a.steps) == 0 || a.rng.IntN(2) == 0 {
			break
		}
		a.aborts++
		for _, t := range a.d.tasks {
			t.Abort()
		}
		if err := a.replay(); err != nil {
			return err
		}
	}
	a.steps = a.steps[:0]
	return a.d.commit()
}

// replay drops what the aborted transaction produced and wrote to global
// tables (the tasks have aborted), then runs its steps again.
func (a *aborter) replay() error {
	d := a.d
	d.queue = nil
	clear(d.x.writer)
	clear(d.x.sentAt)
	for topic, rs := range d.outputs {
		n := a.outputs[topic]
		clear(rs[n:])
		d.outputs[topic] = rs[:n]
	}
	for i := len(a.undo) - 1; i >= 0; i-- {
		u := a.undo[i]
		if err := u.e.Apply([]store.Write{{Key: u.key, Value: u.value}}, store.NoCheckpoint); err != nil {
			return err
		}
	}
	clear(a.undo)
	a.undo = a.undo[:0]
	for i, fn := range a.steps {
		if _, err := d.run(fn); err != nil {
			return fmt.Errorf("topologytest: step %d of a transaction failed when run again after an abort: %w", i, err)
		}
	}
	return nil
}

// global notes that a step is about to write key to the global table e.
func (a *aborter) global(e store.Engine, key []byte) error {
	old, ok, err := e.Get(key)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		old = nil
	case old == nil:
		old = []byte{} // present and empty, which nil would delete
	}
	a.undo = append(a.undo, globalUndo{e: e, key: key, value: old})
	return nil
}

// settle ends the open transaction, if any, before a read: the driver's
// reads see committed state only.
func (d *Driver) settle() error {
	if d.ab == nil || len(d.ab.steps) == 0 {
		return nil
	}
	return d.ab.end()
}

// defaultOptions are applied by New before its own: set only by this
// package's tests (export_test.go), to run whole tests under an option.
var defaultOptions []Option
