package examples

import (
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/topology"
)

// Database modes of billing (`sluice run billing --db-mode`).
const (
	// DBTwoPhase prepares the rows in the database before the Kafka
	// transaction commits and commits them after it (topology.ToParticipant):
	// visible right after the commit; needs prepared transactions
	// (PostgreSQL max_prepared_transactions > 0, MySQL/MariaDB XA).
	DBTwoPhase = "two_phase"
	// DBOffsets writes the committed rows after the Kafka transaction, with
	// their sink-topic offsets in the same database transaction
	// (topology.ToIdempotent): visible after the commit plus the writer's
	// lag; needs nothing of the database but ordinary transactions.
	DBOffsets = "offsets"
)

// ErrDBMode is wrapped by the error of an unknown database mode.
var ErrDBMode = errors.New("billing: unknown database mode")

// ParseDBMode checks a --db-mode value; empty means DBTwoPhase.
func ParseDBMode(s string) (string, error) {
	switch s {
	case "", DBTwoPhase:
		return DBTwoPhase, nil
	case DBOffsets:
		return DBOffsets, nil
	}
	return "", fmt.Errorf("%w %q: want %s or %s", ErrDBMode, s, DBTwoPhase, DBOffsets)
}

// BillingStore is a database table's sink usable in both modes (the
// adapters of plugin/sluicepg and plugin/sluicemysql are).
type BillingStore[V any] interface {
	sink.Participant[string, V]
	sink.Idempotent[string, V]
}

// BillingDB is billing's database output: the sinks of the tables
// bills_accepted and account_totals, and the mode they are written in.
type BillingDB struct {
	Mode     string // DBTwoPhase or DBOffsets
	Accepted BillingStore[AcceptedBill]
	Totals   BillingStore[Totals]
}

// Names of billing's database tables and of its external sinks (the sink
// names are part of internal topic and store names: stable).
const (
	BillsAcceptedTable = "bills_accepted"
	AccountTotalsTable = "account_totals"
	acceptedSink       = "bills-accepted-db"
	totalsSink         = "account-totals-db"
)

// billRow is a row of bills_accepted. The src_* columns are the bill's
// original input coordinates (stamped before the repartition by account and
// carried in the value), not those of the repartition or sink topic: a row
// says which input record it came from.
type billRow struct {
	BillID       string `db:"bill_id,type=varchar(255)"`
	Account      string `db:"account,type=varchar(255)"`
	AmountCents  int64  `db:"amount_cents,type=bigint"`
	TS           int64  `db:"ts,type=bigint"`
	SrcTopic     string `db:"src_topic,type=varchar(255)"`
	SrcPartition int32  `db:"src_partition,type=integer"`
	SrcOffset    int64  `db:"src_offset,type=bigint"`
}

// totalsRow is a row of account_totals.
type totalsRow struct {
	Account    string `db:"account,pk,type=varchar(255)"`
	Count      int64  `db:"count,type=bigint"`
	SumCents   int64  `db:"sum_cents,type=bigint"`
	MinCents   int64  `db:"min_cents,type=bigint"`
	MaxCents   int64  `db:"max_cents,type=bigint"`
	LastBillID string `db:"last_bill_id,type=varchar(255)"`
}

// BillsAcceptedTableMapping maps accepted bills to bills_accepted: one row
// inserted per record, no primary key nor unique constraint (a duplicate
// would show). create: CREATE TABLE IF NOT EXISTS when the sink opens.
func BillsAcceptedTableMapping(create bool) (sluicedb.Table[string, AcceptedBill], error) {
	t, err := sluicedb.StructTable(BillsAcceptedTable, func(r sink.Record[string, AcceptedBill]) (billRow, error) {
		b := r.Value
		return billRow{b.BillID, b.Account, b.AmountCents, b.TS, b.Topic, b.Partition, b.Offset}, nil
	})
	t.Create = create
	return t, err
}

// AccountTotalsTableMapping maps the running totals to account_totals:
// upserted by account, so the table holds each account's current totals.
func AccountTotalsTableMapping(create bool) (sluicedb.Table[string, Totals], error) {
	t, err := sluicedb.StructTable(AccountTotalsTable, func(r sink.Record[string, Totals]) (totalsRow, error) {
		v := r.Value
		return totalsRow{r.Key, v.Count, v.SumCents, v.MinCents, v.MaxCents, v.LastBillID}, nil
	})
	t.Create = create
	return t, err
}

// BillingWithDB is Billing that also writes each accepted bill and each
// account's totals to db (nil: Billing itself).
func BillingWithDB(input, accepted, totals, dlq string, db *BillingDB) *topology.Topology {
	return billing(input, accepted, totals, dlq, func(fresh topology.Stream[string, AcceptedBill], running topology.Stream[string, Totals]) {
		if db == nil {
			return
		}
		if db.Mode == DBOffsets {
			topology.ToIdempotent(fresh, acceptedSink, sink.Idempotent[string, AcceptedBill](db.Accepted), serde.String, serde.JSON[AcceptedBill]())
			topology.ToIdempotent(running, totalsSink, sink.Idempotent[string, Totals](db.Totals), serde.String, serde.JSON[Totals]())
			return
		}
		topology.ToParticipant(fresh, acceptedSink, sink.Participant[string, AcceptedBill](db.Accepted))
		topology.ToParticipant(running, totalsSink, sink.Participant[string, Totals](db.Totals))
	})
}
