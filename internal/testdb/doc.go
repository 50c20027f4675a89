// Package testdb starts private database servers for tests: a PostgreSQL
// (initdb + postgres) and a MariaDB (mariadb-install-db + mariadbd), each in
// a temporary directory, listening on a free loopback port, and stopped, by
// the pid it started, when the test ends.
//
//	pg := testdb.StartPostgres(t)        // skips when PostgreSQL is missing
//	conn, err := pgx.Connect(ctx, pg.URL())
//	...
//	pg.TerminateSessions(ctx, "billing") // pg_terminate_backend
//	pg.Restart(ctx)                      // prepared transactions survive
//
//	my := testdb.StartMariaDB(t)
//	db, err := sql.Open("mysql", my.DSN())
//	my.KillConnections(ctx, my.User())   // KILL CONNECTION
//
// When the server's binaries are missing, StartPostgres and StartMariaDB
// skip the test with a message naming the Debian package to install
// (postgresql, mariadb-server), except under CI=true or SLUICE_REQUIRE_DB=1,
// where a missing server fails the test: CI must never pass by skipping.
//
// PostgreSQL refuses to run as root. When the test runs as root, initdb and
// postgres run as the Debian package's own account, postgres, or as nobody
// where that account does not exist, in a data directory that account owns.
// MariaDB runs as root with --user=root. Both servers get a superuser
// sluice whose random password is in their URL.
package testdb
