package topologytest

// batching is how the driver groups records into transactions: by default
// it commits after every Pipe and AdvanceWallClock; with CommitEvery it
// keeps the transaction open across n of them, and with FoldUpdates the
// tables' updates fold until its flush, as the instance's do.
type batching struct {
	fold  bool
	every int // steps per commit; 0 or 1: every step
	steps int // steps since the last commit
}

// FoldUpdates folds the updates of cached tables until the commit, as
// processor.FoldUpdates (fold.updates) does: downstream sees one update
// per key and commit. Ignored where the topology uses event time, as in
// the instance. Pair it with CommitEvery, or every record is a commit of
// its own and nothing folds.
func FoldUpdates() Option { return func(d *Driver) { d.batch.fold = true } }

// CommitEvery makes the driver commit after every n steps (Pipe,
// PipeBytes, AdvanceWallClock) instead of after each, the way an instance
// commits every commit.interval: the records in between are one
// transaction, flushed (held updates forwarded, watermarks announced) only
// at its end. Records sent to internal topics are still processed at once.
// An error aborts the whole open transaction: the records piped since the
// last commit are rolled back with it. Commit ends one early; records not
// committed when the driver closes are lost, as an instance's are.
func CommitEvery(n int) Option { return func(d *Driver) { d.batch.every = n } }

// hold reports whether the step just taken leaves the transaction open.
func (b *batching) hold() bool {
	b.steps++
	if b.every <= 1 || b.steps >= b.every {
		b.steps = 0
		return false
	}
	return true
}

// Commit flushes and commits the open transaction (see CommitEvery); with
// none open it does nothing.
func (d *Driver) Commit() error {
	if d.batch.steps == 0 {
		return nil
	}
	d.batch.steps = d.batch.every // the step below is the last
	return d.step(func() error { return nil })
}

// drain processes the records waiting on internal topics, without a
// flush: the open transaction's middle.
func (d *Driver) drain() error {
	for len(d.queue) > 0 {
		r := d.queue[0]
		d.queue = d.queue[1:]
		if err := d.bySource[r.Topic].Process(r); err != nil {
			return err
		}
	}
	return nil
}
