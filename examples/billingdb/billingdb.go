package billingdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/plugin/sluicemysql"
	"github.com/sluice-streams/sluice/plugin/sluicepg"
)

// Config is where and how billing writes its tables.
type Config struct {
	// URL is postgres://user:password@host:port/db or
	// mysql://user:password@host:port/db (sluicedb.ParseURL; without a
	// password, SLUICE_DB_PASSWORD's).
	URL string
	// Password, if set and the URL has none, is the password.
	Password string
	// Mode is examples.DBTwoPhase (default) or examples.DBOffsets.
	Mode string
	// CreateTables creates bills_accepted and account_totals if missing.
	CreateTables bool
}

// DB is billing's open database output. Close it after the app stopped.
type DB struct {
	*examples.BillingDB
	closers []func() error
}

// Close closes the sinks' connection pools.
func (d *DB) Close() error {
	var errs []error
	for _, c := range d.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// Open connects both sinks to the database c names. An unreachable
// database is an error naming the URL without its password.
func Open(ctx context.Context, c Config) (*DB, error) {
	mode, err := examples.ParseDBMode(c.Mode)
	if err != nil {
		return nil, err
	}
	u, err := sluicedb.ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("billingdb: %w", err)
	}
	if u.Password == "" {
		u.Password = c.Password
	}
	accepted, err := examples.BillsAcceptedTableMapping(c.CreateTables)
	if err != nil {
		return nil, fmt.Errorf("billingdb: %w", err)
	}
	totals, err := examples.AccountTotalsTableMapping(c.CreateTables)
	if err != nil {
		return nil, fmt.Errorf("billingdb: %w", err)
	}
	d := &DB{BillingDB: &examples.BillingDB{Mode: mode}}
	switch u.Scheme {
	case "postgres":
		a, err := sluicepg.New(ctx, u.String(), accepted)
		if err != nil {
			return nil, fmt.Errorf("billingdb: %w", err)
		}
		d.closers = append(d.closers, a.Close)
		t, err := sluicepg.New(ctx, u.String(), totals)
		if err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("billingdb: %w", err)
		}
		d.closers = append(d.closers, t.Close)
		d.Accepted, d.Totals = a, t
	default: // mysql: ParseURL knows no other
		a, err := sluicemysql.New(ctx, u.String(), accepted)
		if err != nil {
			return nil, fmt.Errorf("billingdb: %w", err)
		}
		d.closers = append(d.closers, a.Close)
		t, err := sluicemysql.New(ctx, u.String(), totals)
		if err != nil {
			_ = d.Close()
			return nil, fmt.Errorf("billingdb: %w", err)
		}
		d.closers = append(d.closers, t.Close)
		d.Accepted, d.Totals = a, t
	}
	d.BillingDB = chaosWrap(d.BillingDB)
	return d, nil
}
