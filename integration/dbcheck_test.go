//go:build unix

package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MariaDB reader
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The billing tables of `sluice run billing --db` (issue 17 item 5).
const (
	tableAccepted = "bills_accepted"
	tableTotals   = "account_totals"
)

// billingDDL creates the billing tables as the contract of `sluice run
// billing --db` has them: no unique constraint on bills_accepted, so that a
// duplicate shows. The chaos tests create them before the instances start
// (see TestBillingChaosPostgres for why).
var billingDDL = [2]string{
	"CREATE TABLE " + tableAccepted + " (bill_id VARCHAR(255) NOT NULL, account VARCHAR(255) NOT NULL, amount_cents BIGINT NOT NULL, ts BIGINT NOT NULL, src_topic VARCHAR(255) NOT NULL, src_partition INTEGER NOT NULL, src_offset BIGINT NOT NULL)",
	"CREATE TABLE " + tableTotals + " (account VARCHAR(255) PRIMARY KEY, count BIGINT NOT NULL, sum_cents BIGINT NOT NULL, min_cents BIGINT NOT NULL, max_cents BIGINT NOT NULL, last_bill_id VARCHAR(255) NOT NULL)",
}

// dbBill is a row of bills_accepted as a reader sees it. ts is kept as the
// database prints it, so that the reader does not depend on the column's
// type; it is compared with the bill's ts when it is an integer.
type dbBill struct {
	BillID       string
	Account      string
	AmountCents  int64
	TS           string
	SrcTopic     string
	SrcPartition int32
	SrcOffset    int64
}

// dbSnapshot is what one reader saw of both tables in one transaction
// snapshot (REPEATABLE READ).
type dbSnapshot struct {
	bills  []dbBill
	totals map[string]Totals // by account
}

// dbReport is what a database check found: clean when violations is empty.
type dbReport struct {
	violations []string
}

func (r *dbReport) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

func (r *dbReport) ok() bool { return len(r.violations) == 0 }

func (r *dbReport) String() string {
	if r.ok() {
		return "database check OK"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "database check FAILED with %d violations", len(r.violations))
	for i, v := range r.violations {
		if i == reportLimit {
			fmt.Fprintf(&sb, "\n  ... and %d more", len(r.violations)-reportLimit)
			break
		}
		sb.WriteString("\n  - ")
		sb.WriteString(v)
	}
	return sb.String()
}

// dbOracle is what the database must hold once the whole input log was
// processed: every unique valid bill once, and each account's totals over
// them. It is computed from the input log alone, with the same verdicts as
// CheckBilling (ParseBill, judge).
type dbOracle struct {
	bills  map[string]Bill    // by bill_id
	from   map[string][]coord // input coordinates of each bill_id's copies
	totals map[string]Totals  // LastBillID left empty: it depends on the order
}

func newDBOracle(input []InputRecord) dbOracle {
	o := dbOracle{bills: map[string]Bill{}, from: map[string][]coord{}, totals: map[string]Totals{}}
	for _, r := range input {
		b, err := ParseBill(r.Value)
		if err != nil || judge(b) != good {
			continue
		}
		o.from[b.BillID] = append(o.from[b.BillID], coord{r.Partition, r.Offset})
		if _, dup := o.bills[b.BillID]; dup {
			continue
		}
		o.bills[b.BillID] = b
		t := o.totals[b.Account].Add(b)
		t.LastBillID = ""
		o.totals[b.Account] = t
	}
	return o
}

