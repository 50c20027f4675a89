package testdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a private PostgreSQL server. Its methods are safe for
// concurrent use.
type Postgres struct {
	bin      string // directory of initdb and postgres
	dir      string // the temporary directory, removed by Stop
	data     string // the data directory, in dir
	log      string
	port     int
	password string
	cred     *syscall.Credential // the account the server runs as; nil: ours

	run running
}

// postgresDirs are searched after PATH (a variable for the test of a
// missing server).
var postgresDirs = []string{"/usr/lib/postgresql/*/bin"}

// PostgresUser is the superuser every Postgres server has.
const PostgresUser = "sluice"

// StartPostgres starts a private PostgreSQL server stopped when tb ends. It
// skips tb when PostgreSQL is not installed, and fails it under Required.
func StartPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	return startFor(tb, NewPostgres)
}

// NewPostgres initialises a data directory in a new temporary directory and
// starts a server on it, with max_prepared_transactions = 64. Stop it with
// Stop. It wraps ErrMissing when initdb or postgres is not installed.
func NewPostgres(ctx context.Context) (*Postgres, error) {
	initdb := lookBin(postgresDirs, "initdb")
	if initdb != "" {
		// initdb finds postgres beside itself; /usr/local/bin may hold a
		// symbolic link to the real directory.
		if real, err := filepath.EvalSymlinks(initdb); err == nil {
			initdb = real
		}
	}
	bin := filepath.Dir(initdb)
	if initdb == "" {
		return nil, fmt.Errorf("%w: PostgreSQL's initdb and postgres are not on PATH nor in /usr/lib/postgresql/*/bin: install the Debian package postgresql", ErrMissing)
	}
	if _, err := os.Stat(filepath.Join(bin, "postgres")); err != nil {
		return nil, fmt.Errorf("%w: no postgres beside %s: install the Debian package postgresql", ErrMissing, initdb)
	}
	dir, err := os.MkdirTemp("", "sluice-pg-")
	if err != nil {
		return nil, fmt.Errorf("testdb: %w", err)
	}
	p := &Postgres{bin: bin, dir: dir, data: filepath.Join(dir, "pg", "data"), log: filepath.Join(dir, "pg", "server.log"), password: randomHex(12)}
	if err := p.init(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return p, nil
}

func (p *Postgres) init(ctx context.Context) error {
	own := filepath.Join(p.dir, "pg")
	if err := os.Mkdir(own, 0o700); err != nil {
		return fmt.Errorf("testdb: %w", err)
	}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root: run it as the account Debian's
		// package made for it, or as nobody, in a directory it owns.
		cred, err := serverAccount()
		if err != nil {
			return err
		}
		p.cred = cred
		if err := os.Chmod(p.dir, 0o755); err != nil {
			return fmt.Errorf("testdb: %w", err)
		}
		if err := os.Chown(own, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("testdb: %w", err)
		}
	}
	pwfile := filepath.Join(own, "pwfile")
	if err := os.WriteFile(pwfile, []byte(p.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("testdb: %w", err)
	}
	if p.cred != nil {
		if err := os.Chown(pwfile, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return fmt.Errorf("testdb: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "initdb"), "-D", p.data, "-U", PostgresUser,
		"--pwfile="+pwfile, "--auth-host=scram-sha-256", "--auth-local=trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	cmd.Dir = own
	if err := run(cmd); err != nil {
		return err
	}
	for try := 0; ; try++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		p.port = port
		err = p.start(ctx)
		if err == nil || try == 2 {
			return err
		}
	}
}

// serverAccount returns the account a root test runs PostgreSQL as.
func serverAccount() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
	}
	return nil, errors.New("testdb: running as root and neither the postgres nor the nobody account exists to run PostgreSQL as")
}

func (p *Postgres) start(ctx context.Context) error {
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), "-D", p.data,
		"-p", strconv.Itoa(p.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+filepath.Join(p.dir, "pg"),
		"-c", "max_prepared_transactions=64",
		"-c", "max_connections=200",
		"-c", "fsync=on", // prepared transactions must survive Crash
		"-c", "shared_buffers=32MB")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	proc, err := startProcess(cmd, p.log, p.log)
	if err != nil {
		return err
	}
	err = waitReady(ctx, proc, 60*time.Second, func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, p.URL())
		if err != nil {
			return err
		}
		return c.Close(ctx)
	})
	if err != nil {
		_ = proc.stop(syscall.SIGQUIT, 5*time.Second)
		return fmt.Errorf("%w%s", err, logTail(p.log))
	}
	p.run.set(proc)
	return nil
}

// URL is the server's database postgres as the superuser, with its password.
func (p *Postgres) URL() string { return p.URLFor("postgres") }

// URLFor is URL for database db.
func (p *Postgres) URLFor(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(PostgresUser, p.password),
		Host: "127.0.0.1:" + strconv.Itoa(p.port), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Port is the loopback port the server listens on.
func (p *Postgres) Port() int { return p.port }

// Password is the superuser's password.
func (p *Postgres) Password() string { return p.password }

// User is the superuser's name.
func (p *Postgres) User() string { return PostgresUser }

// Dir is the server's temporary directory (its log is pg/server.log).
func (p *Postgres) Dir() string { return p.dir }

// CreateDatabase creates database name and returns its URL.
func (p *Postgres) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := p.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return p.URLFor(name), nil
}

func (p *Postgres) exec(ctx context.Context, sql string, args ...any) error {
	c, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		return fmt.Errorf("testdb: connect: %w", err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("testdb: %s: %w", sql, err)
	}
	return nil
}

// TerminateSessions ends, with pg_terminate_backend, every client session
// whose application_name or user is match, and returns how many it ended.
func (p *Postgres) TerminateSessions(ctx context.Context, match string) (int, error) {
	c, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		return 0, fmt.Errorf("testdb: connect: %w", err)
	}
	defer c.Close(context.Background())
	var n int
	err = c.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity
		WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
		  AND (application_name = $1 OR usename = $1)`, match).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("testdb: terminate the sessions of %q: %w", match, err)
	}
	return n, nil
}

// Restart stops the server (fast shutdown: sessions end, open transactions
// roll back, prepared ones stay) and starts it again on the same data
// directory and port.
func (p *Postgres) Restart(ctx context.Context) error {
	return p.run.restart(ctx, syscall.SIGINT, 30*time.Second, p.start)
}

// Crash stops the server the way a crash does (immediate shutdown: no
// checkpoint, WAL replayed at the next start) and starts it again.
func (p *Postgres) Crash(ctx context.Context) error {
	return p.run.restart(ctx, syscall.SIGQUIT, 30*time.Second, p.start)
}

// Stop stops the server and removes its directory. It may be called more
// than once.
func (p *Postgres) Stop() error { return p.run.stopAndRemove(syscall.SIGINT, 30*time.Second, p.dir) }
