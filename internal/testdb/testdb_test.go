package testdb

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pg := StartPostgres(t)
	connect := func(app string) *pgx.Conn {
		t.Helper()
		cfg, err := pgx.ParseConfig(pg.URL())
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = app
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	var mpt int
	if err := connect("setup").QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&mpt); err != nil || mpt == 0 {
		t.Fatalf("max_prepared_transactions = %d, %v", mpt, err)
	}
	if os.Geteuid() == 0 {
		var super bool
		var name string
		if err := connect("setup").QueryRow(ctx, "SELECT rolsuper, current_user FROM pg_roles WHERE rolname = current_user").Scan(&super, &name); err != nil || !super || name != PostgresUser {
			t.Fatalf("role %q super %v: %v", name, super, err)
		}
	}

	// TerminateSessions ends the sessions of one application and no other
	// (the other is the negative control).
	victim, bystander := connect("victim"), connect("bystander")
	n, err := pg.TerminateSessions(ctx, "victim")
	if err != nil || n != 1 {
		t.Fatalf("TerminateSessions = %d, %v; want 1", n, err)
	}
	if _, err := victim.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("the terminated session still answers")
	}
	if _, err := bystander.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("a session of another application was ended: %v", err)
	}

	// A prepared transaction survives Restart and Crash; an open one does
	// not (the control).
	c := connect("prep")
	for _, q := range []string{"CREATE TABLE t (v int)", "BEGIN", "INSERT INTO t VALUES (1)", "PREPARE TRANSACTION 'p1'"} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	open := connect("open")
	for _, q := range []string{"BEGIN", "INSERT INTO t VALUES (2)"} {
		if _, err := open.Exec(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pg.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	c = connect("after")
	var gids []string
	rows, _ := c.Query(ctx, "SELECT gid FROM pg_prepared_xacts")
	gids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(gids) != 1 || gids[0] != "p1" {
		t.Fatalf("prepared after restart and crash: %v, %v", gids, err)
	}
	if _, err := c.Exec(ctx, "COMMIT PREPARED 'p1'"); err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := c.QueryRow(ctx, "SELECT coalesce(sum(v), 0) FROM t").Scan(&sum); err != nil || sum != 1 {
		t.Fatalf("sum = %d, %v; want 1 (the prepared row, not the open one)", sum, err)
	}

	url, err := pg.CreateDatabase(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	oc, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	oc.Close(ctx)

	dir := pg.Dir()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Stop left %s: %v", dir, err)
	}
	if _, err := pgx.Connect(ctx, pg.URL()); err == nil {
		t.Fatal("the server still answers after Stop")
	}
}

func TestMariaDB(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := StartMariaDB(t)
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TABLE t (v int) ENGINE=InnoDB", "XA START 'p1'", "INSERT INTO t VALUES (1)", "XA END 'p1'", "XA PREPARE 'p1'"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	// The session of MariaDBUser is killed; root's administration session is not.
	n, err := m.KillConnections(ctx, MariaDBUser)
	if err != nil || n < 1 {
		t.Fatalf("KillConnections = %d, %v", n, err)
	}
	if err := conn.PingContext(ctx); err == nil {
		t.Fatal("the killed session still answers")
	}
	conn.Close()
	if n, err := m.KillConnections(ctx, "nobody-here"); err != nil || n != 0 {
		t.Fatalf("KillConnections of an unknown user = %d, %v", n, err)
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	db2, err := sql.Open("mysql", m.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	var fmtID, gl, bl int
	var data string
	if err := db2.QueryRowContext(ctx, "XA RECOVER").Scan(&fmtID, &gl, &bl, &data); err != nil || data != "p1" {
		t.Fatalf("XA RECOVER after restart and crash: %q, %v", data, err)
	}
	if _, err := db2.ExecContext(ctx, "XA COMMIT 'p1'"); err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := db2.QueryRowContext(ctx, "SELECT sum(v) FROM t").Scan(&sum); err != nil || sum != 1 {
		t.Fatalf("sum = %d, %v", sum, err)
	}
	dir := m.Dir()
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Fatalf("Stop left %s: %v", dir, err)
	}
}

// TestRequired: the switch that turns a skip into a failure.
func TestRequired(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv("SLUICE_REQUIRE_DB", "")
	if Required() {
		t.Fatal("Required with neither variable set")
	}
	t.Setenv("CI", "true")
	if !Required() {
		t.Fatal("not Required under CI=true")
	}
	t.Setenv("CI", "")
	t.Setenv("SLUICE_REQUIRE_DB", "1")
	if !Required() {
		t.Fatal("not Required under SLUICE_REQUIRE_DB=1")
	}
}

// TestMissing: with no binaries to be found, the servers' constructors
// wrap ErrMissing naming the package, and Start* skips (CI unset); the
// control is every other test here, which finds them.
func TestMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	t.Setenv("SLUICE_REQUIRE_DB", "")
	pd, md := postgresDirs, mariadbDirs
	postgresDirs, mariadbDirs = []string{t.TempDir()}, []string{t.TempDir()}
	defer func() { postgresDirs, mariadbDirs = pd, md }()
	ctx := context.Background()
	if _, err := NewPostgres(ctx); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "postgresql") {
		t.Fatalf("NewPostgres = %v", err)
	}
	if _, err := NewMariaDB(ctx); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "mariadb-server") {
		t.Fatalf("NewMariaDB = %v", err)
	}
	for name, start := range map[string]func(testing.TB){
		"postgres": func(tb testing.TB) { StartPostgres(tb) },
		"mariadb":  func(tb testing.TB) { StartMariaDB(tb) },
	} {
		var skipped bool
		t.Run(name, func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			start(t)
		})
		if !skipped {
			t.Errorf("Start %s with no binaries did not skip", name)
		}
	}
}