// checkDBFinal checks what an independent reader sees once the application
// stopped cleanly: bills_accepted holds every unique valid bill of the
// input exactly once, each row naming one of the input records of its bill;
// account_totals equals the oracle's totals (count, sum, min, max; the last
// bill id must be one of the account's bills, since which duplicate source
// partition went first is not determined); and no prepared transaction is
// left over.
func checkDBFinal(rep *dbReport, inputTopic string, o dbOracle, snap dbSnapshot, prepared []string) {
	seen := map[string]int{}
	for _, row := range snap.bills {
		seen[row.BillID]++
		if seen[row.BillID] == 2 {
			rep.violate("final: bills_accepted: bill %s appears more than once", clipString(row.BillID))
		}
		b, ok := o.bills[row.BillID]
		if !ok {
			rep.violate("final: bills_accepted: bill %s is not a unique valid bill of the input", clipString(row.BillID))
			continue
		}
		checkDBRow(rep, "final", row, b)
		src := coord{row.SrcPartition, row.SrcOffset}
		if row.SrcTopic != inputTopic || !slices.Contains(o.from[row.BillID], src) {
			rep.violate("final: bills_accepted: bill %s names source %s/%s, not one of its input records %v", row.BillID, row.SrcTopic, src, o.from[row.BillID])
		}
	}
	for _, id := range sortedKeys(o.bills) {
		if seen[id] == 0 {
			rep.violate("final: bills_accepted: bill %s (account %s) is missing", id, o.bills[id].Account)
		}
	}
	for _, acct := range sortedKeys(o.totals) {
		got, ok := snap.totals[acct]
		if !ok {
			rep.violate("final: account_totals: account %s is missing", acct)
			continue
		}
		want := o.totals[acct]
		want.LastBillID = got.LastBillID
		if got != want {
			rep.violate("final: account_totals: account %s holds %+v, want %+v", acct, got, want)
		}
		if b, ok := o.bills[got.LastBillID]; !ok || b.Account != acct {
			rep.violate("final: account_totals: account %s: last_bill_id %q is not one of its bills", acct, clipString(got.LastBillID))
		}
	}
	for _, acct := range sortedKeys(snap.totals) {
		if _, ok := o.totals[acct]; !ok {
			rep.violate("final: account_totals: account %s has no valid bill in the input", clipString(acct))
		}
	}
	if len(prepared) > 0 {
		rep.violate("final: %d prepared transactions left after a clean stop: %v", len(prepared), prepared)
	}
}

// checkDBRow compares a row with the bill it stands for.
func checkDBRow(rep *dbReport, when string, row dbBill, b Bill) {
	if row.Account != b.Account || row.AmountCents != b.AmountCents {
		rep.violate("%s: bills_accepted: bill %s holds account %s, %d cents; the bill says %s, %d cents", when, b.BillID, row.Account, row.AmountCents, b.Account, b.AmountCents)
	}
	if ts, err := strconv.ParseInt(row.TS, 10, 64); err == nil && ts != b.TS {
		rep.violate("%s: bills_accepted: bill %s holds ts %d, the bill says %d", when, b.BillID, ts, b.TS)
	}
}

// committedAt is a committed output record: where it is and what it says.
type committedAt[V any] struct {
	partition int32
	offset    int64
	index     int // its position among the committed records of its partition
	val       V
}

// committedOutputs are the committed records of bills-accepted and
// account-totals, read once the run is over. Every sample is checked
// against them: what was committed at a sample's moment is a prefix of
// what is committed at the end, and the sample's last stable offsets say
// where that prefix ended.
type committedOutputs struct {
	accepted    map[string][]committedAt[Accepted] // by bill_id
	perPart     map[int32]int                      // committed bills-accepted records per partition
	totals      map[string][]committedAt[Totals]   // by account
	badAccepted int                                // values that did not decode
}

