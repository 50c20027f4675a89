package sluicepg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluice-streams/sluice/internal/sqlsink"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/sink"
)

// Sink writes records into one PostgreSQL table. It is safe for concurrent
// use.
type Sink[K, V any] struct {
	pool    *pgxpool.Pool
	url     sluicedb.URL
	w       *sqlsink.Writer[K, V]
	offsets sqlsink.Offsets
	offSQL  string

	offOnce sync.Mutex
	offDone bool

	// beforePrepare, set by tests, runs between the batch and PREPARE
	// TRANSACTION.
	beforePrepare func()
}

var (
	_ sink.Participant[string, string] = (*Sink[string, string])(nil)
	_ sink.Idempotent[string, string]  = (*Sink[string, string])(nil)
)

// Opt configures New.
type Opt func(*config)

type config struct {
	offsetsTable string
	maxRows      int
	maxConns     int32
}

// OffsetsTable names offsets mode's coordinates table (default
// sluice_sink_offsets).
func OffsetsTable(name string) Opt { return func(c *config) { c.offsetsTable = name } }

// MaxRows bounds the rows of one statement (default 1000; PostgreSQL's
// 65535 parameters bound it too).
func MaxRows(n int) Opt { return func(c *config) { c.maxRows = n } }

// MaxConns bounds the connection pool (default pgxpool's: 4, or the CPU
// count if larger). Each task's Prepare holds one connection.
func MaxConns(n int) Opt { return func(c *config) { c.maxConns = int32(n) } }

var dialect = sqlsink.Dialect{
	Name:        "sluicepg",
	Quote:       func(s string) string { return pgx.Identifier{s}.Sanitize() },
	Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
	OnConflict:  func(pk string) string { return " ON CONFLICT (" + pk + ") DO UPDATE SET " },
	Excluded:    func(col string) string { return "EXCLUDED." + col },
	MaxParams:   65535,
	Classify:    classify,
}

// classify sorts pgx's errors: SQLSTATE classes 22 (data exception) and 23
// (integrity constraint) and client-side encoding failures are the row's;
// class 08, 57P01-57P03 (terminated, shut down) and network failures are
// the connection's.
func classify(err error) (sqlsink.Class, string, string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		msg := pe.Message
		if pe.Detail != "" {
			msg += ": " + pe.Detail
		}
		switch {
		case strings.HasPrefix(pe.Code, "22"), strings.HasPrefix(pe.Code, "23"):
			return sqlsink.Data, pe.Code, msg
		case strings.HasPrefix(pe.Code, "08"), pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03":
			return sqlsink.Conn, pe.Code, msg
		}
		return sqlsink.Other, pe.Code, msg
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return sqlsink.Other, "", err.Error()
	}
	if strings.Contains(err.Error(), "failed to encode args[") {
		return sqlsink.Data, "", err.Error()
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err) {
		return sqlsink.Conn, "", err.Error()
	}
	// What else pgx returns without a server error is about the
	// connection: "conn closed", a failed write, a broken protocol state.
	return sqlsink.Conn, "", err.Error()
}

// New connects to the database rawURL names (see sluicedb.ParseURL; its
// query parameters are pgx's, e.g. sslmode, application_name) and returns
// a sink of table t's rows, after creating the table when t.Create is set.
// A database it cannot reach is an error naming the URL without its
// password.
func New[K, V any](ctx context.Context, rawURL string, t sluicedb.Table[K, V], opts ...Opt) (*Sink[K, V], error) {
	cfg := config{offsetsTable: sqlsink.DefaultOffsetsTable}
	for _, o := range opts {
		o(&cfg)
	}
	u, err := sluicedb.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "postgres" {
		return nil, fmt.Errorf("sluicepg: %s is not a postgres:// URL", u.Redacted())
	}
	w, err := sqlsink.New(t, dialect, cfg.maxRows)
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("sluicepg: %s: %w", u.Redacted(), errors.New(strings.ReplaceAll(err.Error(), u.Password, "xxxxx")))
	}
	if cfg.maxConns > 0 {
		pc.MaxConns = cfg.maxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("sluicepg: connect to %s: %w", u.Redacted(), err)
	}
	s := &Sink[K, V]{pool: pool, url: u, w: w, offsets: sqlsink.NewOffsets(dialect, cfg.offsetsTable)}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sluicepg: connect to %s: %w: %w", u.Redacted(), sluicedb.ErrConnection, err)
	}
	if t.Create {
		if _, err := pool.Exec(ctx, w.CreateSQL()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("sluicepg: create table %s: %w", t.Name, err)
		}
	}
	return s, nil
}

