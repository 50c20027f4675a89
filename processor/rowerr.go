package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/sink"
)

// Bad input and failures of external sinks (DESIGN.md, "External sinks",
// rejected records and lost connections). A store tells a record it
// refuses (sink.Rejected: a constraint, a type, a value too long) from a
// failure of its own (a lost connection). A refused record is a production
// error of the sink's node (invariant 6): dead-lettered, skipped or
// stopping the instance, never retried in a loop, and the rest of its
// batch is written without it. Any other failure aborts the Kafka
// transaction (two-phase) or restarts the writer from the stored offset
// (offsets mode), after a backoff, and is retried whole.

// Backoff bounds after a sink's failure (vars: the negative control of
// the abort-rate test turns the backoff off).
var (
	sinkBackoffMin = 100 * time.Millisecond
	sinkBackoffMax = 5 * time.Second
)

// prepareBatch prepares s's batch. A record the participant refuses is
// taken out of the batch and handed to the sink's error policy (its dead
// letter produced inside the open transaction), and the rest is prepared
// again: a failed Prepare leaves nothing, so each try starts clean. At
// most one try per record, so a participant that refuses every record
// cannot loop. Fail, or a refusal that names no record of the batch,
// returns a fatalError.
func (s *tpcState) prepareBatch(ctx context.Context, m *member) error {
	for range s.size + 1 {
		err := s.spec.Prepare(ctx, s.xid, s.batch)
		if err == nil {
			return nil
		}
		werr := fmt.Errorf("processor: task %s: sink %s: prepare %s: %w", s.id, s.spec.Name, s.xid, err)
		var rej sink.Rejected
		if !errors.As(err, &rej) {
			return werr
		}
		// The record's own log line and count come from the task's
		// error report (ExternalFailed → OnAction).
		i, _ := rej.Rejected()
		in, ok := s.spec.Reject(s.batch, i)
		if !ok {
			return fatalError{fmt.Errorf("%w (the refused record's index %d is not in the batch)", werr, i)}
		}
		_, dead, ferr := s.t.ExternalFailed(s.node, in, err)
		if ferr != nil {
			return fatalError{ferr}
		}
		if dead != nil {
			m.send(dead, nil) // inside the open transaction (invariant 6)
		}
	}
	return fmt.Errorf("processor: task %s: sink %s: prepare %s: the participant refused record after record", s.id, s.spec.Name, s.xid)
}

// prepareFailed logs a failed prepare and returns what end must return:
// the error, if it is fatal (a refused record under the policy Fail);
// otherwise nil, and the loop pauses for the grown backoff before its
// next transaction.
func (x *externals) prepareFailed(err error) error {
	var fe fatalError
	if errors.As(err, &fe) {
		x.m.a.log.Error("aborting and stopping: a sink refused a record under the policy fail", "err", err)
		return fe
	}
	x.backoff = min(max(2*x.backoff, sinkBackoffMin), sinkBackoffMax)
	x.pauseUntil = time.Now().Add(x.backoff)
	x.m.a.log.Warn("aborting: a sink could not prepare; its records are processed again after a backoff", "backoff", x.backoff, "err", err)
	return nil
}

// prepared resets the backoff: the sinks are reachable again.
func (x *externals) prepared() {
	if x.backoff > 0 {
		x.m.a.log.Info("sinks prepared again after a failure")
	}
	x.backoff, x.pauseUntil = 0, time.Time{}
}

// pause waits, between transactions, until the backoff of a sink's abort
// ran out, waking early for group events (as a poll does) and shutdown:
// what bounds the aborts while a store is unreachable.
func (x *externals) pause(ctx context.Context) {
	d := time.Until(x.pauseUntil)
	if d <= 0 {
		return
	}
	m := x.m
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	m.evMu.Lock()
	if m.wake = cancel; len(m.events) > 0 {
		cancel()
	}
	m.evMu.Unlock()
	<-wctx.Done()
	m.evMu.Lock()
	m.wake = nil
	m.evMu.Unlock()
}

