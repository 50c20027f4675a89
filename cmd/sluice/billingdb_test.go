package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for the test's reader
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testdb"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
)

// billingDB is one database server under test: how to create a database on
// it and how the test reads it.
type billingDB struct {
	name   string
	create func(ctx context.Context, db string) (string, error) // returns the URL
	open   func(url string) (*sql.DB, error)
	// prepared counts what is left prepared on the server.
	prepared string
}

func postgresBillingDB(t *testing.T) billingDB {
	pg := testdb.StartPostgres(t)
	return billingDB{name: "postgres", create: pg.CreateDatabase,
		open:     func(url string) (*sql.DB, error) { return sql.Open("pgx", url) },
		prepared: "SELECT count(*) FROM pg_prepared_xacts"}
}

func mariaBillingDB(t *testing.T) billingDB {
	m := testdb.StartMariaDB(t)
	return billingDB{name: "mariadb", create: m.CreateDatabase,
		open: func(raw string) (*sql.DB, error) {
			u, err := sluicedb.ParseURL(raw)
			if err != nil {
				return nil, err
			}
			c := mysql.NewConfig()
			c.User, c.Passwd, c.Net, c.Addr, c.DBName = u.User, u.Password, "tcp", fmt.Sprintf("%s:%d", u.Host, u.Port), u.Database
			return sql.Open("mysql", c.FormatDSN())
		},
		// XA RECOVER is a statement without a count: counted by the reader.
		prepared: "XA RECOVER"}
}

// billingOracle is what billing must have written for the bills produced.
type billingOracle struct {
	rows   map[string]billRowWant // by bill id: the first valid copy's
	totals map[string]examples.Totals
}

type billRowWant struct {
	account    string
	amount, ts int64
	topic      string
	partition  int32
	offset     int64
}

// produceBills writes n bills over accounts to topic, keyed so that every
// bill goes through billing's repartition by account, with exact duplicate
// copies, malformed records and zero-cent bills, and returns the oracle
// (from the coordinates the broker gave each record).
func produceBills(t *testing.T, addrs []string, topic string, n, accounts int, seed uint64) billingOracle {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(seed, 1))
	var recs []*kgo.Record
	var sent []examples.Bill
	for i := range n {
		acct := fmt.Sprintf("acct-%03d", rng.IntN(accounts))
		switch r := rng.Float64(); {
		case r < 0.05: // malformed: billing dead-letters it
			recs = append(recs, &kgo.Record{Key: []byte("k-" + acct), Value: []byte(`{"bill_id":"broken-` + fmt.Sprint(i) + `","account":`)})
			continue
		case r < 0.15 && len(sent) > 0: // an exact copy of an earlier bill
			b := sent[rng.IntN(len(sent))]
			v, _ := json.Marshal(b)
			recs = append(recs, &kgo.Record{Key: []byte("k-" + b.Account), Value: v})
			continue
		}
		amt := int64(rng.IntN(20000) - 2000)
		if rng.Float64() < 0.03 {
			amt = 0 // refused by the totals: dead-lettered, nothing written
		}
		// Ids of every shape: a UUID-like one, a long one, one with
		// quotes and non-ASCII letters.
		id := fmt.Sprintf("bill-%d-%x", i, rng.Uint64())
		switch i % 7 {
		case 3:
			id = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Uint64()&(1<<48-1))
		case 5:
			id = fmt.Sprintf("o'brien \"%d\" ünïcødé %s", i, strings.Repeat("x", 150))
		}
		b := examples.Bill{BillID: id, Account: acct, AmountCents: amt, TS: int64(1_700_000_000_000 + i)}
		sent = append(sent, b)
		v, _ := json.Marshal(b)
		recs = append(recs, &kgo.Record{Key: []byte("k-" + acct), Value: v})
	}
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	o := billingOracle{rows: map[string]billRowWant{}, totals: map[string]examples.Totals{}}
	// All records of an account share a key, so a partition, and keep
	// their order through the repartition: last_bill_id is determined.
	for _, r := range recs {
		b, err := examples.BillSerde.Decode(r.Value)
		if err != nil || b.AmountCents == 0 {
			continue
		}
		if _, dup := o.rows[b.BillID]; dup {
			continue
		}
		o.rows[b.BillID] = billRowWant{b.Account, b.AmountCents, b.TS, r.Topic, r.Partition, r.Offset}
		cur, ok := o.totals[b.Account]
		if !ok {
			cur = examples.Totals{MinCents: b.AmountCents, MaxCents: b.AmountCents}
		}
		cur.Count++
		cur.SumCents += b.AmountCents
		cur.MinCents, cur.MaxCents = min(cur.MinCents, b.AmountCents), max(cur.MaxCents, b.AmountCents)
		cur.LastBillID = b.BillID
		o.totals[b.Account] = cur
	}
	return o
}

