package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDB is a private MariaDB server. Its methods are safe for concurrent
// use.
type MariaDB struct {
	bin      string // mariadbd
	dir      string
	data     string
	sock     string
	log      string
	port     int
	password string

	run running
}

// mariadbDirs are searched after PATH (a variable for the test of a
// missing server).
var mariadbDirs = []string{"/usr/sbin", "/usr/bin", "/usr/local/mysql/bin"}

// MariaDBUser is the user, with every privilege, that URL and DSN name. The
// package's own administration goes through root on the unix socket, so
// that KillConnections(ctx, MariaDBUser) spares it.
const MariaDBUser = "sluice"

// MariaDBDatabase is the database URL and DSN name, created at start.
const MariaDBDatabase = "sluice"

// StartMariaDB starts a private MariaDB server stopped when tb ends. It
// skips tb when MariaDB is not installed, and fails it under Required.
func StartMariaDB(tb testing.TB) *MariaDB {
	tb.Helper()
	return startFor(tb, NewMariaDB)
}

// NewMariaDB initialises a data directory in a new temporary directory and
// starts mariadbd on it. Stop it with Stop. It wraps ErrMissing when
// mariadbd or mariadb-install-db is not installed.
func NewMariaDB(ctx context.Context) (*MariaDB, error) {
	dirs := mariadbDirs
	server := lookBin(dirs, "mariadbd", "mysqld")
	install := lookBin(dirs, "mariadb-install-db", "mysql_install_db")
	if server == "" || install == "" {
		return nil, fmt.Errorf("%w: mariadbd and mariadb-install-db are not on PATH nor in /usr/sbin, /usr/bin: install the Debian package mariadb-server", ErrMissing)
	}
	dir, err := os.MkdirTemp("", "sluice-my-")
	if err != nil {
		return nil, fmt.Errorf("testdb: %w", err)
	}
	m := &MariaDB{bin: server, dir: dir, data: filepath.Join(dir, "data"), sock: filepath.Join(dir, "mysqld.sock"),
		log: filepath.Join(dir, "server.log"), password: randomHex(12)}
	if err := m.init(ctx, install); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return m, nil
}

func (m *MariaDB) userArgs() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

func (m *MariaDB) init(ctx context.Context, install string) error {
	args := append([]string{"--no-defaults", "--datadir=" + m.data, "--auth-root-authentication-method=normal",
		"--skip-test-db"}, m.userArgs()...)
	cmd := exec.CommandContext(ctx, install, args...)
	cmd.Dir = m.dir
	if err := run(cmd); err != nil {
		return err
	}
	for try := 0; ; try++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		m.port = port
		err = m.start(ctx)
		if err == nil || try == 2 {
			if err != nil {
				return err
			}
			break
		}
	}
	// The user URL names, over TCP; root stays on the socket only.
	for _, stmt := range []string{
		"CREATE USER IF NOT EXISTS '" + MariaDBUser + "'@'%' IDENTIFIED BY '" + m.password + "'",
		"GRANT ALL PRIVILEGES ON *.* TO '" + MariaDBUser + "'@'%' WITH GRANT OPTION",
		"CREATE DATABASE IF NOT EXISTS " + MariaDBDatabase,
	} {
		if err := m.Exec(ctx, stmt); err != nil {
			_ = m.Stop()
			return err
		}
	}
	return nil
}

