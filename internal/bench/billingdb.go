package bench

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx": the scenarios' reader

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/examples/billingdb"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
)

// Database kinds of Config.DBURLs.
const (
	DBPostgres = "postgres"
	DBMariaDB  = "mariadb"
)

// DBScenarios are billing with --db, one per database kind and mode, run
// only when Config.DBURLs names the kind's server.
var DBScenarios = []string{"billing-pg-2pc", "billing-pg-offsets", "billing-mariadb-2pc", "billing-mariadb-offsets"}

// dbScenarios returns the database scenarios cfg has servers for.
func dbScenarios(cfg Config) []scenario {
	var out []scenario
	for _, d := range []struct{ name, kind, mode string }{
		{"billing-pg-2pc", DBPostgres, examples.DBTwoPhase},
		{"billing-pg-offsets", DBPostgres, examples.DBOffsets},
		{"billing-mariadb-2pc", DBMariaDB, examples.DBTwoPhase},
		{"billing-mariadb-offsets", DBMariaDB, examples.DBOffsets},
	} {
		url := cfg.DBURLs[d.kind]
		if url == "" {
			continue
		}
		out = append(out, scenario{name: d.name, input: bills, exactlyOnceOnly: true,
			note: "billing, and its tables bills_accepted and account_totals in " + d.kind + " (" + d.mode + "); done when every row is visible",
			run:  runBillingDB(url, d.mode), verify: verifyBilling})
	}
	return out
}

// openSQL opens a database/sql pool on url for the scenario's own reads.
func openSQL(raw string) (*sql.DB, error) {
	u, err := sluicedb.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "postgres" {
		return sql.Open("pgx", u.String())
	}
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = u.User, u.Password, "tcp", fmt.Sprintf("%s:%d", u.Host, u.Port), u.Database
	return sql.Open("mysql", c.FormatDSN())
}

// runBillingDB runs billing with its database output on fresh tables. Its
// progress is the app's committed records, held one short of done until
// every bill's row is visible: offsets mode writes after the commit, and
// its lag counts.
func runBillingDB(url, mode string) func(context.Context, jobEnv, func(error)) (job, error) {
	return func(ctx context.Context, e jobEnv, onExit func(error)) (job, error) {
		reader, err := openSQL(url)
		if err != nil {
			return job{}, err
		}
		for _, t := range []string{examples.BillsAcceptedTable, examples.AccountTotalsTable} {
			if _, err := reader.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
				reader.Close()
				return job{}, fmt.Errorf("bench: drop %s: %w", t, err)
			}
		}
		db, err := billingdb.Open(ctx, billingdb.Config{URL: url, Mode: mode, CreateTables: true})
		if err != nil {
			reader.Close()
			return job{}, err
		}
		group := "bench-" + fmt.Sprint(time.Now().UnixNano())
		stop, app, err := start(ctx, examples.BillingWithDB("in", "out", "out2", "dlq", db.BillingDB), onExit,
			append(billingOptions(), e.opts(group)...)...)
		if err != nil {
			db.Close()
			reader.Close()
			return job{}, err
		}
		var rows atomic.Int64
		pctx, stopPolling := context.WithCancel(ctx)
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			for pctx.Err() == nil {
				var n int64
				if err := reader.QueryRowContext(pctx, "SELECT count(*) FROM "+examples.BillsAcceptedTable).Scan(&n); err == nil {
					rows.Store(n)
				}
				select {
				case <-pctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		// bills(n) makes n bills of which n/2 pass the repartition
		// topic: the job is done at n + n/2 processed, and the database
		// at n rows, which this maps onto the same count.
		return job{func() error {
			stopPolling()
			<-polled
			err := stop()
			db.Close()
			reader.Close()
			return err
		}, func() int64 {
			r := rows.Load()
			return min(app.Stats().Processed.Load(), r+r/2)
		}, app.Stats().Produced.Load, app.Stats().LoopTime}, nil
	}
}