// Close closes the connection pool.
func (s *Sink[K, V]) Close() { s.pool.Close() }

// Pool is the sink's connection pool, for reads beside it.
func (s *Sink[K, V]) Pool() *pgxpool.Pool { return s.pool }

// checkXID keeps ids to what sluice hands out, so that they can be quoted
// as literals (PREPARE TRANSACTION takes no parameter).
func checkXID(xid string) error {
	if xid == "" || len(xid) > sink.MaxXIDLength {
		return fmt.Errorf("sluicepg: transaction id %q: want 1 to %d bytes", xid, sink.MaxXIDLength)
	}
	for _, c := range []byte(xid) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("sluicepg: transaction id %q: only ASCII letters, digits, '-', '_' and '.'", xid)
		}
	}
	return nil
}

// connExec runs statements on one pooled connection.
type connExec struct{ c *pgxpool.Conn }

func (e connExec) Exec(ctx context.Context, q string, args ...any) error {
	_, err := e.c.Exec(ctx, q, args...)
	return err
}

// Prepare writes records in a new transaction and prepares it as xid.
func (s *Sink[K, V]) Prepare(ctx context.Context, xid string, records []sink.Record[K, V]) error {
	if err := checkXID(xid); err != nil {
		return err
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("sluicepg: prepare %s: %w: %w", xid, sluicedb.ErrConnection, err)
	}
	defer c.Release()
	ex := connExec{c}
	fail := func(err error) error {
		// Nothing of the transaction may remain: roll it back, and if the
		// connection cannot, close it (the server then rolls back).
		if rerr := ex.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			c.Conn().Close(context.WithoutCancel(ctx))
		}
		return err
	}
	if err := ex.Exec(ctx, "BEGIN"); err != nil {
		return fail(s.w.Classify(err))
	}
	if err := s.w.Write(ctx, ex, records); err != nil {
		if !sqlsink.IsData(err) {
			return fail(err)
		}
		_ = fail(err)
		return s.locate(ctx, records, err)
	}
	if s.beforePrepare != nil {
		s.beforePrepare()
	}
	tag, err := c.Exec(ctx, "PREPARE TRANSACTION '"+xid+"'")
	if err != nil {
		c.Conn().Close(context.WithoutCancel(ctx))
		return s.unprepare(ctx, xid, fmt.Errorf("sluicepg: prepare %s: %w", xid, s.w.Classify(err)))
	}
	// PostgreSQL answers PREPARE TRANSACTION in a failed transaction with
	// a rollback, not an error.
	if tag.String() != "PREPARE TRANSACTION" {
		return fmt.Errorf("sluicepg: prepare %s: the transaction was rolled back (%s)", xid, tag)
	}
	return nil
}

// unprepare rolls back xid in case PREPARE TRANSACTION reached the server
// but its answer was lost, so that a failed Prepare leaves nothing. If the
// database cannot be reached, the transaction may remain prepared; the
// runtime's recovery (Prepared, then RollbackPrepared of what the Kafka
// commit did not record) removes it.
func (s *Sink[K, V]) unprepare(ctx context.Context, xid string, cause error) error {
	err := s.RollbackPrepared(context.WithoutCancel(ctx), xid)
	if err == nil || errors.Is(err, sink.ErrNotPrepared) {
		return cause
	}
	return fmt.Errorf("%w (and it may remain prepared: %v)", cause, err)
}