func (m *MariaDB) start(ctx context.Context) error {
	args := append([]string{"--no-defaults", "--datadir=" + m.data,
		"--port=" + strconv.Itoa(m.port), "--bind-address=127.0.0.1", "--socket=" + m.sock,
		"--pid-file=" + filepath.Join(m.dir, "mysqld.pid"), "--log-error=" + m.log,
		"--skip-name-resolve", "--max-connections=300", "--character-set-server=utf8mb4",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=32M",
		"--innodb-flush-log-at-trx-commit=1", // prepared XA transactions must survive Crash
	}, m.userArgs()...)
	proc, err := startProcess(exec.Command(m.bin, args...), filepath.Join(m.dir, "stdout.log"), m.log)
	if err != nil {
		return err
	}
	err = waitReady(ctx, proc, 60*time.Second, func(ctx context.Context) error {
		db, err := sql.Open("mysql", m.rootDSN())
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
	if err != nil {
		_ = proc.stop(syscall.SIGKILL, 5*time.Second)
		return fmt.Errorf("%w%s", err, logTail(m.log))
	}
	m.run.set(proc)
	return nil
}

// RootDSN is root's DSN on the server's unix socket: administration
// sessions that KillConnections(ctx, MariaDBUser) spares.
func (m *MariaDB) RootDSN() string { return m.rootDSN() }

func (m *MariaDB) rootDSN() string {
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr = "root", "unix", m.sock
	return c.FormatDSN()
}

// URL is mysql://sluice:password@127.0.0.1:port/sluice.
func (m *MariaDB) URL() string { return m.URLFor(MariaDBDatabase) }

// URLFor is URL for database db.
func (m *MariaDB) URLFor(db string) string {
	u := url.URL{Scheme: "mysql", User: url.UserPassword(MariaDBUser, m.password),
		Host: "127.0.0.1:" + strconv.Itoa(m.port), Path: "/" + db}
	return u.String()
}

// DSN is URL in go-sql-driver/mysql's form.
func (m *MariaDB) DSN() string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = MariaDBUser, m.password, "tcp", "127.0.0.1:"+strconv.Itoa(m.port), MariaDBDatabase
	return c.FormatDSN()
}

// Port is the loopback port the server listens on.
func (m *MariaDB) Port() int { return m.port }

// Password is MariaDBUser's password.
func (m *MariaDB) Password() string { return m.password }

// User is MariaDBUser.
func (m *MariaDB) User() string { return MariaDBUser }

// Dir is the server's temporary directory (its log is server.log).
func (m *MariaDB) Dir() string { return m.dir }

// Exec runs one statement as root.
func (m *MariaDB) Exec(ctx context.Context, stmt string) error {
	db, err := sql.Open("mysql", m.rootDSN())
	if err != nil {
		return fmt.Errorf("testdb: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("testdb: %s: %w", stmt, err)
	}
	return nil
}

// CreateDatabase creates database name and returns its URL.
func (m *MariaDB) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := m.Exec(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		return "", err
	}
	return m.URLFor(name), nil
}

// KillConnections ends, with KILL CONNECTION, every session of user, and
// returns how many it ended.
func (m *MariaDB) KillConnections(ctx context.Context, user string) (int, error) {
	db, err := sql.Open("mysql", m.rootDSN())
	if err != nil {
		return 0, fmt.Errorf("testdb: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE user = ? AND id <> CONNECTION_ID()", user)
	if err != nil {
		return 0, fmt.Errorf("testdb: list the sessions of %q: %w", user, err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("testdb: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	n := 0
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err != nil {
			// 1094 unknown thread id: the session ended on its own.
			if me, ok := err.(*mysql.MySQLError); ok && me.Number == 1094 {
				continue
			}
			return n, fmt.Errorf("testdb: kill connection %d: %w", id, err)
		}
		n++
	}
	return n, nil
}

// Restart stops the server (SIGTERM: a clean shutdown; prepared XA
// transactions stay) and starts it again on the same data directory and
// port.
func (m *MariaDB) Restart(ctx context.Context) error {
	return m.run.restart(ctx, syscall.SIGTERM, 60*time.Second, m.start)
}

// Crash kills the server (SIGKILL: InnoDB recovers at the next start,
// prepared XA transactions included) and starts it again.
func (m *MariaDB) Crash(ctx context.Context) error {
	return m.run.restart(ctx, syscall.SIGKILL, 60*time.Second, m.start)
}

// Stop stops the server and removes its directory. It may be called more
// than once.
func (m *MariaDB) Stop() error { return m.run.stopAndRemove(syscall.SIGTERM, 60*time.Second, m.dir) }