// checkBillingDB compares the tables with the oracle and reports every
// difference: a missing, doubled or wrong row of bills_accepted, a wrong or
// extra row of account_totals, a transaction left prepared.
func checkBillingDB(ctx context.Context, d billingDB, db *sql.DB, o billingOracle) []string {
	var problems []string
	rows, err := db.QueryContext(ctx, "SELECT bill_id, account, amount_cents, ts, src_topic, src_partition, src_offset FROM bills_accepted")
	if err != nil {
		return []string{"read bills_accepted: " + err.Error()}
	}
	seen := map[string]int{}
	for rows.Next() {
		var id string
		var w billRowWant
		if err := rows.Scan(&id, &w.account, &w.amount, &w.ts, &w.topic, &w.partition, &w.offset); err != nil {
			problems = append(problems, "scan bills_accepted: "+err.Error())
			break
		}
		seen[id]++
		if want, ok := o.rows[id]; !ok {
			problems = append(problems, fmt.Sprintf("bills_accepted has bill %q, not a unique valid bill", id))
		} else if w != want {
			problems = append(problems, fmt.Sprintf("bills_accepted row of %q is %+v, want %+v", id, w, want))
		}
	}
	rows.Close()
	for id := range o.rows {
		if n := seen[id]; n != 1 {
			problems = append(problems, fmt.Sprintf("bills_accepted holds bill %q %d times, want once", id, n))
		}
	}
	rows, err = db.QueryContext(ctx, "SELECT account, count, sum_cents, min_cents, max_cents, last_bill_id FROM account_totals")
	if err != nil {
		return append(problems, "read account_totals: "+err.Error())
	}
	got := map[string]examples.Totals{}
	for rows.Next() {
		var a string
		var v examples.Totals
		if err := rows.Scan(&a, &v.Count, &v.SumCents, &v.MinCents, &v.MaxCents, &v.LastBillID); err != nil {
			problems = append(problems, "scan account_totals: "+err.Error())
			break
		}
		got[a] = v
	}
	rows.Close()
	for a, want := range o.totals {
		if got[a] != want {
			problems = append(problems, fmt.Sprintf("account_totals of %s is %+v, want %+v", a, got[a], want))
		}
	}
	for a := range got {
		if _, ok := o.totals[a]; !ok {
			problems = append(problems, fmt.Sprintf("account_totals has account %s, which has no valid bill", a))
		}
	}
	if n, err := countPrepared(ctx, d, db); err != nil || n != 0 {
		problems = append(problems, fmt.Sprintf("%d transactions left prepared (%v)", n, err))
	}
	slices.Sort(problems)
	return problems
}

func countPrepared(ctx context.Context, d billingDB, db *sql.DB) (int, error) {
	if d.name == "postgres" {
		var n int
		err := db.QueryRowContext(ctx, d.prepared).Scan(&n)
		return n, err
	}
	rows, err := db.QueryContext(ctx, d.prepared)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

// TestBillingDB runs `sluice run billing --db` against each real database
// in both modes: bills with duplicates, malformed and zero-cent ones go in;
// after a clean stop, bills_accepted holds each unique valid bill exactly
// once with its input coordinates, account_totals equals the oracle, and
// nothing is left prepared. Negative controls: the checker finds a
// duplicated row, a wrong total and a transaction left prepared.
func TestBillingDB(t *testing.T) {
	if testing.Short() {
		t.Skip("starts database servers and runs billing; not with -short")
	}
	for _, start := range []func(*testing.T) billingDB{postgresBillingDB, mariaBillingDB} {
		d := start(t)
		for _, mode := range []string{examples.DBTwoPhase, examples.DBOffsets} {
			t.Run(d.name+"/"+mode, func(t *testing.T) { runBillingDB(t, d, mode) })
		}
	}
}

func runBillingDB(t *testing.T, d billingDB, mode string) {
	ctx, cancelAll := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancelAll()
	url, err := d.create(ctx, "billing_"+mode)
	if err != nil {
		t.Fatal(err)
	}
	db, err := d.open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	addrs := testbroker.Addrs(t)
	p := testbroker.Unique(t, "bdb-") + "-"
	topics := map[string]string{"input": p + "bills", "accepted": p + "accepted", "totals": p + "totals", "dlq": p + "dlq"}
	b := strings.Join(addrs, ",")
	if out, err := runSluice(ctx, "topic", "create", topics["input"], topics["accepted"], topics["totals"], topics["dlq"], "--partitions", "3", "--brokers", b); err != nil {
		t.Fatalf("topic create: %v\n%s", err, out)
	}
	o := produceBills(t, addrs, topics["input"], 1500, 40, 7)

	args := []string{"run", "billing", "--brokers", b, "--app-id", p + "app", "--state-dir", t.TempDir(), "--log-level", "warn",
		"--commit-interval", "200ms", "--stream-threads", "2", "--db", url, "--db-mode", mode, "--db-create-tables"}
	for k, v := range topics {
		args = append(args, "--"+k, v)
	}
	runCtx, stop := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		out  string
		rerr error
	)
	wg.Go(func() { out, rerr = runSluice(runCtx, args...) })
	defer func() { stop(); wg.Wait() }()

	// Until every bill is in and nothing is prepared, or a minute.
	var problems []string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if problems = checkBillingDB(ctx, d, db, o); len(problems) == 0 {
			break
		}
	}
	stop()
	wg.Wait()
	if rerr != nil {
		t.Fatalf("run: %v\n%s", rerr, out)
	}
	// After the clean stop, again: nothing doubled on the way out.
	if problems = checkBillingDB(ctx, d, db, o); len(problems) > 0 {
		t.Fatalf("%d problems, first %q\n%s", len(problems), problems[:min(len(problems), 10)], out)
	}
	t.Logf("%s %s: %d unique valid bills, %d accounts", d.name, mode, len(o.rows), len(o.totals))

	// Negative controls, on this database: the checker sees a doubled
	// row, a wrong total, and a transaction left prepared.
	if _, err := db.ExecContext(ctx, "INSERT INTO bills_accepted SELECT * FROM bills_accepted WHERE account = 'acct-001'"); err != nil {
		t.Fatal(err)
	}
	if got := checkBillingDB(ctx, d, db, o); len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), "times, want once") {
		t.Errorf("a doubled row went unnoticed: %q", got)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM bills_accepted WHERE account = 'acct-001'"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE account_totals SET sum_cents = sum_cents + 1 WHERE account = 'acct-002'"); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(checkBillingDB(ctx, d, db, o), "\n")
	if !strings.Contains(got, "account_totals of acct-002") || !strings.Contains(got, "0 times, want once") {
		t.Errorf("a wrong total or a lost row went unnoticed: %q", got)
	}
	undo := prepareOne(t, ctx, d, url)
	got = strings.Join(checkBillingDB(ctx, d, db, o), "\n")
	undo()
	if !strings.Contains(got, "1 transactions left prepared") {
		t.Errorf("a prepared transaction went unnoticed: %q", got)
	}
}

