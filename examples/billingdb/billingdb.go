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
	url := u.String()
	if u.Scheme == "postgres" {
		d.Accepted, err = add(d, func() (*sluicepg.Sink[string, examples.AcceptedBill], error) { return sluicepg.New(ctx, url, accepted) })
		if err == nil {
			d.Totals, err = add(d, func() (*sluicepg.Sink[string, examples.Totals], error) { return sluicepg.New(ctx, url, totals) })
		}
	} else { // mysql: ParseURL knows no other
		d.Accepted, err = add(d, func() (*sluicemysql.Sink[string, examples.AcceptedBill], error) {
			return sluicemysql.New(ctx, url, accepted)
		})
		if err == nil {
			d.Totals, err = add(d, func() (*sluicemysql.Sink[string, examples.Totals], error) { return sluicemysql.New(ctx, url, totals) })
		}
	}
	if err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("billingdb: %w", err)
	}
	d.BillingDB = chaosWrap(d.BillingDB)
	return d, nil
}

// add opens one sink and keeps it for Close.
func add[V any, S interface {
	examples.BillingStore[V]
	Close() error
}](d *DB, open func() (S, error)) (examples.BillingStore[V], error) {
	s, err := open()
	if err != nil {
		return nil, err
	}
	d.closers = append(d.closers, s.Close)
	return s, nil
}
