package sluicepg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

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
	pool *pgxpool.Pool
	url  sluicedb.URL
	w    *sqlsink.Writer[K, V]
	idem *sqlsink.Idempotent[K, V]

	// beforePrepare, set by tests, runs between the batch and PREPARE
	// TRANSACTION.
	beforePrepare func()
}

var (
	_ sink.Participant[string, string] = (*Sink[string, string])(nil)
	_ sink.Idempotent[string, string]  = (*Sink[string, string])(nil)
	_ sink.Pinger                      = (*Sink[string, string])(nil)
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
	s := &Sink[K, V]{pool: pool, url: u, w: w,
		idem: sqlsink.NewIdempotent(sqlsink.Store(store{pool}), w, sqlsink.NewOffsets(dialect, cfg.offsetsTable))}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("sluicepg: connect to %s: %w: %w", u.Redacted(), sluicedb.ErrConnection, err)
	}
	if t.Create {
		if _, err := pool.Exec(ctx, w.CreateSQL()); err != nil && !createdMeanwhile(err) {
			pool.Close()
			return nil, fmt.Errorf("sluicepg: create table %s: %w", t.Name, err)
		}
	}
	return s, nil
}

// createdMeanwhile: CREATE TABLE IF NOT EXISTS run by several instances
// starting at once is not atomic in PostgreSQL: the losers collide on the
// catalog's unique index (23505) or find the relation (42P07) or its row
// type (42710) made, and then the table exists, which is all they asked
// for.
func createdMeanwhile(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42710")
}

// Close closes the connection pool. It returns nil (an error result, like
// sluicemysql's, so that one interface holds both).
func (s *Sink[K, V]) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers (sink.Pinger: sluice pings its
// sinks when it starts); its error names the URL without its password.
func (s *Sink[K, V]) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("sluicepg: connect to %s: %w: %w", s.url.Redacted(), sluicedb.ErrConnection, err)
	}
	return nil
}

// Pool is the sink's connection pool, for reads beside it.
func (s *Sink[K, V]) Pool() *pgxpool.Pool { return s.pool }

// connExec runs statements on one pooled connection.
type connExec struct{ c *pgxpool.Conn }

func (e connExec) Exec(ctx context.Context, q string, args ...any) error {
	_, err := e.c.Exec(ctx, q, args...)
	return err
}

// Prepare writes records in a new transaction and prepares it as xid.
func (s *Sink[K, V]) Prepare(ctx context.Context, xid string, records []sink.Record[K, V]) error {
	if err := sqlsink.CheckXID(dialect.Name, xid); err != nil {
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
		return s.w.LocateIn(ctx, store{s.pool}, records, err)
	}
	if s.beforePrepare != nil {
		s.beforePrepare()
	}
	tag, err := c.Exec(ctx, "PREPARE TRANSACTION '"+xid+"'")
	if err != nil {
		c.Conn().Close(context.WithoutCancel(ctx))
		return sqlsink.Unprepare(ctx, fmt.Errorf("sluicepg: prepare %s: %w", xid, s.w.Classify(err)),
			func(ctx context.Context) error { return s.RollbackPrepared(ctx, xid) })
	}
	// PostgreSQL answers PREPARE TRANSACTION in a failed transaction with
	// a rollback, not an error.
	if tag.String() != "PREPARE TRANSACTION" {
		return fmt.Errorf("sluicepg: prepare %s: the transaction was rolled back (%s)", xid, tag)
	}
	return nil
}

func (s *Sink[K, V]) resolve(ctx context.Context, verb, xid string) error {
	if err := sqlsink.CheckXID(dialect.Name, xid); err != nil {
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

// store is the pool as sqlsink sees it.
type store struct{ p *pgxpool.Pool }

func (st store) Exec(ctx context.Context, q string, args ...any) error {
	_, err := st.p.Exec(ctx, q, args...)
	return err
}

func (st store) Pairs(ctx context.Context, q string, args ...any) (map[int32]int64, error) {
	return pairs(st.p.Query(ctx, q, args...))
}

func (st store) Begin(ctx context.Context) (sqlsink.Txn, error) {
	tx, err := st.p.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return txn{tx}, nil
}

// txn is a pgx transaction as sqlsink sees it.
type txn struct{ tx pgx.Tx }

func (t txn) Exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.Exec(ctx, q, args...)
	return err
}

func (t txn) Pairs(ctx context.Context, q string, args ...any) (map[int32]int64, error) {
	return pairs(t.tx.Query(ctx, q, args...))
}

func (t txn) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t txn) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

func pairs(rows pgx.Rows, err error) (map[int32]int64, error) {
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	var p int32
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&p, &n}, func() error { out[p] = n; return nil })
	return out, err
}

// Offsets returns the next offset to write of each partition of topic that
// sink stored.
func (s *Sink[K, V]) Offsets(ctx context.Context, sinkName, topic string) (map[int32]int64, error) {
	return s.idem.Offsets(ctx, sinkName, topic)
}

// Write stores records and next in one transaction, skipping records below
// their partition's stored next offset.
func (s *Sink[K, V]) Write(ctx context.Context, sinkName, topic string, records []sink.Record[K, V], next map[int32]int64) error {
	return s.idem.Write(ctx, sinkName, topic, records, next)
}
