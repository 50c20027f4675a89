package sluicepg_test

import (
	"context"
	"errors"
	"log"

	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/plugin/sluicepg"
	"github.com/sluice-streams/sluice/sink"
)

// Not run (it needs a server): a sink of bills, two-phase.
func ExampleNew() {
	ctx := context.Background()
	table := sluicedb.Table[string, int64]{
		Name:    "bills_accepted",
		Columns: []sluicedb.Column{{Name: "bill_id", Type: "text"}, {Name: "amount_cents", Type: "bigint"}},
		Row:     func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
		Create:  true,
	}
	s, err := sluicepg.New(ctx, "postgres://billing@127.0.0.1:5432/ledger?application_name=billing", table)
	if err != nil {
		log.Fatal(err) // names the URL without its password
	}
	defer s.Close()
	err = s.Prepare(ctx, "billing-0_3-42", []sink.Record[string, int64]{{Key: "b1", Value: 1250}})
	var rejected *sluicedb.RowError
	switch {
	case errors.As(err, &rejected):
		log.Printf("dead-letter %s/%d@%d: %s", rejected.Topic, rejected.Partition, rejected.Offset, rejected.Message)
	case err != nil:
		log.Fatal(err) // sluicedb.ErrConnection: retry after reconnecting
	}
	// ... the Kafka transaction commits, then:
	if err := s.CommitPrepared(ctx, "billing-0_3-42"); err != nil && !errors.Is(err, sink.ErrNotPrepared) {
		log.Fatal(err)
	}
}
