//go:build unix

package integration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluice-streams/sluice/internal/testdb"
)

// dbFixture is a correct run, made up: an input log, the committed outputs
// a correct application would have written for it, and the rows it would
// leave in the database. The checker tests write the rows into a real
// server, read them back with the reader and check them, then break them
// one way at a time: each break must be reported.
type dbFixture struct {
	topics  Topics
	input   []InputRecord
	oracle  dbOracle
	out     committedOutputs
	lso     map[string]map[int32]int64
	bills   []dbBill          // the rows of bills_accepted
	totals  map[string]Totals // the rows of account_totals
	ordered map[int32][]dbBill
}

func newDBFixture(t *testing.T) dbFixture {
	t.Helper()
	f := dbFixture{topics: DefaultTopics(), totals: map[string]Totals{}, ordered: map[int32][]dbBill{}}
	const parts = 3
	next := map[int32]int64{}
	for i, b := range GenerateBills(7, 400, 12) {
		p := int32(i % parts)
		f.input = append(f.input, InputRecord{Topic: f.topics.Input, Partition: p, Offset: next[p], Key: b.Key, Value: b.Value})
		next[p]++
	}
	f.oracle = newDBOracle(f.input)
	f.out = committedOutputs{accepted: map[string][]committedAt[Accepted]{}, perPart: map[int32]int{}, totals: map[string][]committedAt[Totals]{}}
	accts := sortedKeys(f.oracle.totals)
	partOf := func(acct string) int32 { return int32(slices.Index(accts, acct) % parts) }
	totalsNext := map[int32]int{}
	seen := map[string]bool{}
	for _, r := range f.input {
		b, err := ParseBill(r.Value)
		if err != nil || judge(b) != good || seen[b.BillID] {
			continue
		}
		seen[b.BillID] = true
		p := partOf(b.Account)
		i := f.out.perPart[p]
		f.out.accepted[b.BillID] = []committedAt[Accepted]{{p, int64(2 * i), i, Accepted{Bill: b, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}}}
		f.out.perPart[p]++
		tot := f.totals[b.Account].Add(b)
		f.totals[b.Account] = tot
		f.out.totals[b.Account] = append(f.out.totals[b.Account], committedAt[Totals]{p, int64(totalsNext[p]), totalsNext[p], tot})
		totalsNext[p]++
		row := dbBill{b.BillID, b.Account, b.AmountCents, fmt.Sprint(b.TS), r.Topic, r.Partition, r.Offset}
		f.bills = append(f.bills, row)
		f.ordered[p] = append(f.ordered[p], row)
	}
	f.lso = map[string]map[int32]int64{f.topics.Accepted: {}, f.topics.Totals: {}}
	for p := range int32(parts) {
		f.lso[f.topics.Accepted][p] = int64(2*f.out.perPart[p]) + 1
		f.lso[f.topics.Totals][p] = int64(totalsNext[p])
	}
	if len(f.oracle.bills) < 300 || len(f.bills) != len(f.oracle.bills) {
		t.Fatalf("fixture: %d unique valid bills, %d rows", len(f.oracle.bills), len(f.bills))
	}
	return f
}

// dbAdmin writes the fixture's rows; ph is the driver's placeholder.
type dbAdmin struct {
	exec func(ctx context.Context, q string, args ...any) error
	ph   func(i int) string
	// prepare leaves a prepared transaction named xid holding one row;
	// rollback removes it.
	prepare, rollback func(ctx context.Context, xid string) error
}