// fail records a writer's fatal error; writerFailed returns it.
func (x *externals) fail(err error) {
	x.failMu.Lock()
	defer x.failMu.Unlock()
	if x.failed == nil {
		x.failed = err
	}
}

func (x *externals) writerFailed() error {
	x.failMu.Lock()
	defer x.failMu.Unlock()
	return x.failed
}

// writerRun is what an offsets-mode writer needs beside its store: the
// sink's node and task, for the error policy.
type writerRun struct {
	n *exec.Node
	t *task.Task
}

// write stores recs with next. A record the store refuses is handed to
// the sink's error policy and the rest written without it; next stays, so
// the stored offset passes the refused record only together with the
// rest. Its dead letter is produced first, outside any transaction, and
// acknowledged before the Write: the Kafka transaction that wrote the
// record committed long ago, and the store's transaction and a Kafka one
// cannot commit atomically, so the dead letter is at least once (a crash
// between the two writes it again on replay, under the same
// sluice.source.* headers), never lost. Fail returns a fatalError with
// nothing written: the stored offset stays before the record.
func (w *writerRun) write(ctx context.Context, cl *kgo.Client, topic string, recs []exec.RawRecord, next map[int32]int64) error {
	spec := w.n.Offsets
	for range len(recs) + 1 {
		err := spec.Write(ctx, topic, recs, next)
		if err == nil {
			return nil
		}
		var rej sink.Rejected
		if !errors.As(err, &rej) {
			return fmt.Errorf("write: %w", err)
		}
		i, _ := rej.Rejected()
		if i < 0 || i >= len(recs) {
			return fatalError{fmt.Errorf("processor: sink %s: write: %w (the refused record's index %d is not in the batch)", spec.Name, err, i)}
		}
		r := recs[i]
		in := exec.Input{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		_, dead, ferr := w.t.ExternalFailed(w.n, in, err)
		if ferr != nil {
			return fatalError{ferr}
		}
		if dead != nil {
			if err := cl.ProduceSync(ctx, dead).FirstErr(); err != nil {
				return fmt.Errorf("dead letter: %w", err)
			}
		}
		recs = append(recs[:i:i], recs[i+1:]...)
	}
	return fmt.Errorf("processor: sink %s: write: the store refused record after record", spec.Name)
}

// rollBackOrphans rolls back the ids of aborted Kafka transactions whose
// rollback failed; what fails again stays for the next try (and, if the
// instance dies first, for the task's next recovery).
func (s *tpcState) rollBackOrphans(ctx context.Context) {
	kept := s.orphans[:0]
	for _, xid := range s.orphans {
		if err := s.spec.RollbackPrepared(ctx, xid); err != nil && !errors.Is(err, sink.ErrNotPrepared) {
			kept = append(kept, xid)
		}
	}
	clear(s.orphans[len(kept):])
	s.orphans = kept
}

// pingSinks pings every external sink that can be pinged (sink.Pinger),
// before the instance joins the group: an unreachable store at start is
// one clear error (the adapters name the URL without its password), not a
// run of aborted transactions. Bounded by the transaction timeout.
func (a *App) pingSinks(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.txnTimeout)
	defer cancel()
	var errs []error
	for _, sub := range a.plan.Subs {
		for _, n := range sub.Nodes {
			var name string
			var ping func(context.Context) error
			switch {
			case n.TwoPhase != nil:
				name, ping = n.TwoPhase.Name, n.TwoPhase.Ping
			case n.Offsets != nil:
				name, ping = n.Offsets.Name, n.Offsets.Ping
			}
			if ping == nil {
				continue
			}
			if err := ping(ctx); err != nil {
				errs = append(errs, fmt.Errorf("processor: sink %s is unreachable: %w", name, err))
			}
		}
	}
	if len(errs) > 0 {
		return fatalError{errors.Join(errs...)}
	}
	return nil
}
