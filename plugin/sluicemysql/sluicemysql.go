package sluicemysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-streams/sluice/internal/sqlsink"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/sink"
)

// Sink writes records into one MySQL or MariaDB table. It is safe for
// concurrent use.
type Sink[K, V any] struct {
	db   *sql.DB
	url  sluicedb.URL
	w    *sqlsink.Writer[K, V]
	idem *sqlsink.Idempotent[K, V]

	// mine holds the ids this sink prepared and whose session ended, until
	// resolved: those need no wait for another session.
	mine sync.Map

	mu struct {
		sync.Mutex
		held   map[string]*heldTxn // by id
		closed bool
	}
	// maxHeld bounds the sessions held, so that a bounded pool keeps a
	// connection for the next Prepare; holdFor is how long a session is
	// held before it is ended (a field for tests).
	maxHeld  int
	holdFor  time.Duration
	releases sync.WaitGroup // the timers' ends of held sessions

	// beforePrepare, set by tests, runs between XA END and XA PREPARE.
	beforePrepare func()
}

// heldTxn is a prepared transaction still attached to the session that
// prepared it, which Prepare keeps open so that CommitPrepared or
// RollbackPrepared resolves it there.
type heldTxn struct {
	c       *sql.Conn
	session int64
	timer   *time.Timer
}

// holdFor is how long Prepare holds a session by default: longer than a
// Kafka commit takes, and shorter than the 10s another process's recovery
// of the id waits for the session to end (resolve).
const holdFor = 5 * time.Second

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
	maxConns     int
}

// OffsetsTable names offsets mode's coordinates table (default
// sluice_sink_offsets).
func OffsetsTable(name string) Opt { return func(c *config) { c.offsetsTable = name } }

// MaxRows bounds the rows of one statement (default 1000).
func MaxRows(n int) Opt { return func(c *config) { c.maxRows = n } }

// MaxConns bounds the open connections (default: database/sql's, none).
func MaxConns(n int) Opt { return func(c *config) { c.maxConns = n } }

func quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

var dialect = sqlsink.Dialect{
	Name:         "sluicemysql",
	Quote:        quote,
	Placeholder:  func(int) string { return "?" },
	OnConflict:   func(string) string { return " ON DUPLICATE KEY UPDATE " },
	Excluded:     func(col string) string { return "VALUES(" + col + ")" },
	MaxParams:    65535,
	PointDeletes: true,
	Classify:     classify,
}

// dataErrors are server errors about a row's values whose SQLSTATE is not
// of class 22 or 23 (MySQL gives several HY000).
var dataErrors = []uint16{
	1048, // column cannot be null
	1062, // duplicate entry
	1264, // out of range
	1265, // data truncated
	1292, // incorrect value
	1364, // field has no default
	1366, // incorrect string or integer value
	1406, // data too long
	1451, // a foreign key's parent row
	1452, // a foreign key's child row
	1690, // value out of range
	3819, // check constraint (MySQL)
	4025, // check constraint (MariaDB)
}

// connErrors are server errors that end the session.
var connErrors = []uint16{
	1053, // server shutdown in progress
	1927, // connection was killed (KILL CONNECTION)
	4031, // disconnected for inactivity
}

func classify(err error) (sqlsink.Class, string, string) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		code := strconv.Itoa(int(me.Number))
		state := string(me.SQLState[:])
		switch {
		case strings.HasPrefix(state, "22"), strings.HasPrefix(state, "23"), slices.Contains(dataErrors, me.Number):
			return sqlsink.Data, code, me.Message
		case strings.HasPrefix(state, "08"), slices.Contains(connErrors, me.Number):
			return sqlsink.Conn, code, me.Message
		}
		return sqlsink.Other, code, me.Message
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return sqlsink.Other, "", err.Error()
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return sqlsink.Conn, "", err.Error()
	}
	if errors.Is(err, mysql.ErrPktTooLarge) {
		return sqlsink.Other, "", err.Error()
	}
	// The driver's other errors without a server error are about the
	// connection (a broken packet sequence, a busy buffer).
	return sqlsink.Conn, "", err.Error()
}

