package processor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// prepareDeadline is when a commit's prepares must have ended, given when
// the transaction's first record was produced (the broker times the
// transaction out from about then) and its timeout: before that timeout,
// less a quarter of it, at most 2s, for End to abort the transaction. A
// variable for a test's negative control.
var prepareDeadline = func(first time.Time, txn time.Duration) time.Time {
	return first.Add(txn - min(txn/4, 2*time.Second))
}

// The commit sequence (DESIGN.md, "The commit sequence"): flush the tasks,
// end the transaction, then apply or discard every task's stage.

// end flushes the tasks and ends the transaction; then it applies (commit)
// or discards (abort) every task's stage. This is the commit sequence of
// DESIGN.md. cause is why it aborts when commit is false; a failure on the
// way names its own cause.
func (m *member) end(commit bool, cause string) (bool, error) {
	if !m.inTxn {
		return false, nil
	}
	m.inTxn = false
	start := time.Now()
	// The tasks finish what they were given first (pipeline.go); a
	// record that failed aborts a transaction asked to commit.
	procErr := m.work.drain()
	m.collect()
	if procErr != nil && commit {
		commit, cause = false, AbortProcessing
	} else {
		procErr = nil
	}
	m.a.stats.enter(loopFlush)
	tasks := m.allTasks()
	ctx, cancel := context.WithTimeout(context.Background(), m.a.cfg.txnTimeout+10*time.Second)
	defer cancel()
	var stageErr, sinkErr error
	if commit {
		// Invariant 7: two-phase sinks record their batches' ids in
		// their stores before the flush sends them (external.go).
		stageErr = m.ext().stage(ctx)
	}
	// Invariant 1: every record the tasks sent is with the client before
	// End, which flushes the client's records into the transaction: those
	// sent so far once directSends returns, those the flushes send when
	// their send returns (sender.go).
	m.out.directSends()
	defer m.out.queueSends()
	flushErrs := make([]error, len(tasks))
	parallel(len(tasks), m.a.threads, func(i int) { flushErrs[i] = tasks[i].Flush() })
	flushErr := errors.Join(stageErr, errors.Join(flushErrs...))
	m.a.stats.enter(loopEnd)
	if flushErr != nil {
		commit, cause = false, AbortFlush
	}
	if commit && cause != AbortShutdown && len(m.own.closing) == 0 && !m.sent.Load() && m.uncommitted == 0 && m.clean() {
		// Nothing polled, produced or staged: there is nothing to
		// commit, so the transaction stays open for the next period.
		// Ending it empty would also cost the next commit up to 500ms:
		// franz-go learns that the broker fences zombies through the
		// group (KIP-447) only from the answer to a TxnOffsetCommit, and
		// after a commit without one it holds the next End back for
		// 500ms to let a rebalance settle.
		m.inTxn, m.txnStart = true, time.Now()
		m.a.stats.enter(loopOther)
		return false, nil
	}
	m.prodMu.Lock()
	failed := m.prodErr
	m.prodMu.Unlock()
	if failed != nil && commit {
		commit, cause = false, AbortProduce
	}
	if commit {
		// Invariant 3: a commit with records but no input offset is
		// fenced too (fence.go).
		fctx, ferr := m.fence(ctx)
		if ferr != nil {
			m.a.log.Warn("aborting a transaction that cannot be fenced", "err", ferr)
			commit, cause = false, AbortCommit
		} else {
			ctx = fctx
		}
	}
	if commit {
		// Invariant 7: prepared before the Kafka commit; a sink that
		// cannot prepare aborts the transaction (its records replay).
		// A prepare that waits (for a database's lock, a slow store)
		// gives up in time for End to abort the transaction before the
		// broker times it out (prepareDeadline).
		first := time.Now()
		if ns := m.firstSent.Load(); ns != 0 {
			first = time.Unix(0, ns)
		}
		pctx, pcancel := context.WithDeadline(ctx, prepareDeadline(first, m.a.cfg.txnTimeout))
		perr := m.ext().prepare(pctx)
		pcancel()
		if perr != nil {
			commit, cause = false, AbortSink
			sinkErr = m.ext().prepareFailed(perr)
		} else {
			m.ext().prepared()
		}
	}
	committed, err := m.sess.End(ctx, commit)
	// Committed: commit the prepared transactions; aborted: roll them
	// back; asked to commit and End failed: the outcome is unknown, so
	// they stay for recovery.
	m.ext().ended(ctx, committed, commit && err != nil)
	m.prodMu.Lock()
	if err == nil && m.prodErr != nil && committed {
		// A record failed after End's flush began; Kafka aborted the
		// transaction for us and End reports it, but be defensive.
		err = m.prodErr
	}
	failed = m.prodErr
	m.prodErr = nil
	m.prodMu.Unlock()
	m.a.stats.enter(loopApply)
	if committed {
		// Each task applies its stage to its own engines.
		commitErrs := make([]error, len(tasks))
		parallel(len(tasks), m.a.threads, func(i int) { commitErrs[i] = tasks[i].Commit() })
		m.a.stats.enter(loopOther)
		if cerr := errors.Join(commitErrs...); cerr != nil {
			return true, cerr
		}
		m.a.stats.Commits.Add(1)
		m.a.status.processed(m.tasks)
		m.a.stats.Processed.Add(m.uncommitted)
		for _, t := range tasks {
			m.a.stats.Combined.Add(t.TakeSaved())
		}
		took := time.Since(start)
		m.a.stats.CommitLatency.observe(took, 1)
		m.a.log.Debug("committed", "records", m.uncommitted, "tasks", len(m.tasks),
			"transaction", time.Since(m.txnStart).Round(time.Millisecond), "commit", took.Round(time.Microsecond))
	} else {
		for _, t := range m.tasks {
			t.Abort()
		}
		m.a.stats.enter(loopOther)
		if commit {
			cause = AbortCommit // asked to commit, but the transaction aborted
		}
		m.a.stats.addAbort(cause)
		m.a.log.Debug("aborted", "cause", cause, "records", m.uncommitted, "err", err)
	}
	m.uncommitted = 0
	if procErr != nil {
		return false, fatalError{procErr}
	}
	if sinkErr != nil {
		return false, sinkErr // a refused record under the policy Fail
	}
	if err != nil {
		return committed, fmt.Errorf("processor: end transaction: %w", err)
	}
	if flushErr != nil {
		return false, flushErr
	}
	if failed != nil && commit {
		return false, failed
	}
	return committed, nil
}

// clean reports whether no task has writes staged.
func (m *member) clean() bool {
	for _, t := range m.tasks {
		for _, name := range t.Stores() {
			if t.Store(name).Dirty() > 0 {
				return false
			}
		}
	}
	return true
}
