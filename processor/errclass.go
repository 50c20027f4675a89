package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

// Errors at run time are classified by the recovery they need, after Kafka
// Streams' taxonomy (TaskMigratedException → rejoin, TaskCorruptedException
// → wipe and restore, anything else → stop). Run's retry loop asks classify
// what to do with the error a session ended with:
//
//   - errRetryable: the session is unusable but the instance is fine: its
//     producer was fenced or lost its state (a new epoch fences the old
//     one), its group generation moved on, or the cluster was briefly
//     unreachable. Rebuild the session; its tasks reopen from their
//     committed state. At most maxSessionFailures in a row without a
//     commit.
//   - errCorrupted: one store's local copy cannot be trusted. Wipe that
//     store's directory and rebuild the session: the task restores the
//     store from its changelog, which is what the changelog is for.
//   - everything else, fatalError included: stop the instance and return
//     the error. An error nobody expected is a bug or a misconfiguration,
//     and retrying it would only hide it (or, worse, commit around it).
type errClass int

const (
	classFatal errClass = iota
	classRetryable
	classCorrupted
)

func (c errClass) String() string {
	switch c {
	case classRetryable:
		return "retryable"
	case classCorrupted:
		return "corrupted"
	}
	return "fatal"
}

// fatalError stops the instance instead of rebuilding the session. Every
// error not named retryable or corrupted is fatal anyway; fatalError says
// so where an error's cause would otherwise look retryable (a wrapped
// network error that no retry can cure).
type fatalError struct{ err error }

func (f fatalError) Error() string { return f.err.Error() }
func (f fatalError) Unwrap() error { return f.err }

// errRetryable marks an error whose cure is a new session.
type errRetryable struct{ err error }

func (e errRetryable) Error() string { return e.err.Error() }
func (e errRetryable) Unwrap() error { return e.err }

// errCorrupted names a store whose local copy is damaged: its directory is
// wiped and the store restored from its changelog.
type errCorrupted struct {
	task  task.ID
	known bool // task is known (not for a global table's store)
	store string
	dir   string // <state.dir>/<app-id>/<task>/<store>
	err   error
}

func (e errCorrupted) Error() string {
	return fmt.Sprintf("processor: task %s: store %s is corrupted: %v", e.task, e.store, e.err)
}
func (e errCorrupted) Unwrap() error { return e.err }

// classify tells Run what to do with a session's error. A damaged store
// comes first, whoever wrapped it (a read that fails inside an operator
// comes back as a fatal processing error): its cure is always the same.
// Then the explicit marks (fatalError over retryable: a fatal error
// wrapping a fenced producer is still fatal), then the causes known to be
// retryable whoever returned them; the rest is fatal.
func classify(err error) errClass {
	var fatal fatalError
	var retryable errRetryable
	switch {
	case err == nil:
		return classFatal
	case corruptedStore(err) != nil:
		return classCorrupted
	case errors.As(err, &fatal):
		return classFatal
	case errors.As(err, &retryable):
		return classRetryable
	case migrated(err), transient(err):
		return classRetryable
	}
	return classFatal
}

// migrated reports the causes of Kafka Streams' TaskMigratedException and
// of its producer-fenced handling: another incarnation took the
// transactional id, the producer's state is unknown to the coordinator or
// out of step with a partition's (OUT_OF_ORDER_SEQUENCE_NUMBER: a broker
// refuses a batch whose sequence does not follow the last it has, as it
// does for the second batch to a new partition when the first failed and
// the second was already on its way), or the group moved on without this
// member. A new session (new producer epoch, new join) cures them.
func migrated(err error) bool {
	for _, e := range []error{
		kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.UnknownProducerID, kerr.OutOfOrderSequenceNumber,
		kerr.InvalidProducerIDMapping, kerr.TransactionCoordinatorFenced,
		kerr.InvalidTxnState, kerr.ConcurrentTransactions, kerr.TransactionAbortable,
		kerr.IllegalGeneration, kerr.UnknownMemberID, kerr.RebalanceInProgress,
		kerr.FencedMemberEpoch, kerr.StaleMemberEpoch,
		kgo.ErrAborting,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// transient reports a cluster that could not be reached or answered that it
// is not ready (a broker restarting, a coordinator moving): Kafka Streams
// retries these (RetriableException, TimeoutException) within
// task.timeout.ms; sluice within maxSessionFailures sessions.
func transient(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) ||
		errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries)
}

// recoverFrom decides what Run does after a session ended with err: nil to
// build a new session (after wiping a corrupted store), or the error that
// stops the instance.
func (a *App) recoverFrom(err error) error {
	switch classify(err) {
	case classRetryable:
		return nil
	case classCorrupted:
		return a.wipeCorrupted(*corruptedStore(err))
	}
	return err
}

// corruptedStore finds the damaged store an error is about: an errCorrupted,
// or a store error naming the directory (the task is then read from the
// directory's parent, <task>/<store>).
func corruptedStore(err error) *errCorrupted {
	var c errCorrupted
	if errors.As(err, &c) {
		return &c
	}
	var ce *store.CorruptedError
	if !errors.As(err, &ce) || ce.Dir == "" {
		return nil
	}
	c = errCorrupted{store: filepath.Base(ce.Dir), dir: ce.Dir, err: err}
	c.task, c.known = parseTaskID(filepath.Base(filepath.Dir(ce.Dir)))
	return &c
}

// parseTaskID reads a task directory's name (task.ID.String: sub_partition).
func parseTaskID(s string) (task.ID, bool) {
	var id task.ID
	if _, err := fmt.Sscanf(s, "%d_%d", &id.Sub, &id.Partition); err != nil || id.String() != s {
		return task.ID{}, false
	}
	return id, true
}

// asCorrupted turns an error opening task id's stores that wraps
// store.ErrCorrupted into an errCorrupted naming the store; other errors
// come back unchanged.
func asCorrupted(id task.ID, err error) error {
	var ce *store.CorruptedError
	if !errors.As(err, &ce) || ce.Dir == "" {
		return err
	}
	return errCorrupted{task: id, known: true, store: filepath.Base(ce.Dir), dir: ce.Dir, err: err}
}

// openFailed classifies an error opening task id: a corrupted store is
// wiped and restored, anything else stops the instance (a topology that
// cannot open its stores or operators will not next time either).
func openFailed(id task.ID, err error) error {
	if c := asCorrupted(id, err); c != err {
		return c
	}
	return fatalError{err}
}

// wipeCorrupted removes the directory of a corrupted store, so that the
// next session creates it empty and restores it in full. Only a directory
// inside the instance's state directory is removed.
func (a *App) wipeCorrupted(c errCorrupted) error {
	rel, err := filepath.Rel(a.dir, c.dir)
	if err != nil || rel == "." || !filepath.IsLocal(rel) || !c.known {
		// A global table's store stays open across sessions, and is
		// rebuilt at the next start anyway.
		return fatalError{fmt.Errorf("processor: corrupted store %s at %s is not a task's store in the state directory %s: %w", c.store, c.dir, a.dir, c.err)}
	}
	a.log.Warn("store corrupted: wiping it; it restores from its changelog", "task", c.task.String(), "store", c.store, "dir", c.dir, "err", c.err)
	if err := os.RemoveAll(c.dir); err != nil {
		return fatalError{fmt.Errorf("processor: wipe corrupted store %s: %w", c.store, err)}
	}
	a.local.note(c.task, c.store, store.NoCheckpoint)
	return nil
}
