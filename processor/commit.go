package processor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The commit sequence (DESIGN.md, "The commit sequence"): flush the tasks,
// end the transaction, then apply or discard every task's stage.

// end flushes the tasks and ends the transaction; then it applies (commit)
// or discards (abort) every task's stage. This is the commit sequence of
// DESIGN.md. cause is why it aborts when commit is false; a failure on the
// way names its own cause.
func (in *instance) end(commit bool, cause string) (bool, error) {
	if !in.inTxn {
		return false, nil
	}
	in.inTxn = false
	start := time.Now()
	tasks := in.allTasks()
	flushErrs := make([]error, len(tasks))
	parallel(len(tasks), in.a.threads, func(i int) { flushErrs[i] = tasks[i].Flush() })
	flushErr := errors.Join(flushErrs...)
	if flushErr != nil {
		commit, cause = false, AbortFlush
	}
	if commit && cause != AbortShutdown && len(in.own.closing) == 0 && !in.sent.Load() && in.uncommitted == 0 && in.clean() {
		// Nothing polled, produced or staged: there is nothing to
		// commit, so the transaction stays open for the next period.
		// Ending it empty would also cost the next commit up to 500ms:
		// franz-go learns that the broker fences zombies through the
		// group (KIP-447) only from the answer to a TxnOffsetCommit, and
		// after a commit without one it holds the next End back for
		// 500ms to let a rebalance settle.
		in.inTxn, in.txnStart = true, time.Now()
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), in.a.cfg.txnTimeout+10*time.Second)
	defer cancel()
	in.prodMu.Lock()
	failed := in.prodErr
	in.prodMu.Unlock()
	if failed != nil && commit {
		commit, cause = false, AbortProduce
	}
	if commit {
		// Invariant 3: a commit with records but no input offset is
		// fenced too (fence.go).
		fctx, ferr := in.fence(ctx)
		if ferr != nil {
			in.a.log.Warn("aborting a transaction that cannot be fenced", "err", ferr)
			commit, cause = false, AbortCommit
		} else {
			ctx = fctx
		}
	}
	committed, err := in.sess.End(ctx, commit)
	in.prodMu.Lock()
	if err == nil && in.prodErr != nil && committed {
		// A record failed after End's flush began; Kafka aborted the
		// transaction for us and End reports it, but be defensive.
		err = in.prodErr
	}
	failed = in.prodErr
	in.prodErr = nil
	in.prodMu.Unlock()
	if committed {
		// Each task applies its stage to its own engines.
		commitErrs := make([]error, len(tasks))
		parallel(len(tasks), in.a.threads, func(i int) { commitErrs[i] = tasks[i].Commit() })
		if cerr := errors.Join(commitErrs...); cerr != nil {
			return true, cerr
		}
		in.a.stats.Commits.Add(1)
		in.a.status.processed(in.tasks)
		in.a.stats.Processed.Add(in.uncommitted)
		took := time.Since(start)
		in.a.stats.CommitLatency.observe(took, 1)
		in.a.log.Debug("committed", "records", in.uncommitted, "tasks", len(in.tasks),
			"transaction", time.Since(in.txnStart).Round(time.Millisecond), "commit", took.Round(time.Microsecond))
	} else {
		for _, t := range in.tasks {
			t.Abort()
		}
		if commit {
			cause = AbortCommit // asked to commit, but the transaction aborted
		}
		in.a.stats.addAbort(cause)
		in.a.log.Debug("aborted", "cause", cause, "records", in.uncommitted, "err", err)
	}
	in.uncommitted = 0
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
func (in *instance) clean() bool {
	for _, t := range in.tasks {
		for _, name := range t.Stores() {
			if t.Store(name).Dirty() > 0 {
				return false
			}
		}
	}
	return true
}
