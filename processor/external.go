package processor

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/txn"
)

// External sinks (invariant 7; DESIGN.md, "External sinks"). Two-phase
// sinks take part in the commit sequence (commit.go): before the flush
// every task's batch gets a transaction id, recorded in the sink's store so
// that it commits with the Kafka transaction (stage); after the flush and
// before the Kafka commit each batch is prepared (prepare); after it, the
// prepared transactions are committed, or rolled back if the Kafka
// transaction is known to have aborted (ended). When a task opens, what an
// earlier owner left prepared is resolved by the committed state (open).
// Offsets-mode sinks are written by one writer goroutine per task, which
// follows the task's partition of the sink's topic after the commit.

// AbortSink is the abort cause of a transaction whose two-phase sink could
// not be prepared, or whose previous transaction's external commit is still
// unresolved.
const AbortSink = "sink"

// ErrSinkGuarantee is returned by New for a two-phase sink under a
// guarantee other than exactly_once: without a Kafka transaction there is
// nothing to tie the prepared transaction to. ToIdempotent works under
// every guarantee (at least once: the writer may then see duplicates that
// the sink topic holds).
var ErrSinkGuarantee = errors.New("processor: a two-phase sink (topology.ToParticipant) needs processing.guarantee=exactly_once")

// checkExternals refuses two-phase sinks outside exactly_once.
func (a *App) checkExternals() error {
	if a.cfg.guarantee == txn.ExactlyOnce {
		return nil
	}
	var errs []error
	for _, sub := range a.plan.Subs {
		for _, n := range sub.Nodes {
			if n.TwoPhase != nil {
				errs = append(errs, fmt.Errorf("%w: sink %q under %s; use topology.ToIdempotent, or exactly_once", ErrSinkGuarantee, n.TwoPhase.Name, a.cfg.guarantee))
			}
		}
	}
	return errors.Join(errs...)
}

// addSinkTopics makes the producer partition the offsets-mode sinks'
// topics by the record's own partition, the task's, as it does changelogs.
func (a *App) addSinkTopics() {
	for _, sub := range a.plan.Subs {
		for _, n := range sub.Nodes {
			if n.Offsets != nil {
				a.changelogs[names.Internal(a.cfg.appID, n.Topics[0])] = true
			}
		}
	}
}

// XIDs: <sink hash>-<task>-<nonce>-<sequence>, at most sink.MaxXIDLength.
// The sink hash (of the application id and the sink's name) and the task
// make the prefix a task's recovery lists; the nonce, drawn when the task
// opens, keeps the ids of two owners of one task apart (a zombie's among
// them); the sequence numbers the transactions of one opening.
const (
	xidHashLen  = 12 // hex digits of sha256(application id, sink name)
	xidNonceLen = 5  // random bytes, 10 hex digits
)

// xidPrefix is the prefix of every id of sink name and task id.
func xidPrefix(appID, name string, id task.ID) string {
	h := sha256.Sum256([]byte(appID + "\x00" + name))
	return hex.EncodeToString(h[:])[:xidHashLen] + "-" + id.String() + "-"
}

// externals is the member's runtime of external sinks, per open task. The
// loop alone touches the two-phase state; writers are goroutines the
// member owns and waits for.
type externals struct {
	m       *member
	tpc     map[task.ID][]*tpcState
	writers map[task.ID][]*offsetsWriter

	// backoff grows with each transaction aborted because a sink
	// could not prepare (100ms doubling to 5s, reset by a prepare that
	// succeeds): the loop pauses until pauseUntil after such an abort,
	// so that an unreachable store costs an abort per backoff, not one
	// per commit interval.
	backoff    time.Duration
	pauseUntil time.Time

	// failed is the first error of a writer whose record the store
	// refused under the policy Fail: the instance stops (rowerr.go).
	failMu sync.Mutex
	failed error
}

