package sluicepg

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluice-streams/sluice/internal/sqlsink/sqlsinktest"
	"github.com/sluice-streams/sluice/internal/testdb"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
)

// appName marks the sink's sessions, the ones the suite terminates.
const appName = "sluicepg-test-sink"

type bill = sqlsinktest.Bill

func harness(t testing.TB) *sqlsinktest.Harness {
	pg := testdb.StartPostgres(t)
	pool, err := pgxpool.New(context.Background(), pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	reader := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { reader.Close(); pool.Close() })
	return &sqlsinktest.Harness{
		URL: pg.URL() + "&application_name=" + appName,
		Open: func(ctx context.Context, url string, t sluicedb.Table[string, *bill], maxRows int) (sqlsinktest.Sink, error) {
			return New(ctx, url, t, MaxRows(maxRows))
		},
		Close:      func(s sqlsinktest.Sink) { s.(*Sink[string, *bill]).Close() },
		Hook:       func(s sqlsinktest.Sink, fn func()) { s.(*Sink[string, *bill]).beforePrepare = fn },
		HookCommit: func(s sqlsinktest.Sink, fn func()) { s.(*Sink[string, *bill]).idem.BeforeCommit = fn },
		Reader:     reader,
		Restart:    pg.Restart,
		Crash:      pg.Crash,
		Kill:       func(ctx context.Context) (int, error) { return pg.TerminateSessions(ctx, appName) },
		Text:       func(n int) string { return "varchar(" + strconv.Itoa(n) + ")" },
		Int:        "bigint",
		Bytes:      "bytea",
	}
}

func TestSuite(t *testing.T) { sqlsinktest.Run(t, harness(t)) }

// TestApp: the sink under sluice's runtime, rows refused, sessions
// terminated and the server restarted (sqlsinktest.RunApp).
func TestApp(t *testing.T) { sqlsinktest.RunApp(t, harness(t)) }

// The benchmarks: a batch of 1000 rows per operation, through each mode;
// RowPerStatement is the round-trip-per-row baseline batching avoids.
func BenchmarkTwoPhase(b *testing.B)        { sqlsinktest.Bench(b, harness(b), "two_phase", 1000, 0) }
func BenchmarkOffsets(b *testing.B)         { sqlsinktest.Bench(b, harness(b), "offsets", 1000, 0) }
func BenchmarkRowPerStatement(b *testing.B) { sqlsinktest.Bench(b, harness(b), "two_phase", 1000, 1) }

// TestPreparedThisDatabase: Prepared lists the transactions of the sink's
// own database only, although pg_prepared_xacts shows the whole server's
// (the other database's sink sees its own: the control).
func TestPreparedThisDatabase(t *testing.T) {
	pg := testdb.StartPostgres(t)
	ctx := context.Background()
	other, err := pg.CreateDatabase(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(ctx, pg.URL(), sqlsinktest.BillsTable("bills", "varchar(64)", "bigint"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(ctx, other, sqlsinktest.BillsTable("bills", "varchar(64)", "bigint"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.Prepare(ctx, "app-0_1-7", nil); err != nil {
		t.Fatal(err)
	}
	if ids, err := b.Prepared(ctx, "app-"); err != nil || len(ids) != 0 {
		t.Fatalf("the other database's sink lists %v, %v", ids, err)
	}
	if ids, err := a.Prepared(ctx, "app-"); err != nil || len(ids) != 1 {
		t.Fatalf("control: Prepared = %v, %v", ids, err)
	}
	if err := b.CommitPrepared(ctx, "app-0_1-7"); err == nil {
		t.Fatal("a sink committed another database's transaction")
	}
	if err := a.RollbackPrepared(ctx, "app-0_1-7"); err != nil {
		t.Fatal(err)
	}
}

// TestCreateTableRace: instances that start at once with Create all start
// (PostgreSQL's CREATE TABLE IF NOT EXISTS is not atomic: without
// createdMeanwhile, a loser failed with 23505 on the catalog's index, as
// the billing chaos test saw with three instances). Several rounds, each
// on a table of its own, so the race is run many times.
func TestCreateTableRace(t *testing.T) {
	pg := testdb.StartPostgres(t)
	ctx := context.Background()
	const rounds, instances = 10, 6
	for r := range rounds {
		table := sqlsinktest.BillsTable("race_"+strconv.Itoa(r), "varchar(64)", "bigint")
		errs := make(chan error, instances)
		start := make(chan struct{})
		for range instances {
			go func() {
				<-start
				s, err := New(ctx, pg.URL(), table)
				if err == nil {
					s.Close()
				}
				errs <- err
			}()
		}
		close(start)
		for range instances {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", r, err)
			}
		}
	}
	// The control: a real failure of CREATE TABLE still fails.
	bad := sqlsinktest.BillsTable("race_bad", "no_such_type(64)", "bigint")
	if _, err := New(ctx, pg.URL(), bad); err == nil {
		t.Fatal("a table of an unknown type was created")
	}
}