// New connects to the database rawURL names (see sluicedb.ParseURL; its
// query parameters are go-sql-driver/mysql's DSN parameters, e.g. tls) and
// returns a sink of table t's rows, after creating the table when t.Create
// is set. A database it cannot reach is an error naming the URL without
// its password.
func New[K, V any](ctx context.Context, rawURL string, t sluicedb.Table[K, V], opts ...Opt) (*Sink[K, V], error) {
	cfg := config{offsetsTable: sqlsink.DefaultOffsetsTable}
	for _, o := range opts {
		o(&cfg)
	}
	u, err := sluicedb.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "mysql" {
		return nil, fmt.Errorf("sluicemysql: %s is not a mysql:// URL", u.Redacted())
	}
	mc, err := driverConfig(u)
	if err != nil {
		return nil, err
	}
	w, err := sqlsink.New(t, dialect, cfg.maxRows)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("sluicemysql: %s: %w", u.Redacted(), err)
	}
	db := sql.OpenDB(conn)
	if cfg.maxConns > 0 {
		db.SetMaxOpenConns(cfg.maxConns)
	}
	s := &Sink[K, V]{db: db, url: u, w: w, holdFor: holdFor,
		idem: sqlsink.NewIdempotent(sqlsink.Store(store{db}), w, sqlsink.NewOffsets(dialect, cfg.offsetsTable))}
	s.mu.held = map[string]*heldTxn{}
	s.maxHeld = math.MaxInt
	if cfg.maxConns > 0 {
		s.maxHeld = cfg.maxConns - 1 // never all: one for the next Prepare
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sluicemysql: connect to %s: %w: %w", u.Redacted(), sluicedb.ErrConnection, err)
	}
	if t.Create {
		if _, err := db.ExecContext(ctx, w.CreateSQL()); err != nil {
			db.Close()
			return nil, fmt.Errorf("sluicemysql: create table %s: %w", t.Name, err)
		}
	}
	return s, nil
}

// driverConfig is u in the driver's terms, with interpolateParams on so
// that a statement with arguments is one round trip rather than three
// (prepare, execute, close).
func driverConfig(u sluicedb.URL) (*mysql.Config, error) {
	mc := mysql.NewConfig()
	if len(u.Params) > 0 {
		p, err := mysql.ParseDSN("/?" + u.Params.Encode())
		if err != nil {
			return nil, fmt.Errorf("sluicemysql: the parameters of %s: %w", u.Redacted(), err)
		}
		mc = p
	}
	mc.User, mc.Passwd, mc.Net, mc.DBName = u.User, u.Password, "tcp", u.Database
	mc.Addr = net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
	if !u.Params.Has("interpolateParams") {
		mc.InterpolateParams = true
	}
	return mc, nil
}

// Close ends the sessions it holds (their transactions stay prepared, for
// recovery) and closes the connection pool.
func (s *Sink[K, V]) Close() error {
	s.mu.Lock()
	s.mu.closed = true
	held := s.mu.held
	s.mu.held = nil
	s.mu.Unlock()
	for _, h := range held {
		h.timer.Stop()
		end(h.c) // detached, still prepared: resolved by recovery
	}
	s.releases.Wait()
	return s.db.Close()
}

// Ping checks that the database answers (sink.Pinger: sluice pings its
// sinks when it starts); its error names the URL without its password.
func (s *Sink[K, V]) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("sluicemysql: connect to %s: %w: %w", s.url.Redacted(), sluicedb.ErrConnection, err)
	}
	return nil
}

// DB is the sink's connection pool, for reads beside it.
func (s *Sink[K, V]) DB() *sql.DB { return s.db }

type connExec struct{ c *sql.Conn }

func (e connExec) Exec(ctx context.Context, q string, args ...any) error {
	_, err := e.c.ExecContext(ctx, q, args...)
	return err
}