// tpcState is one two-phase sink in one task.
type tpcState struct {
	id     task.ID
	node   *exec.Node
	spec   *exec.TwoPhase
	pend   exec.Pending
	t      *task.Task
	prefix string
	nonce  string
	seq    uint64

	// the open transaction's batch and its id (staged), and whether
	// Prepare was called and whether it succeeded
	xid       string
	batch     any
	size      int // of the batch when taken: bounds its prepares
	tried, ok bool

	// unresolved is the id of a transaction whose Kafka transaction
	// committed but whose CommitPrepared has not succeeded yet: no new
	// Prepare of this task and sink before it has (so the recorded id is
	// the only one that can be committed and unresolved).
	unresolved string
	backoff    time.Duration
	nextTry    time.Time

	committed, rolledBack int // by recover, for its log line

	// orphans are ids of Kafka transactions known to have aborted whose
	// RollbackPrepared failed (the store was away): rolled back at each
	// commit until it succeeds (rowerr.go).
	orphans []string
}

func (m *member) ext() *externals {
	if m.extRT == nil {
		m.extRT = &externals{m: m, tpc: map[task.ID][]*tpcState{}, writers: map[task.ID][]*offsetsWriter{}}
	}
	return m.extRT
}

// open runs when a task has restored and initialised, before it processes:
// for each two-phase sink, the transactions this task's earlier owners
// left prepared are resolved by the committed state (the recorded id is
// committed if still prepared, every other rolled back); each offsets-mode
// sink's writer starts.
func (x *externals) open(ctx context.Context, t *task.Task) error {
	id := t.ID()
	a := x.m.a
	var states []*tpcState
	for _, s := range t.TwoPhase() {
		nonce := make([]byte, xidNonceLen)
		rand.Read(nonce)
		st := &tpcState{id: id, node: s.Node, spec: s.Spec, pend: s.Pending, t: t,
			prefix: xidPrefix(a.cfg.appID, s.Spec.Name, id), nonce: hex.EncodeToString(nonce)}
		recorded, _, err := t.Engine(s.Spec.Store).Get(exec.XIDKey)
		if err != nil {
			return fmt.Errorf("processor: task %s: sink %s: read the recorded transaction: %w", id, s.Spec.Name, err)
		}
		// Bounded, so that a store that hangs does not hold the
		// loop (and the group) forever.
		rctx, cancel := context.WithTimeout(ctx, a.cfg.txnTimeout)
		err = st.recover(rctx, string(recorded))
		cancel()
		if err != nil {
			// The store may be down for a while: the session is
			// rebuilt, and the task opens again.
			return errRetryable{fmt.Errorf("processor: task %s: sink %s: recover prepared transactions: %w", id, s.Spec.Name, err)}
		}
		if st.committed+st.rolledBack > 0 {
			a.log.Info("sink recovered prepared transactions", "task", id.String(), "sink", s.Spec.Name,
				"recorded", string(recorded), "committed", st.committed, "rolled_back", st.rolledBack)
		}
		states = append(states, st)
	}
	if len(states) > 0 {
		x.tpc[id] = states
	}
	for _, n := range a.plan.Subs[id.Sub].Nodes {
		if n.Offsets != nil {
			x.writers[id] = append(x.writers[id], x.m.startWriter(n, names.Internal(a.cfg.appID, n.Topics[0]), t))
		}
	}
	return nil
}

// recover commits the recorded transaction if it is still prepared and
// rolls back every other under the task's prefix: those belong to Kafka
// transactions that aborted, or never committed (a zombie's, a crash's).
func (s *tpcState) recover(ctx context.Context, recorded string) error {
	xids, err := s.spec.Prepared(ctx, s.prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, xid := range xids {
		if xid == recorded {
			err = s.spec.CommitPrepared(ctx, xid)
			s.committed++
		} else {
			err = s.spec.RollbackPrepared(ctx, xid)
			s.rolledBack++
		}
		if err != nil && !errors.Is(err, sink.ErrNotPrepared) {
			errs = append(errs, fmt.Errorf("%s: %w", xid, err))
		}
	}
	return errors.Join(errs...)
}

// close stops the task's writers and forgets its two-phase state; a
// transaction that committed in Kafka and is still unresolved gets one
// last try (the next owner's recovery commits it otherwise: it is the
// recorded one).
func (x *externals) close(id task.ID) {
	for _, w := range x.writers[id] {
		w.stop()
	}
	delete(x.writers, id)
	for _, s := range x.tpc[id] {
		s.pend.Drop()
		if s.unresolved != "" || len(s.orphans) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if s.unresolved != "" {
				s.resolve(ctx, x.m)
			}
			s.rollBackOrphans(ctx)
			cancel()
		}
	}
	delete(x.tpc, id)
}

