package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/examples/billingdb"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/topology"
)

// The database output of `sluice run billing` (issue 17 item 5).
const (
	keyDBURL          = "db.url"
	keyDBPassword     = "db.password" // SLUICE_DB_PASSWORD; no flag, as sasl.password
	keyDBMode         = "db.mode"
	keyDBCreateTables = "db.create.tables"
)

// isDBKey: the database keys, which are the example's, not processor's.
func isDBKey(k string) bool {
	return k == keyDBURL || k == keyDBPassword || k == keyDBMode || k == keyDBCreateTables
}

// dbConfig is the database output of an example, off when URL is empty.
type dbConfig struct {
	URL          string
	Password     string
	Mode         string
	CreateTables bool
}

func addDBFlags(f *pflag.FlagSet) {
	f.String("db", "", "db.url: also write billing's tables bills_accepted and account_totals to this database, postgres://user:password@host:port/db or mysql://user:password@host:port/db (password also from SLUICE_DB_PASSWORD)")
	f.String("db-mode", examples.DBTwoPhase, "db.mode: two_phase (prepared transactions tied to the Kafka commit; rows visible right after it) or offsets (ordinary transactions after the commit, from the committed output; rows visible after the writer's lag)")
	f.Bool("db-create-tables", false, "db.create.tables: create bills_accepted and account_totals if missing")
}

// loadDB reads the database keys.
func (r *resolver) loadDB() dbConfig {
	c := dbConfig{URL: r.str(keyDBURL), Password: r.secretValue(keyDBPassword), Mode: r.str(keyDBMode)}
	if c.Mode == "" {
		c.Mode = examples.DBTwoPhase
	}
	if _, err := examples.ParseDBMode(c.Mode); err != nil && !r.failed(keyDBMode) {
		r.fail(keyDBMode, strconv.Quote(c.Mode), err)
	}
	if s := r.str(keyDBCreateTables); s != "" && !r.failed(keyDBCreateTables) {
		b, err := strconv.ParseBool(s)
		if err != nil {
			r.fail(keyDBCreateTables, strconv.Quote(s), errors.New("want true or false"))
		}
		c.CreateTables = b
	}
	return c
}

// buildWithDB builds example e, with its database output when db.url is
// set: only billing has one. The returned close closes the database
// connections (after the app stopped).
func buildWithDB(ctx context.Context, e examples.Example, params map[string]string, c dbConfig) (*topology.Topology, func() error, error) {
	if c.URL == "" {
		return e.Build(params), func() error { return nil }, nil
	}
	if e.Name != "billing" {
		return nil, nil, fmt.Errorf("run: %s (--db) is billing's; %s writes no database", keyDBURL, e.Name)
	}
	db, err := billingdb.Open(ctx, billingdb.Config{URL: c.URL, Password: c.Password, Mode: c.Mode, CreateTables: c.CreateTables})
	if err != nil {
		return nil, nil, fmt.Errorf("run: %w", err)
	}
	return examples.BillingWithDB(params["input"], params["accepted"], params["totals"], params["dlq"], db.BillingDB), db.Close, nil
}

// redactedDBURL is raw without its password, for `sluice config`.
func redactedDBURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := sluicedb.ParseURL(raw)
	if err != nil {
		return "(invalid: " + err.Error() + ")"
	}
	return u.Redacted()
}
