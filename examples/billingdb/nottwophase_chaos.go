//go:build sluice_chaos_nottwophase

package billingdb

import (
	"context"
	"errors"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/sink"
)

// chaosWrap makes billing's stores write without two-phase commit: the
// negative control of the database chaos tests (integration/dbchaos_test.go)
// builds sluice with the tag sluice_chaos_nottwophase and must then see
// duplicates or losses. Never built otherwise.
func chaosWrap(db *examples.BillingDB) *examples.BillingDB {
	return &examples.BillingDB{
		Mode:     db.Mode,
		Accepted: commitAtPrepare[examples.AcceptedBill]{db.Accepted},
		Totals:   commitAtPrepare[examples.Totals]{db.Totals},
	}
}

// commitAtPrepare commits at Prepare, as a sink without two-phase commit
// would: rows of a Kafka transaction that then aborts stay, and recovery
// finds nothing to decide.
type commitAtPrepare[V any] struct {
	examples.BillingStore[V]
}

func (c commitAtPrepare[V]) Prepare(ctx context.Context, xid string, records []sink.Record[string, V]) error {
	if err := c.BillingStore.Prepare(ctx, xid, records); err != nil {
		return err
	}
	return c.BillingStore.CommitPrepared(ctx, xid)
}

func (c commitAtPrepare[V]) CommitPrepared(ctx context.Context, xid string) error {
	if err := c.BillingStore.CommitPrepared(ctx, xid); err != nil && !errors.Is(err, sink.ErrNotPrepared) {
		return err
	}
	return nil
}

func (c commitAtPrepare[V]) RollbackPrepared(context.Context, string) error { return nil }

func (c commitAtPrepare[V]) Prepared(context.Context, string) ([]string, error) { return nil, nil }