// locate finds the record behind a data error, in a transaction rolled
// back afterwards.
func (s *Sink[K, V]) locate(ctx context.Context, records []sink.Record[K, V], cause error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return cause
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	return s.w.Locate(ctx, txExec{tx}, records, cause)
}

func (s *Sink[K, V]) resolve(ctx context.Context, verb, xid string) error {
	if err := checkXID(xid); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, verb+" '"+xid+"'")
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42704" { // undefined_object
		return fmt.Errorf("sluicepg: %s %s: %w", strings.ToLower(verb), xid, sink.ErrNotPrepared)
	}
	return fmt.Errorf("sluicepg: %s %s: %w", strings.ToLower(verb), xid, s.w.Classify(err))
}

// CommitPrepared commits the prepared transaction xid.
func (s *Sink[K, V]) CommitPrepared(ctx context.Context, xid string) error {
	return s.resolve(ctx, "COMMIT PREPARED", xid)
}

// RollbackPrepared rolls back the prepared transaction xid.
func (s *Sink[K, V]) RollbackPrepared(ctx context.Context, xid string) error {
	return s.resolve(ctx, "ROLLBACK PREPARED", xid)
}

// Prepared lists the transactions of this database prepared under an id
// starting with prefix.
func (s *Sink[K, V]) Prepared(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.pool.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND starts_with(gid, $1)", prefix)
	if err != nil {
		return nil, fmt.Errorf("sluicepg: list prepared transactions: %w", s.w.Classify(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("sluicepg: list prepared transactions: %w", s.w.Classify(err))
	}
	return ids, nil
}

// txExec runs statements in a pgx transaction.
type txExec struct{ tx pgx.Tx }

func (e txExec) Exec(ctx context.Context, q string, args ...any) error {
	_, err := e.tx.Exec(ctx, q, args...)
	return err
}

func (e txExec) Pairs(ctx context.Context, q string, args ...any) (map[int32]int64, error) {
	rows, err := e.tx.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var p int32
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&p, &n}, func() error { out[p] = n; return nil })
	return out, err
}

func (s *Sink[K, V]) ensureOffsets(ctx context.Context) error {
	s.offOnce.Lock()
	defer s.offOnce.Unlock()
	if s.offDone {
		return nil
	}
	if _, err := s.pool.Exec(ctx, s.offsets.CreateSQL()); err != nil {
		// Two sinks creating the table at once may collide on the
		// catalog's unique index; the table exists then.
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "23505" {
			return fmt.Errorf("sluicepg: create the offsets table: %w", s.w.Classify(err))
		}
	}
	s.offDone = true
	return nil
}

// Offsets returns the next offset to write of each partition of topic that
// sink stored.
func (s *Sink[K, V]) Offsets(ctx context.Context, sinkName, topic string) (map[int32]int64, error) {
	if err := s.ensureOffsets(ctx); err != nil {
		return nil, err
	}
	q, args := s.offsets.ReadSQL(sinkName, topic)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sluicepg: read offsets: %w", s.w.Classify(err))
	}
	out := map[int32]int64{}
	var p int32
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&p, &n}, func() error { out[p] = n; return nil }); err != nil {
		return nil, fmt.Errorf("sluicepg: read offsets: %w", s.w.Classify(err))
	}
	return out, nil
}

// Write stores records and next in one transaction, skipping records below
// their partition's stored next offset.
func (s *Sink[K, V]) Write(ctx context.Context, sinkName, topic string, records []sink.Record[K, V], next map[int32]int64) error {
	if err := s.ensureOffsets(ctx); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("sluicepg: begin: %w", s.w.Classify(err))
	}
	kept, idx, err := sqlsink.Write(ctx, txExec{tx}, s.w, s.offsets, sinkName, topic, records, next)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		if sqlsink.IsData(err) {
			return sqlsink.Reindex(s.locate(ctx, kept, err), idx)
		}
		return sqlsink.Reindex(err, idx)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("sluicepg: commit: %w", s.w.Classify(err))
	}
	return nil
}