func readCommittedOutputs(ctx context.Context, addrs []string, topics Topics) (committedOutputs, error) {
	c := committedOutputs{accepted: map[string][]committedAt[Accepted]{}, perPart: map[int32]int{}, totals: map[string][]committedAt[Totals]{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return c, err
	}
	defer cl.Close()
	ends, err := listOffsets(ctx, kadm.NewClient(cl).ListEndOffsets, []string{topics.Accepted, topics.Totals})
	if err != nil {
		return c, err
	}
	spans := map[string]map[int32][2]int64{}
	for t, ps := range ends {
		spans[t] = map[int32][2]int64{}
		for p, e := range ps {
			spans[t][p] = [2]int64{0, e}
		}
	}
	totalsIdx := map[int32]int{}
	unread, err := readCommitted(ctx, addrs, spans, func(r *kgo.Record) {
		switch r.Topic {
		case topics.Accepted:
			var a Accepted
			if json.Unmarshal(r.Value, &a) != nil {
				c.badAccepted++
				return
			}
			c.accepted[a.BillID] = append(c.accepted[a.BillID], committedAt[Accepted]{r.Partition, r.Offset, c.perPart[r.Partition], a})
			c.perPart[r.Partition]++
		case topics.Totals:
			var t Totals
			if json.Unmarshal(r.Value, &t) != nil {
				return
			}
			c.totals[string(r.Key)] = append(c.totals[string(r.Key)], committedAt[Totals]{r.Partition, r.Offset, totalsIdx[r.Partition], t})
			totalsIdx[r.Partition]++
		}
	})
	if err == nil && len(unread) > 0 {
		err = fmt.Errorf("integration: %v", unread)
	}
	return c, err
}

// dbSample is a snapshot taken during the run, with the last stable
// offsets (read_committed end offsets) of the outputs listed right after
// the snapshot: everything committed in Kafka by the snapshot's moment is
// below them.
type dbSample struct {
	n    int
	at   time.Time
	snap dbSnapshot
	lso  map[string]map[int32]int64
}

// checkDBSample checks that what a database reader saw at one moment is
// consistent with committed Kafka output (invariant 7, seen from outside):
//
//  1. every bills_accepted row is a record of the committed bills-accepted
//     topic (same bill, account, amount, source coordinates), once: a row of
//     an aborted Kafka transaction is in no committed record;
//  2. that record was committed when the snapshot was taken (its offset is
//     below the last stable offset listed right after): a database that ran
//     ahead of Kafka shows here;
//  3. per bills-accepted partition, the rows are a prefix of the
//     partition's committed records: the first n of them, for some n. A
//     partition's records all come from one task (its key, the account,
//     decides both the task that aggregates it and the partition it is
//     written to, with the same partitioner), which commits its Kafka
//     transactions in order and, in two-phase mode, resolves its external
//     transactions in that order (it prepares nothing while one is
//     unresolved); in offsets mode the writer of a partition writes its
//     committed records in order. So a gap (a later record visible, an
//     earlier one not) is a lost or reordered write;
//  4. every account_totals row equals a committed account-totals record of
//     its account below the listed last stable offset.
func checkDBSample(rep *dbReport, topics Topics, c committedOutputs, s dbSample) {
	when := fmt.Sprintf("sample %d (%s)", s.n, s.at.Format("15:04:05.000"))
	maxIdx := map[int32]int{}
	rows := map[int32]int{}
	seen := map[string]bool{}
	for _, row := range s.snap.bills {
		if seen[row.BillID] {
			rep.violate("%s: bills_accepted: bill %s appears more than once", when, clipString(row.BillID))
			continue
		}
		seen[row.BillID] = true
		recs := c.accepted[row.BillID]
		if len(recs) == 0 {
			rep.violate("%s: bills_accepted: bill %s is in no committed %s record (a row of an aborted transaction?)", when, clipString(row.BillID), topics.Accepted)
			continue
		}
		rec := recs[0]
		checkDBRow(rep, when, row, rec.val.Bill)
		if row.SrcTopic != rec.val.Topic || row.SrcPartition != rec.val.Partition || row.SrcOffset != rec.val.Offset {
			rep.violate("%s: bills_accepted: bill %s names source %s/%d@%d, its committed record %s/%d@%d names %s/%d@%d", when, row.BillID,
				row.SrcTopic, row.SrcPartition, row.SrcOffset, topics.Accepted, rec.partition, rec.offset, rec.val.Topic, rec.val.Partition, rec.val.Offset)
		}
		if lso, ok := s.lso[topics.Accepted][rec.partition]; !ok || rec.offset >= lso {
			rep.violate("%s: bills_accepted: bill %s is visible before its Kafka transaction committed (%s/%d@%d, last stable offset %d)", when, row.BillID, topics.Accepted, rec.partition, rec.offset, lso)
		}
		rows[rec.partition]++
		maxIdx[rec.partition] = max(maxIdx[rec.partition], rec.index+1)
	}
	for _, p := range sortedKeys(rows) {
		if rows[p] != maxIdx[p] {
			rep.violate("%s: bills_accepted: the rows of partition %d are not a prefix of its committed records: %d rows, the last of them the committed record number %d", when, p, rows[p], maxIdx[p])
		}
	}
	for _, acct := range sortedKeys(s.snap.totals) {
		got := s.snap.totals[acct]
		found := false
		for _, rec := range c.totals[acct] {
			if rec.val == got {
				found = true
				if lso, ok := s.lso[topics.Totals][rec.partition]; !ok || rec.offset >= lso {
					rep.violate("%s: account_totals: account %s is visible before its Kafka transaction committed (%s/%d@%d)", when, acct, topics.Totals, rec.partition, rec.offset)
				}
				break
			}
		}
		if !found {
			rep.violate("%s: account_totals: account %s holds %+v, which no committed %s record says", when, clipString(acct), got, topics.Totals)
		}
	}
}

// dbReader is the independent reader: its own connections, plain SQL, no
// sluice code.
type dbReader interface {
	// snapshot reads both tables in one snapshot.
	snapshot(ctx context.Context) (dbSnapshot, error)
	// prepared lists the prepared transactions of the database.
	prepared(ctx context.Context) ([]string, error)
	close()
}

// pgReader connects anew for each read, so that a server restart or a
// terminated session costs one failed sample and nothing more.
type pgReader struct{ url string }

func (r pgReader) snapshot(ctx context.Context) (dbSnapshot, error) {
	conn, err := pgx.Connect(ctx, r.url)
	if err != nil {
		return dbSnapshot{}, err
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return dbSnapshot{}, err
	}
	defer tx.Rollback(context.Background())
	snap := dbSnapshot{totals: map[string]Totals{}}
	rows, err := tx.Query(ctx, `SELECT bill_id::text, account::text, amount_cents::bigint, ts::text, src_topic::text, src_partition::int, src_offset::bigint FROM `+tableAccepted)
	if err != nil {
		return dbSnapshot{}, err
	}
	err = scanBills(rows, &snap)
	rows.Close()
	if err != nil {
		return dbSnapshot{}, err
	}
	rows, err = tx.Query(ctx, `SELECT account::text, count::bigint, sum_cents::bigint, min_cents::bigint, max_cents::bigint, last_bill_id::text FROM `+tableTotals)
	if err != nil {
		return dbSnapshot{}, err
	}
	defer rows.Close()
	return snap, scanTotals(rows, &snap)
}

// rowScanner is what pgx.Rows and *sql.Rows share.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

func scanBills(rows rowScanner, snap *dbSnapshot) error {
	for rows.Next() {
		var b dbBill
		if err := rows.Scan(&b.BillID, &b.Account, &b.AmountCents, &b.TS, &b.SrcTopic, &b.SrcPartition, &b.SrcOffset); err != nil {
			return err
		}
		snap.bills = append(snap.bills, b)
	}
	return rows.Err()
}

func scanTotals(rows rowScanner, snap *dbSnapshot) error {
	for rows.Next() {
		var acct string
		var t Totals
		if err := rows.Scan(&acct, &t.Count, &t.SumCents, &t.MinCents, &t.MaxCents, &t.LastBillID); err != nil {
			return err
		}
		snap.totals[acct] = t
	}
	return rows.Err()
}

func (r pgReader) prepared(ctx context.Context) ([]string, error) {
	conn, err := pgx.Connect(ctx, r.url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT gid FROM pg_prepared_xacts WHERE database = current_database() ORDER BY gid`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func (pgReader) close() {}

// myReader reads MariaDB through database/sql, which reconnects by itself.
type myReader struct{ db *sql.DB }

func newMyReader(dsn string) (myReader, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return myReader{}, err
	}
	db.SetMaxOpenConns(2)
	return myReader{db}, nil
}

func (r myReader) snapshot(ctx context.Context) (dbSnapshot, error) {
	// REPEATABLE READ: InnoDB's snapshot is taken at the first read and
	// serves both statements.
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return dbSnapshot{}, err
	}
	defer tx.Rollback()
	snap := dbSnapshot{totals: map[string]Totals{}}
	rows, err := tx.QueryContext(ctx, `SELECT CAST(bill_id AS CHAR), CAST(account AS CHAR), CAST(amount_cents AS SIGNED), CAST(ts AS CHAR), CAST(src_topic AS CHAR), CAST(src_partition AS SIGNED), CAST(src_offset AS SIGNED) FROM `+tableAccepted)
	if err != nil {
		return dbSnapshot{}, err
	}
	err = scanBills(rows, &snap)
	rows.Close()
	if err != nil {
		return dbSnapshot{}, err
	}
	rows, err = tx.QueryContext(ctx, "SELECT CAST(account AS CHAR), CAST(`count` AS SIGNED), CAST(sum_cents AS SIGNED), CAST(min_cents AS SIGNED), CAST(max_cents AS SIGNED), CAST(last_bill_id AS CHAR) FROM "+tableTotals)
	if err != nil {
		return dbSnapshot{}, err
	}
	defer rows.Close()
	return snap, scanTotals(rows, &snap)
}

func (r myReader) prepared(ctx context.Context) ([]string, error) {
	rows, err := r.db.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var format, gl, bl int64
		var data []byte
		if err := rows.Scan(&format, &gl, &bl, &data); err != nil {
			return nil, err
		}
		out = append(out, string(data))
	}
	return out, rows.Err()
}

func (r myReader) close() { r.db.Close() }
