package txn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Session polls a consumer group and commits what was polled together with
// what was produced, under one Guarantee.
type Session interface {
	// PollRecords polls the group (read_committed) for at most max
	// records (all buffered if max <= 0), leaving the rest buffered for
	// the next poll; only what it returns counts as polled.
	PollRecords(ctx context.Context, max int) kgo.Fetches
	// Begin starts a commit period; produce only between Begin and End.
	Begin() error
	// Produce sends r in the current period; promise reports its fate.
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
	// End flushes and, when commit is true and nothing failed, commits the
	// period. committed reports whether it did; an error means the session
	// is unusable and must be closed.
	End(ctx context.Context, commit bool) (committed bool, err error)
	// Client is the underlying client (for metadata and admin requests).
	Client() *kgo.Client
	// Close leaves the group and closes the client.
	Close()
}

// NewSession starts a session. transactionalID is used only under
// ExactlyOnce. opts must include the group and its topics.
func NewSession(g Guarantee, transactionalID string, opts ...kgo.Opt) (Session, error) {
	opts = append(opts,
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), // invariant 4
		kgo.DisableAutoCommit(),
	)
	switch g {
	case ExactlyOnce:
		opts = append(opts, kgo.TransactionalID(transactionalID), kgo.RequireStableFetchOffsets())
		s, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return nil, err
		}
		return &eos{s: s}, nil
	case AtLeastOnce, AtMostOnce:
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		return &plain{cl: cl, atMostOnce: g == AtMostOnce}, nil
	}
	return nil, errors.New("txn: unknown guarantee")
}

type eos struct {
	s *kgo.GroupTransactSession
	// produced: a record was produced in the open transaction, so its
	// commit must be fenced (fence.go); the session's goroutines share it.
	produced atomic.Bool
}

func (e *eos) PollRecords(ctx context.Context, max int) kgo.Fetches { return e.s.PollRecords(ctx, max) }
func (e *eos) Begin() error {
	e.produced.Store(false)
	return e.s.Begin()
}
func (e *eos) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	if !e.produced.Load() {
		e.produced.Store(true)
	}
	e.s.Produce(ctx, r, promise)
}

// End fences every commit that carries records by the group generation
// (fence.go): the TxnOffsetCommit carries the offsets of every partition
// the member holds, not only of those polled since the last commit. A
// transaction without records commits at most the offsets it polled,
// which franz-go's own TxnOffsetCommit fences; with none polled either it
// is empty and needs no request at all (an idle instance that stops does
// not need the cluster).
func (e *eos) End(ctx context.Context, commit bool) (bool, error) {
	if commit && e.produced.Load() {
		if fence := fenceOffsets(ctx, e.s.Client()); len(fence) > 0 {
			ctx = kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
				addFence(req, fence)
				return nil
			})
		}
	}
	return e.s.End(ctx, kgo.TransactionEndTry(commit))
}
func (e *eos) Client() *kgo.Client { return e.s.Client() }
func (e *eos) Close()              { e.s.Close() }

// plain serves at_least_once and at_most_once with a non-transactional
// client.
type plain struct {
	cl         *kgo.Client
	atMostOnce bool

	mu      sync.Mutex
	prodErr error
}

func (p *plain) PollRecords(ctx context.Context, max int) kgo.Fetches {
	fs := p.cl.PollRecords(ctx, max)
	if p.atMostOnce && !fs.Empty() {
		// Commit before processing: a crash now loses these records.
		// The commit has a context of its own, as the poll's may be
		// about to expire. If it fails, the records are not processed
		// either (that would be at least once): the consumer rewinds to
		// the committed offsets and fetches them again.
		cctx, cancel := context.WithTimeout(context.Background(), atMostOnceCommitTimeout)
		err := p.cl.CommitUncommittedOffsets(cctx)
		cancel()
		if err != nil {
			p.cl.SetOffsets(p.cl.CommittedOffsets())
			return kgo.NewErrFetch(fmt.Errorf("txn: at_most_once: commit before processing: %w", err))
		}
	}
	return fs
}

// atMostOnceCommitTimeout bounds the commit before processing under
// at_most_once.
const atMostOnceCommitTimeout = 30 * time.Second

func (p *plain) Begin() error { return nil }

func (p *plain) setErr(err error) {
	p.mu.Lock()
	if p.prodErr == nil {
		p.prodErr = err
	}
	p.mu.Unlock()
}

func (p *plain) Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error)) {
	p.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
		if err != nil {
			p.setErr(err)
		}
		if promise != nil {
			promise(r, err)
		}
	})
}

func (p *plain) End(ctx context.Context, commit bool) (bool, error) {
	if err := p.cl.Flush(ctx); err != nil {
		return false, err
	}
	p.mu.Lock()
	err := p.prodErr
	p.prodErr = nil
	p.mu.Unlock()
	if err != nil {
		return false, err
	}
	if !commit {
		// Rewind like an aborted transaction does, so that polled
		// records that were not processed are fetched again.
		p.cl.SetOffsets(p.cl.CommittedOffsets())
		return false, nil
	}
	if !p.atMostOnce {
		if err := p.cl.CommitUncommittedOffsets(ctx); err != nil {
			return false, err
		}
	}
	return true, nil
}

func (p *plain) Client() *kgo.Client { return p.cl }
func (p *plain) Close()              { p.cl.Close() }