// Prepare writes records in a new XA transaction and prepares it as xid.
//
// It runs on a session of its own. A prepared XA transaction stays
// attached to its session, which can start no other, until the session
// resolves it or ends; closing a session whose XA transaction is not
// prepared rolls it back. Prepare holds the session open (hold), so that
// CommitPrepared or RollbackPrepared resolves the transaction on it: no
// other session has to resolve a transaction whose session is ending.
// MariaDB 10.11 loses one that another session commits while the
// preparing session is still ending (XA COMMIT answers OK, the rows never
// appear), and watching for the end (waitEnded) reads InnoDB's status,
// which crashed the server when a session ended during the read (SHOW
// ENGINE INNODB STATUS segfaulted MariaDB 10.11.19 once in CI, and three
// times in some 500 runs of TestCommitRightAfterPrepare here, each of 600
// prepares). A session Prepare cannot hold (the sink closed, or MaxConns
// leaves no room) ends before Prepare returns, and Prepare waits until it
// has.
func (s *Sink[K, V]) Prepare(ctx context.Context, xid string, records []sink.Record[K, V]) error {
	if err := sqlsink.CheckXID(dialect.Name, xid); err != nil {
		return err
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sluicemysql: prepare %s: %w: %w", xid, sluicedb.ErrConnection, err)
	}
	var session int64
	err = c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&session)
	if err == nil {
		err = s.prepareOn(ctx, connExec{c}, xid, records)
	} else {
		err = fmt.Errorf("sluicemysql: prepare %s: %w", xid, s.w.Classify(err))
	}
	if err == nil && s.hold(xid, c, session) {
		return nil
	}
	end(c)
	var gone error
	if session != 0 {
		gone = s.waitEnded(ctx, session, time.Now().Add(10*time.Second))
	}
	var failed *prepareFailed
	switch {
	case err == nil && gone == nil:
		s.mine.Store(xid, struct{}{})
		return nil
	case err == nil:
		return sqlsink.Unprepare(ctx, fmt.Errorf("sluicemysql: prepare %s: %w: %w", xid, ErrAttached, gone),
			func(ctx context.Context) error { return s.RollbackPrepared(ctx, xid) })
	case sqlsink.IsData(err):
		return s.w.LocateIn(ctx, store{s.db}, records, err)
	case errors.As(err, &failed):
		// XA PREPARE's answer was lost: it may have prepared.
		return sqlsink.Unprepare(ctx, failed.err, func(ctx context.Context) error { return s.RollbackPrepared(ctx, xid) })
	default:
		return err
	}
}

// end closes c's session rather than pooling it.
func end(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

// hold keeps c, whose session prepared xid, until CommitPrepared or
// RollbackPrepared takes it (take), or holdFor passes: then it ends the
// session, as Prepare would have, so that a new owner of the task in
// another process can resolve the transaction (the runtime leaves one
// whose Kafka commit's outcome it does not know to the recovery). It
// reports false, holding nothing, when the sink is closed or holds
// maxHeld sessions.
func (s *Sink[K, V]) hold(xid string, c *sql.Conn, session int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.held) >= s.maxHeld {
		return false
	}
	h := &heldTxn{c: c, session: session}
	h.timer = time.AfterFunc(s.holdFor, func() {
		s.mu.Lock()
		if s.mu.held[xid] != h { // taken, or the sink closed
			s.mu.Unlock()
			return
		}
		delete(s.mu.held, xid)
		s.releases.Add(1) // before Close's Wait: Close sets closed under mu
		s.mu.Unlock()
		defer s.releases.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.release(ctx, xid, h)
	})
	s.mu.held[xid] = h
	return true
}

// take returns the held session of xid, if any, and forgets it.
func (s *Sink[K, V]) take(xid string) *heldTxn {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.mu.held[xid]
	if h != nil {
		delete(s.mu.held, xid)
		h.timer.Stop()
	}
	return h
}

// release ends h's session; once the server has ended it, xid needs no
// wait for other sessions when this sink resolves it.
func (s *Sink[K, V]) release(ctx context.Context, xid string, h *heldTxn) {
	end(h.c)
	if s.waitEnded(ctx, h.session, time.Now().Add(10*time.Second)) == nil {
		s.mine.Store(xid, struct{}{})
	}
}

// prepareFailed is an error of XA PREPARE itself.
type prepareFailed struct{ err error }

func (e *prepareFailed) Error() string { return e.err.Error() }
func (e *prepareFailed) Unwrap() error { return e.err }

func (s *Sink[K, V]) prepareOn(ctx context.Context, ex connExec, xid string, records []sink.Record[K, V]) error {
	lit := "'" + xid + "'"
	// A statement that waits for a lock ends when ctx does: once its
	// session is closed the server would otherwise go on waiting, up to
	// innodb_lock_wait_timeout (50s), with the locks it already took.
	if d, ok := ctx.Deadline(); ok {
		secs := max(1, int(math.Ceil(time.Until(d).Seconds())))
		if err := ex.Exec(ctx, "SET SESSION innodb_lock_wait_timeout = "+strconv.Itoa(secs)); err != nil {
			return fmt.Errorf("sluicemysql: prepare %s: %w", xid, s.w.Classify(err))
		}
	}
	if err := ex.Exec(ctx, "XA START "+lit); err != nil {
		return fmt.Errorf("sluicemysql: prepare %s: %w", xid, s.w.Classify(err))
	}
	if err := s.w.Write(ctx, ex, records); err != nil {
		return err
	}
	if err := ex.Exec(ctx, "XA END "+lit); err != nil {
		return fmt.Errorf("sluicemysql: prepare %s: %w", xid, s.w.Classify(err))
	}
	if s.beforePrepare != nil {
		s.beforePrepare()
	}
	if err := ex.Exec(ctx, "XA PREPARE "+lit); err != nil {
		return &prepareFailed{fmt.Errorf("sluicemysql: prepare %s: %w", xid, s.w.Classify(err))}
	}
	return nil
}