// prepareOne leaves a transaction prepared, on a session of its own that it
// closes (a prepared XA transaction stays attached to its session until
// then), and returns what rolls it back.
func prepareOne(t *testing.T, ctx context.Context, d billingDB, url string) (undo func()) {
	t.Helper()
	db, err := d.open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stmts := []string{"BEGIN", "DELETE FROM account_totals", "PREPARE TRANSACTION 'negative-control'"}
	rollback := "ROLLBACK PREPARED 'negative-control'"
	if d.name != "postgres" {
		stmts = []string{"XA START 'negative-control'", "DELETE FROM account_totals", "XA END 'negative-control'", "XA PREPARE 'negative-control'"}
		rollback = "XA ROLLBACK 'negative-control'"
	}
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return func() {
		db, err := d.open(url)
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, rollback); err != nil {
			t.Errorf("%s: %v", rollback, err)
		}
	}
}

// TestBillingDBUnreachable: a database that cannot be reached at start is
// an error naming its URL without the password, before any Kafka work.
func TestBillingDBUnreachable(t *testing.T) {
	for _, u := range []string{"postgres://bob:s3cret@127.0.0.1:1/ledger", "mysql://bob:s3cret@127.0.0.1:1/ledger"} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		out, err := runSluice(ctx, "run", "billing", "--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--db", u)
		cancel()
		redacted := strings.Replace(u, ":s3cret", "", 1)
		if err == nil || !strings.Contains(err.Error(), redacted) || strings.Contains(err.Error()+out, "s3cret") {
			t.Errorf("run --db %s: %v\n%s", redacted, err, out)
		}
	}
	// The password from SLUICE_DB_PASSWORD is not shown either.
	t.Setenv("SLUICE_DB_PASSWORD", "t0psecret")
	out, err := runSluice(t.Context(), "run", "billing", "--brokers", "127.0.0.1:1", "--state-dir", t.TempDir(), "--db", "postgres://bob@127.0.0.1:1/ledger")
	if err == nil || strings.Contains(err.Error()+out, "t0psecret") {
		t.Errorf("run --db with SLUICE_DB_PASSWORD: %v\n%s", err, out)
	}
	if _, err := runSluice(t.Context(), "run", "wordcount", "--db", "postgres://bob@127.0.0.1:1/ledger"); err == nil || !strings.Contains(err.Error(), "billing's") {
		t.Errorf("run wordcount --db: %v, want an error", err)
	}
	if _, err := runSluice(t.Context(), "run", "billing", "--db", "postgres://bob@127.0.0.1:1/ledger", "--db-mode", "fast"); err == nil || !strings.Contains(err.Error(), "db.mode") {
		t.Errorf("run --db-mode fast: %v, want an error", err)
	}
}