// stage runs before the flush of a transaction that is to commit: each
// two-phase sink's batch of each task gets a new id, written to the sink's
// store so that the flush sends it to the changelog inside the
// transaction. Unresolved commits whose backoff ran out are retried first.
func (x *externals) stage(ctx context.Context) error {
	if err := x.writerFailed(); err != nil {
		return err
	}
	for _, states := range x.tpc {
		for _, s := range states {
			if s.unresolved != "" && !time.Now().Before(s.nextTry) {
				s.resolve(ctx, x.m)
			}
			s.rollBackOrphans(ctx)
			batch, n := s.pend.Take()
			if n == 0 {
				continue
			}
			s.seq++
			s.xid = s.prefix + s.nonce + "-" + strconv.FormatUint(s.seq, 36)
			s.batch, s.size, s.tried, s.ok = batch, n, false, false
			if err := s.t.Store(s.spec.Store).Put(exec.XIDKey, []byte(s.xid)); err != nil {
				return fmt.Errorf("processor: task %s: sink %s: record the transaction id: %w", s.id, s.spec.Name, err)
			}
		}
	}
	return nil
}

// prepare prepares every staged batch, the tasks in parallel. It fails if
// any Prepare does, or if a task's previous external commit is still
// unresolved: the Kafka transaction must then abort. A record a
// participant refuses goes to its sink's error policy and the batch is
// prepared again without it (prepareBatch); under the policy Fail the
// error is a fatalError, which stops the instance.
func (x *externals) prepare(ctx context.Context) error {
	var todo []*tpcState
	var errs []error
	for _, states := range x.tpc {
		for _, s := range states {
			if s.xid == "" {
				continue
			}
			if s.unresolved != "" {
				errs = append(errs, fmt.Errorf("processor: task %s: sink %s: transaction %s committed in Kafka is not yet committed in the sink", s.id, s.spec.Name, s.unresolved))
				continue
			}
			todo = append(todo, s)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	perrs := make([]error, len(todo))
	parallel(len(todo), x.m.a.threads, func(i int) {
		s := todo[i]
		s.tried = true
		if err := s.prepareBatch(ctx, x.m); err != nil {
			perrs[i] = err
			return
		}
		s.ok = true
	})
	return errors.Join(perrs...)
}

// ended runs after the Kafka transaction ended. Committed: every prepared
// transaction is committed (retried with backoff while it fails). Known to
// have aborted: every prepared one is rolled back, best effort (recovery
// does it otherwise). unknown (the commit's outcome is not known): nothing
// is touched; the session is rebuilt and the tasks' recovery decides from
// the committed state.
func (x *externals) ended(ctx context.Context, committed, unknown bool) {
	log := x.m.a.log
	for _, states := range x.tpc {
		for _, s := range states {
			if s.xid == "" {
				continue
			}
			switch {
			case committed:
				s.unresolved, s.backoff = s.xid, 0
				s.resolve(ctx, x.m)
			case unknown:
				log.Warn("sink transaction left prepared: the Kafka commit's outcome is unknown; recovery resolves it", "task", s.id.String(), "sink", s.spec.Name, "xid", s.xid)
			case s.tried:
				if err := s.spec.RollbackPrepared(ctx, s.xid); err != nil && !errors.Is(err, sink.ErrNotPrepared) {
					// Kept, and rolled back at the next commits
					// (and when the task closes), so that a
					// clean stop leaves nothing prepared.
					s.orphans = append(s.orphans, s.xid)
					log.Warn("sink rollback failed; retried at the next commits", "task", s.id.String(), "sink", s.spec.Name, "xid", s.xid, "err", err)
				}
			}
			s.xid, s.batch, s.tried, s.ok = "", nil, false, false
		}
	}
}

// resolve tries the unresolved CommitPrepared once; a failure doubles the
// backoff before the next try (100ms to 5s).
func (s *tpcState) resolve(ctx context.Context, m *member) {
	err := s.spec.CommitPrepared(ctx, s.unresolved)
	if err == nil || errors.Is(err, sink.ErrNotPrepared) {
		// ErrNotPrepared: an earlier call whose answer was lost, or a
		// new owner's recovery, committed it (only the recorded id is
		// ever committed by anyone).
		s.unresolved, s.backoff = "", 0
		return
	}
	s.backoff = min(max(2*s.backoff, 100*time.Millisecond), 5*time.Second)
	s.nextTry = time.Now().Add(s.backoff)
	m.a.log.Warn("sink commit failed after the Kafka commit; retrying", "task", s.id.String(), "sink", s.spec.Name, "xid", s.unresolved, "backoff", s.backoff, "err", err)
}

// offsetsWriter hands an offsets-mode sink's committed records of one task
// to its store.
type offsetsWriter struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *offsetsWriter) stop() {
	w.cancel()
	<-w.done
}

// writerBatch bounds the records of one Write.
const writerBatch = 5000

// startWriter starts the writer of partition id.Partition of topic: it
// reads read_committed (invariant 4: an aborted record is never handed
// over) from the offset the store holds, and writes what it reads with the
// next offset, until stopped; a failure restarts it from the store's
// offset after a backoff.
func (m *member) startWriter(n *exec.Node, topic string, t *task.Task) *offsetsWriter {
	spec, id := n.Offsets, t.ID()
	ctx, cancel := context.WithCancel(context.Background())
	w := &offsetsWriter{cancel: cancel, done: make(chan struct{})}
	log := m.a.log.With("sink", spec.Name, "task", id.String())
	go func() {
		defer close(w.done)
		backoff := time.Duration(0)
		for ctx.Err() == nil {
			err := m.a.writeOffsets(ctx, &writerRun{n: n, t: t}, topic, id.Partition)
			if ctx.Err() != nil {
				return
			}
			var fe fatalError
			if errors.As(err, &fe) {
				// A refused record under the policy Fail: the
				// instance stops (its next commit returns it).
				m.ext().fail(fe)
				log.Error("sink writer stopped: the store refused a record", "err", err)
				return
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			log.Warn("sink writer failed; restarting from the stored offset", "err", err, "backoff", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
		}
	}()
	return w
}

// writeOffsets is one run of a writer: until ctx ends or a failure.
func (a *App) writeOffsets(ctx context.Context, wr *writerRun, topic string, p int32) error {
	spec := wr.n.Offsets
	stored, err := spec.Offsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("offsets: %w", err)
	}
	from := kgo.NewOffset().AtStart()
	next, has := stored[p]
	if has {
		from = kgo.NewOffset().At(next)
	}
	cl, err := kgo.NewClient(a.cfg.kgoOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: from}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollRecords(ctx, writerBatch)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return ferr
		}
		var recs []exec.RawRecord
		fs.EachRecord(func(r *kgo.Record) {
			if has && r.Offset < next {
				return // never below what the store holds
			}
			recs = append(recs, exec.RawRecord{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp.UnixMilli(),
				Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
		})
		if len(recs) == 0 {
			continue
		}
		end := recs[len(recs)-1].Offset + 1
		if err := wr.write(ctx, cl, topic, recs, map[int32]int64{p: end}); err != nil {
			return err
		}
		next, has = end, true
	}
}