// waitEnded waits until the server has ended session, until deadline:
// the session is gone from the processlist, and InnoDB no longer shows a
// transaction attached to it (SHOW ENGINE INNODB STATUS). The second comes
// after the first: MariaDB takes a session off the processlist, and marks
// its prepared XA transaction detached for other sessions' XA COMMIT,
// before InnoDB detaches it; an XA COMMIT in between answers OK and commits
// nothing, leaving the transaction prepared in InnoDB and unknown to XA
// RECOVER until the server restarts (seen: about 1 in 10,000 commits issued
// right after their Prepare on a busy machine).
func (s *Sink[K, V]) waitEnded(ctx context.Context, session int64, deadline time.Time) error {
	wait := time.Millisecond
	for {
		ended, err := s.ended(ctx, session)
		if err != nil {
			return fmt.Errorf("sluicemysql: wait for session %d to end: %w", session, err)
		}
		if ended {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sluicemysql: session %d has not ended in time", session)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sluicemysql: wait for session %d to end: %w", session, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// ended reports whether session is gone from the processlist and from
// InnoDB's transactions.
func (s *Sink[K, V]) ended(ctx context.Context, session int64) (bool, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.processlist WHERE id = ?", session).Scan(&n)
	if err != nil {
		return false, s.w.Classify(err)
	}
	if n > 0 {
		return false, nil
	}
	attached, err := s.attached(ctx)
	return !slices.Contains(attached, session), err
}

// threadID finds the session of a transaction in SHOW ENGINE INNODB
// STATUS: "MariaDB thread id 7, OS thread handle ..." ("MySQL thread id"
// on MySQL) under a transaction attached to session 7; a detached one has
// no such line.
var threadID = regexp.MustCompile(`(?:MariaDB|MySQL) thread id (\d+),`)

// attached lists the sessions InnoDB has a started transaction attached
// to. Without the PROCESS privilege InnoDB's status is not readable, and it
// lists none.
func (s *Sink[K, V]) attached(ctx context.Context) ([]int64, error) {
	var typ, name, status string
	err := s.db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1227 {
		return nil, nil
	}
	if err != nil {
		return nil, s.w.Classify(err)
	}
	var ids []int64
	// A transaction is a block from "---TRANSACTION id, state" on; MySQL
	// lists its idle sessions' as "not started".
	for _, trx := range strings.Split(status, "---TRANSACTION ")[1:] {
		header, _, _ := strings.Cut(trx, "\n")
		m := threadID.FindStringSubmatch(trx)
		if m == nil || strings.Contains(header, "not started") {
			continue
		}
		if id, err := strconv.ParseInt(m[1], 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// ErrAttached is wrapped by CommitPrepared and RollbackPrepared when the
// transaction is prepared but still attached to the session that prepared
// it (MySQL and MariaDB answer XAER_NOTA to every other session until that
// one ends): retry later. Another process's sink sees it while the sink
// that prepared holds its session (up to 5s unresolved, see hold), or
// while that process is stuck or dying. Prepare wraps it too in the rare
// case where a session it could not hold did not end in time.
var ErrAttached = errors.New("sluicemysql: the transaction is prepared but still attached to another session")

func (s *Sink[K, V]) resolve(ctx context.Context, verb, xid string) error {
	if err := sqlsink.CheckXID(dialect.Name, xid); err != nil {
		return err
	}
	if h := s.take(xid); h != nil {
		_, err := h.c.ExecContext(ctx, verb+" '"+xid+"'")
		// Closed even when resolved: Prepare set session variables.
		if err == nil {
			end(h.c)
			return nil
		}
		// Its answer lost, or refused: resolved (or found resolved) from
		// another session once this one has ended.
		s.release(ctx, xid, h)
	}
	deadline := time.Now().Add(10 * time.Second)
	// An id this sink did not prepare may belong to a session that is
	// still ending (a crashed or killed process): wait for it first.
	if _, mine := s.mine.LoadAndDelete(xid); !mine {
		if err := s.quiesce(ctx, deadline); err != nil {
			return fmt.Errorf("sluicemysql: %s %s: %w", strings.ToLower(verb), xid, err)
		}
	}
	for {
		_, err := s.db.ExecContext(ctx, verb+" '"+xid+"'")
		if err == nil {
			return nil
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1397 { // XAER_NOTA
			return fmt.Errorf("sluicemysql: %s %s: %w", strings.ToLower(verb), xid, s.w.Classify(err))
		}
		// XAER_NOTA: not prepared, or prepared and attached to a session
		// that has not ended yet; XA RECOVER lists the second.
		ids, rerr := s.Prepared(ctx, xid)
		if rerr != nil {
			return fmt.Errorf("sluicemysql: %s %s: %w", strings.ToLower(verb), xid, rerr)
		}
		if !slices.Contains(ids, xid) {
			return fmt.Errorf("sluicemysql: %s %s: %w", strings.ToLower(verb), xid, sink.ErrNotPrepared)
		}
		if err := s.quiesce(ctx, deadline); err != nil {
			return fmt.Errorf("sluicemysql: %s %s: %w", strings.ToLower(verb), xid, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sluicemysql: %s %s: %w", strings.ToLower(verb), xid, ErrAttached)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sluicemysql: %s %s: %w (%w)", strings.ToLower(verb), xid, ErrAttached, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// quiesce waits until every session of this user that has an InnoDB
// transaction now has ended, and so has every session of any user that is
// off the processlist with its transaction still attached, for the reason
// Prepare waits for its own: a prepared transaction's session must be gone
// before another session resolves it. It needs the PROCESS privilege to
// read InnoDB's status; without it, it does not wait.
func (s *Sink[K, V]) quiesce(ctx context.Context, deadline time.Time) error {
	attached, err := s.attached(ctx)
	if err != nil || len(attached) == 0 {
		return err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, user = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)
		FROM information_schema.processlist`)
	if err != nil {
		return s.w.Classify(err)
	}
	live := map[int64]bool{} // session: of this user
	for rows.Next() {
		var id int64
		var mine bool
		if err := rows.Scan(&id, &mine); err != nil {
			rows.Close()
			return s.w.Classify(err)
		}
		live[id] = mine
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s.w.Classify(err)
	}
	for _, id := range attached {
		if mine, ok := live[id]; ok && !mine {
			continue
		}
		if err := s.waitEnded(ctx, id, deadline); err != nil {
			return fmt.Errorf("%w: %w", ErrAttached, err)
		}
	}
	return nil
}

// CommitPrepared commits the prepared XA transaction xid.
func (s *Sink[K, V]) CommitPrepared(ctx context.Context, xid string) error {
	return s.resolve(ctx, "XA COMMIT", xid)
}

// RollbackPrepared rolls back the prepared XA transaction xid.
func (s *Sink[K, V]) RollbackPrepared(ctx context.Context, xid string) error {
	return s.resolve(ctx, "XA ROLLBACK", xid)
}

// Prepared lists the XA transactions prepared on the server under an id
// (gtrid) starting with prefix.
func (s *Sink[K, V]) Prepared(ctx context.Context, prefix string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return nil, fmt.Errorf("sluicemysql: xa recover: %w", s.w.Classify(err))
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var format, glen, blen int
		var data []byte
		if err := rows.Scan(&format, &glen, &blen, &data); err != nil {
			return nil, fmt.Errorf("sluicemysql: xa recover: %w", err)
		}
		if glen > len(data) {
			glen = len(data)
		}
		if id := string(data[:glen]); blen == 0 && strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sluicemysql: xa recover: %w", s.w.Classify(err))
	}
	return ids, nil
}

// store is the pool as sqlsink sees it.
type store struct{ db *sql.DB }

func (st store) Exec(ctx context.Context, q string, args ...any) error {
	_, err := st.db.ExecContext(ctx, q, args...)
	return err
}

func (st store) Pairs(ctx context.Context, q string, args ...any) (map[int32]int64, error) {
	return pairs(st.db.QueryContext(ctx, q, args...))
}

func (st store) Begin(ctx context.Context) (sqlsink.Txn, error) {
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return txn{tx}, nil
}

// txn is a database/sql transaction as sqlsink sees it.
type txn struct{ tx *sql.Tx }

func (t txn) Exec(ctx context.Context, q string, args ...any) error {
	_, err := t.tx.ExecContext(ctx, q, args...)
	return err
}

func (t txn) Pairs(ctx context.Context, q string, args ...any) (map[int32]int64, error) {
	return pairs(t.tx.QueryContext(ctx, q, args...))
}

func (t txn) Commit(context.Context) error   { return t.tx.Commit() }
func (t txn) Rollback(context.Context) error { return t.tx.Rollback() }

func pairs(rows *sql.Rows, err error) (map[int32]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			return nil, err
		}
		out[p] = n
	}
	return out, rows.Err()
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
