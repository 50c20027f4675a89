package sluicemysql_test

import (
	"context"
	"log"

	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/plugin/sluicemysql"
	"github.com/sluice-streams/sluice/sink"
)

// Not run (it needs a server): account totals upserted in offsets mode,
// from a committed output topic; the password comes from
// SLUICE_DB_PASSWORD.
func ExampleNew() {
	ctx := context.Background()
	table := sluicedb.Table[string, int64]{
		Name:       "account_totals",
		Columns:    []sluicedb.Column{{Name: "account", Type: "varchar(64)"}, {Name: "sum_cents", Type: "bigint"}},
		PrimaryKey: []string{"account"},
		Row:        func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
	}
	s, err := sluicemysql.New(ctx, "mysql://billing@127.0.0.1:3306/ledger", table)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	next, err := s.Offsets(ctx, "totals", "billing-totals")
	if err != nil {
		log.Fatal(err)
	}
	// ... read the topic from next[p] on, then per batch:
	recs := []sink.Record[string, int64]{{Key: "acct-1", Value: 9900, Topic: "billing-totals", Partition: 0, Offset: next[0]}}
	if err := s.Write(ctx, "totals", "billing-totals", recs, map[int32]int64{0: next[0] + 1}); err != nil {
		log.Fatal(err)
	}
}