func (a dbAdmin) reset(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, q := range []string{
		"DROP TABLE IF EXISTS " + tableAccepted,
		"DROP TABLE IF EXISTS " + tableTotals,
		billingDDL[0], billingDDL[1],
	} {
		if err := a.exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func (a dbAdmin) write(ctx context.Context, t *testing.T, bills []dbBill, totals map[string]Totals) {
	t.Helper()
	a.reset(ctx, t)
	for _, b := range bills {
		q := fmt.Sprintf("INSERT INTO %s VALUES (%s, %s, %s, %s, %s, %s, %s)", tableAccepted, a.ph(1), a.ph(2), a.ph(3), a.ph(4), a.ph(5), a.ph(6), a.ph(7))
		ts := int64(0)
		fmt.Sscan(b.TS, &ts)
		if err := a.exec(ctx, q, b.BillID, b.Account, b.AmountCents, ts, b.SrcTopic, b.SrcPartition, b.SrcOffset); err != nil {
			t.Fatal(err)
		}
	}
	for acct, v := range totals {
		q := fmt.Sprintf("INSERT INTO %s VALUES (%s, %s, %s, %s, %s, %s)", tableTotals, a.ph(1), a.ph(2), a.ph(3), a.ph(4), a.ph(5), a.ph(6))
		if err := a.exec(ctx, q, acct, v.Count, v.SumCents, v.MinCents, v.MaxCents, v.LastBillID); err != nil {
			t.Fatal(err)
		}
	}
}

// runDBCheckerControls checks the fixture as written (clean), then each
// break (reported, with the expected words).
func runDBCheckerControls(t *testing.T, admin dbAdmin, reader dbReader) {
	ctx := testContext(t, 2*time.Minute)
	f := newDBFixture(t)
	check := func(t *testing.T, bills []dbBill, totals map[string]Totals, xid string) (final, sample dbReport) {
		admin.write(ctx, t, bills, totals)
		if xid != "" {
			if err := admin.prepare(ctx, xid); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := admin.rollback(ctx, xid); err != nil {
					t.Error(err)
				}
			}()
		}
		snap, err := reader.snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		prep, err := reader.prepared(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkDBFinal(&final, f.topics.Input, f.oracle, snap, prep)
		checkDBSample(&sample, f.topics, f.out, dbSample{n: 1, at: time.Now(), snap: snap, lso: f.lso})
		return final, sample
	}
	t.Run("clean", func(t *testing.T) {
		final, sample := check(t, f.bills, f.totals, "")
		if !final.ok() || !sample.ok() {
			t.Fatalf("a correct database fails the check:\n%s\n%s", &final, &sample)
		}
		// A prefix of each partition is a correct sample, not a final
		// state.
		var prefix []dbBill
		for _, rows := range f.ordered {
			prefix = append(prefix, rows[:len(rows)/2]...)
		}
		final, sample = check(t, prefix, map[string]Totals{}, "")
		if !sample.ok() {
			t.Fatalf("a prefix fails the sample check:\n%s", &sample)
		}
		if final.ok() {
			t.Fatal("a prefix passes the final check")
		}
	})
	controls := []struct {
		name        string
		bills       func() []dbBill
		totals      func() map[string]Totals
		xid         string
		final, samp string // expected in the reports ("" = clean)
	}{
		{name: "duplicate", bills: func() []dbBill { return append(slices.Clone(f.bills), f.bills[17]) },
			final: "appears more than once", samp: "appears more than once"},
		{name: "lost", bills: func() []dbBill { return slices.Delete(slices.Clone(f.bills), 5, 6) },
			final: "is missing", samp: "not a prefix"},
		{name: "aborted row", bills: func() []dbBill {
			b := f.bills[3]
			b.BillID = "bill-of-an-aborted-transaction"
			return append(slices.Clone(f.bills), b)
		}, final: "not a unique valid bill", samp: "in no committed"},
		{name: "wrong amount", bills: func() []dbBill {
			bs := slices.Clone(f.bills)
			bs[9].AmountCents++
			return bs
		}, final: "the bill says", samp: "the bill says"},
		{name: "wrong totals", totals: func() map[string]Totals {
			ts := map[string]Totals{}
			for a, v := range f.totals {
				ts[a] = v
			}
			acct := sortedKeys(ts)[0]
			v := ts[acct]
			v.SumCents += 100
			ts[acct] = v
			return ts
		}, final: "account_totals: account", samp: "which no committed"},
		{name: "ahead of kafka", bills: func() []dbBill { return f.bills }, samp: "before its Kafka transaction committed"},
		{name: "prepared left", xid: "sluice-chaos-leftover", final: "prepared transactions left"},
	}
	for _, c := range controls {
		t.Run(c.name, func(t *testing.T) {
			bills, totals := f.bills, f.totals
			if c.bills != nil {
				bills = c.bills()
			}
			if c.totals != nil {
				totals = c.totals()
			}
			if c.name == "ahead of kafka" {
				// The same rows, but Kafka had committed less when the
				// sample was taken.
				saved := f.lso
				f.lso = map[string]map[int32]int64{f.topics.Accepted: {0: 1, 1: 1, 2: 1}, f.topics.Totals: saved[f.topics.Totals]}
				defer func() { f.lso = saved }()
			}
			final, sample := check(t, bills, totals, c.xid)
			for _, exp := range []struct {
				what string
				rep  *dbReport
				want string
			}{{"final", &final, c.final}, {"sample", &sample, c.samp}} {
				if exp.want == "" {
					continue
				}
				if !strings.Contains(exp.rep.String(), exp.want) {
					t.Errorf("%s check: want a violation mentioning %q, got:\n%s", exp.what, exp.want, exp.rep)
				}
			}
		})
	}
}

// TestDBCheckerPostgres proves the database checks can fail, against a
// real PostgreSQL: a duplicate, a lost row, a row of no committed record,
// a wrong value, wrong totals, a row visible before Kafka committed it and
// a prepared transaction left over are each reported; a correct database
// and a correct prefix are not.
func TestDBCheckerPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	pg := testdb.StartPostgres(t)
	ctx := testContext(t, time.Minute)
	url, err := pg.CreateDatabase(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	admin := dbAdmin{
		exec: func(ctx context.Context, q string, args ...any) error {
			_, err := conn.Exec(ctx, q, args...)
			return err
		},
		ph: func(i int) string { return fmt.Sprintf("$%d", i) },
	}
	admin.prepare = func(ctx context.Context, xid string) error {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		for _, q := range []string{"BEGIN", "INSERT INTO " + tableTotals + " VALUES ('prepared-acct', 1, 1, 1, 1, 'x')", "PREPARE TRANSACTION '" + xid + "'"} {
			if _, err := c.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}
	admin.rollback = func(ctx context.Context, xid string) error {
		_, err := conn.Exec(ctx, "ROLLBACK PREPARED '"+xid+"'")
		return err
	}
	runDBCheckerControls(t, admin, pgReader{url})
}

// TestDBCheckerMariaDB is TestDBCheckerPostgres against MariaDB (XA
// RECOVER for the prepared transaction).
func TestDBCheckerMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a MariaDB server")
	}
	my := testdb.StartMariaDB(t)
	db, err := sql.Open("mysql", my.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	admin := dbAdmin{
		exec: func(ctx context.Context, q string, args ...any) error {
			_, err := db.ExecContext(ctx, q, args...)
			return err
		},
		ph: func(int) string { return "?" },
	}
	admin.prepare = func(ctx context.Context, xid string) error {
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		for _, q := range []string{"XA START '" + xid + "'", "INSERT INTO " + tableTotals + " VALUES ('prepared-acct', 1, 1, 1, 1, 'x')", "XA END '" + xid + "'", "XA PREPARE '" + xid + "'"} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}
	admin.rollback = func(ctx context.Context, xid string) error {
		_, err := db.ExecContext(ctx, "XA ROLLBACK '"+xid+"'")
		return err
	}
	reader, err := newMyReader(my.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.close)
	runDBCheckerControls(t, admin, reader)
}
