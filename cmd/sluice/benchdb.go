package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sluice-streams/sluice/internal/bench"
	"github.com/sluice-streams/sluice/internal/testdb"
)

// benchDBEnv passes the database servers to a bench child process in its
// environment (not its command line: the URLs hold passwords).
func benchDBEnv(urls map[string]string) []string {
	env := os.Environ()
	for kind, u := range urls {
		env = append(env, "SLUICE_BENCH_DB_"+kind+"="+u)
	}
	return env
}

func benchDBURLsFromEnv() map[string]string {
	urls := map[string]string{}
	for _, kind := range []string{bench.DBPostgres, bench.DBMariaDB} {
		if u := os.Getenv("SLUICE_BENCH_DB_" + kind); u != "" {
			urls[kind] = u
		}
	}
	return urls
}

// startBenchDBs starts a private PostgreSQL and MariaDB (internal/testdb,
// on loopback, in temporary directories) for the database scenarios.
func startBenchDBs(ctx context.Context, log io.Writer) (map[string]string, func(), error) {
	pg, err := testdb.NewPostgres(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: --db-scenarios: %w", err)
	}
	my, err := testdb.NewMariaDB(ctx)
	if err != nil {
		_ = pg.Stop()
		return nil, nil, fmt.Errorf("bench: --db-scenarios: %w", err)
	}
	fmt.Fprintf(log, "  database servers: PostgreSQL on 127.0.0.1:%d, MariaDB on 127.0.0.1:%d\n", pg.Port(), my.Port())
	return map[string]string{bench.DBPostgres: pg.URL(), bench.DBMariaDB: my.URL()}, func() {
		if err := errors.Join(pg.Stop(), my.Stop()); err != nil {
			fmt.Fprintf(log, "bench: stopping the database servers: %v\n", err)
		}
	}, nil
}
