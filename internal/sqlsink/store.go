package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/sluice-streams/sluice/sink"
)

// Txn is an open ordinary transaction that can end.
type Txn interface {
	Tx
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

// Store is an adapter's connection pool.
type Store interface {
	Execer
	Begin(ctx context.Context) (Txn, error)
	Pairs(ctx context.Context, query string, args ...any) (map[int32]int64, error)
}

// CheckXID keeps transaction ids to what sluice hands out, so that they
// can be quoted as literals (PREPARE TRANSACTION and XA take no
// parameter).
func CheckXID(name, xid string) error {
	if xid == "" || len(xid) > sink.MaxXIDLength {
		return fmt.Errorf("%s: transaction id %q: want 1 to %d bytes", name, xid, sink.MaxXIDLength)
	}
	for _, c := range []byte(xid) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%s: transaction id %q: only ASCII letters, digits, '-', '_' and '.'", name, xid)
		}
	}
	return nil
}

// Unprepare rolls back xid after a PREPARE whose answer was lost (it may
// have reached the server), so that a failed Prepare leaves nothing. If
// the database cannot be reached, the transaction may remain prepared;
// the runtime's recovery (Prepared, then RollbackPrepared of what the
// Kafka commit did not record) removes it, and the error says so.
func Unprepare(ctx context.Context, cause error, rollback func(context.Context) error) error {
	err := rollback(context.WithoutCancel(ctx))
	if err == nil || errors.Is(err, sink.ErrNotPrepared) {
		return cause
	}
	return fmt.Errorf("%w (and it may remain prepared: %v)", cause, err)
}

// LocateIn runs Locate in a transaction of st rolled back afterwards.
func (w *Writer[K, V]) LocateIn(ctx context.Context, st Store, recs []sink.Record[K, V], cause error) error {
	tx, err := st.Begin(ctx)
	if err != nil {
		return cause
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return w.Locate(ctx, tx, recs, cause)
}

// Idempotent is offsets mode over a Store: the coordinates table created
// once, read, and written with the rows in one transaction.
type Idempotent[K, V any] struct {
	st Store
	w  *Writer[K, V]
	o  Offsets

	mu      sync.Mutex
	created bool

	// BeforeCommit, set by tests, runs between the writes and COMMIT.
	BeforeCommit func()
}

// NewIdempotent returns offsets mode for w's table in st, coordinates in o.
func NewIdempotent[K, V any](st Store, w *Writer[K, V], o Offsets) *Idempotent[K, V] {
	return &Idempotent[K, V]{st: st, w: w, o: o}
}

func (m *Idempotent[K, V]) ensure(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.created {
		return nil
	}
	if err := m.st.Exec(ctx, m.o.CreateSQL()); err != nil {
		// PostgreSQL: two sinks creating the table at once may collide
		// on the catalog's unique index, and then it exists.
		if c, code, _ := m.w.d.Classify(err); c != Data || code != "23505" {
			return fmt.Errorf("%s: create the offsets table: %w", m.w.d.Name, m.w.Classify(err))
		}
	}
	m.created = true
	return nil
}

// Offsets returns the next offset to write of each partition of topic
// that sinkName stored.
func (m *Idempotent[K, V]) Offsets(ctx context.Context, sinkName, topic string) (map[int32]int64, error) {
	if err := m.ensure(ctx); err != nil {
		return nil, err
	}
	q, args := m.o.ReadSQL(sinkName, topic)
	out, err := m.st.Pairs(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: read offsets: %w", m.w.d.Name, m.w.Classify(err))
	}
	return out, nil
}

// Write stores records and next in one transaction, skipping records below
// their partition's stored next offset.
func (m *Idempotent[K, V]) Write(ctx context.Context, sinkName, topic string, records []sink.Record[K, V], next map[int32]int64) error {
	if err := m.ensure(ctx); err != nil {
		return err
	}
	tx, err := m.st.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", m.w.d.Name, m.w.Classify(err))
	}
	kept, idx, err := Write(ctx, tx, m.w, m.o, sinkName, topic, records, next)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		if IsData(err) {
			return Reindex(m.w.LocateIn(ctx, m.st, kept, err), idx)
		}
		return Reindex(err, idx)
	}
	if m.BeforeCommit != nil {
		m.BeforeCommit()
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: commit: %w", m.w.d.Name, m.w.Classify(err))
	}
	return nil
}
