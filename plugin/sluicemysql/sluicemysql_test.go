package sluicemysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/sqlsink/sqlsinktest"
	"github.com/sluice-streams/sluice/internal/testdb"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/sink"
)

type bill = sqlsinktest.Bill

func harness(t testing.TB) *sqlsinktest.Harness {
	m := testdb.StartMariaDB(t)
	// The reader is root on the socket: KillConnections(the sink's user)
	// spares it.
	reader, err := sql.Open("mysql", m.RootDSN()+testdb.MariaDBDatabase)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	return &sqlsinktest.Harness{
		URL: m.URL(),
		Open: func(ctx context.Context, url string, t sluicedb.Table[string, *bill], maxRows int) (sqlsinktest.Sink, error) {
			return New(ctx, url, t, MaxRows(maxRows))
		},
		Close:      func(s sqlsinktest.Sink) { s.(*Sink[string, *bill]).Close() },
		Hook:       func(s sqlsinktest.Sink, fn func()) { s.(*Sink[string, *bill]).beforePrepare = fn },
		HookCommit: func(s sqlsinktest.Sink, fn func()) { s.(*Sink[string, *bill]).idem.BeforeCommit = fn },
		Reader:     reader,
		Restart:    m.Restart,
		Crash:      m.Crash,
		Kill:       func(ctx context.Context) (int, error) { return m.KillConnections(ctx, m.User()) },
		Text: func(n int) string {
			return "varchar(" + strconv.Itoa(n) + ") CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
		},
		Int:       "bigint",
		Bytes:     "longblob",
		NULInText: true,
	}
}

func TestSuite(t *testing.T) { sqlsinktest.Run(t, harness(t)) }

// The benchmarks: a batch of 1000 rows per operation, through each mode;
// RowPerStatement is the round-trip-per-row baseline batching avoids.
func BenchmarkTwoPhase(b *testing.B)        { sqlsinktest.Bench(b, harness(b), "two_phase", 1000, 0) }
func BenchmarkOffsets(b *testing.B)         { sqlsinktest.Bench(b, harness(b), "offsets", 1000, 0) }
func BenchmarkRowPerStatement(b *testing.B) { sqlsinktest.Bench(b, harness(b), "two_phase", 1000, 1) }

// TestAttached: a transaction prepared by a session still open is not
// reported as ErrNotPrepared (which the runtime would take for "already
// resolved") but as ErrAttached, and commits once that session ends.
func TestAttached(t *testing.T) {
	m := testdb.StartMariaDB(t)
	ctx := context.Background()
	s, err := New(ctx, m.URL(), sqlsinktest.BillsTable("attached", "varchar(64)", "bigint"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"XA START 'held'", "INSERT INTO attached (bill_id, account, cents) VALUES ('b', 'a', 1)", "XA END 'held'", "XA PREPARE 'held'"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := s.CommitPrepared(short, "held"); !errors.Is(err, ErrAttached) || errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("CommitPrepared of an attached transaction = %v, want ErrAttached", err)
	}
	// Control: an id nobody prepared is ErrNotPrepared at once.
	if err := s.CommitPrepared(ctx, "nobody"); !errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("CommitPrepared of an unknown id = %v", err)
	}
	_ = c.Raw(func(any) error { return driver.ErrBadConn }) // end the session
	c.Close()
	if err := s.CommitPrepared(ctx, "held"); err != nil {
		t.Fatalf("CommitPrepared once the session ended = %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM attached").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows, %v", n, err)
	}
}
