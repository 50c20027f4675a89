package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrMissing is wrapped by NewPostgres and NewMariaDB when the server's
// binaries are not installed.
var ErrMissing = errors.New("testdb: database server not installed")

// Required reports whether a missing server must fail tests rather than
// skip them: under CI=true or SLUICE_REQUIRE_DB=1.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("SLUICE_REQUIRE_DB") == "1"
}

// startFor starts a server with newServer, stopped when tb ends; a
// missing server skips or fails tb (see handle).
func startFor[S interface{ Stop() error }](tb testing.TB, newServer func(context.Context) (S, error)) S {
	tb.Helper()
	s, err := newServer(context.Background())
	if err != nil {
		handle(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// handle skips or fails tb for err from NewPostgres or NewMariaDB.
func handle(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrMissing) && !Required() {
		tb.Skipf("%v (set CI=true or SLUICE_REQUIRE_DB=1 to make this a failure)", err)
	}
	tb.Fatal(err)
}

// freePort returns a loopback port nobody listened on a moment ago. Another
// process may take it before the server binds it, so starts are retried.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testdb: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// lookBin finds the first of names on PATH or in dirs (glob patterns, the
// last match first so the newest version wins).
func lookBin(dirs []string, names ...string) string {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	for _, pat := range dirs {
		matches, _ := filepath.Glob(pat)
		slices.Reverse(matches)
		for _, d := range matches {
			for _, n := range names {
				p := filepath.Join(d, n)
				if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
					return p
				}
			}
		}
	}
	return ""
}

// process is one server process this package started: it alone is
// signalled, with its process group (PostgreSQL's backends), and waited
// for.
type process struct {
	cmd  *exec.Cmd
	log  string // the server's own log, quoted when it ends unasked
	done chan struct{}
	err  error // of Wait, once done is closed
}

// startProcess starts cmd with its output appended to outPath; logPath is
// where the server writes its log (the same file for PostgreSQL).
func startProcess(cmd *exec.Cmd, outPath, logPath string) (*process, error) {
	log, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testdb: open the server log: %w", err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// A group of its own, so that a stop that has to force it ends the
	// server's children too, and nothing else.
	cmd.SysProcAttr.Setpgid = true
	// A test binary killed by its timeout leaves no server behind.
	// (PostgreSQL's backends exit when their postmaster dies.)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("testdb: start %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits up to grace for the process to exit, then kills
// its process group. A server that had already ended is an error, with the
// end of its log: a test that saw its connections fail learns why.
func (p *process) stop(sig syscall.Signal, grace time.Duration) error {
	if p.exited() {
		return fmt.Errorf("testdb: %s (pid %d) had ended before it was stopped: %v%s", filepath.Base(p.cmd.Path), p.cmd.Process.Pid, p.err, logTail(p.log))
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return p.endedBy(sig)
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return fmt.Errorf("testdb: %s (pid %d) ignored %v for %v and was killed", filepath.Base(p.cmd.Path), p.cmd.Process.Pid, sig, grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("testdb: %s (pid %d) survived SIGKILL", filepath.Base(p.cmd.Path), p.cmd.Process.Pid)
	}
}

// endedBy reports how the process ended, once done is closed, if that was
// neither a clean exit nor sig: a server caught crashing (its handler
// still writing the stack) when a test stopped it.
func (p *process) endedBy(sig syscall.Signal) error {
	var ee *exec.ExitError
	if p.err == nil || errors.As(p.err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == sig {
		return nil
	}
	return fmt.Errorf("testdb: %s (pid %d), stopped with %v, ended: %v%s", filepath.Base(p.cmd.Path), p.cmd.Process.Pid, sig, p.err, logTail(p.log))
}

// waitReady calls ready until it succeeds, the process exits or timeout
// passes.
func waitReady(ctx context.Context, p *process, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("testdb: %s exited at start: %v", filepath.Base(p.cmd.Path), p.err)
		}
		tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(tctx)
		tcancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testdb: %s not ready after %v: %w", filepath.Base(p.cmd.Path), timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// logTail returns the end of a server log, for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\n--- " + path + ":\n" + strings.TrimSpace(string(b))
}

func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("testdb: %s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// running is the server process a Postgres or MariaDB has now, if any.
type running struct {
	mu   sync.Mutex
	proc *process // nil while stopped
}

func (r *running) set(p *process) {
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
}

// take returns the process and forgets it.
func (r *running) take() *process {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.proc
	r.proc = nil
	return p
}

// restart stops the process with sig (if one runs) and calls start.
func (r *running) restart(ctx context.Context, sig syscall.Signal, grace time.Duration, start func(context.Context) error) error {
	if p := r.take(); p != nil {
		if err := p.stop(sig, grace); err != nil {
			return err
		}
	}
	return start(ctx)
}

// stopAndRemove stops the process with sig (if one runs) and removes dir.
func (r *running) stopAndRemove(sig syscall.Signal, grace time.Duration, dir string) error {
	var err error
	if p := r.take(); p != nil {
		err = p.stop(sig, grace)
	}
	if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
		err = fmt.Errorf("testdb: %w", rerr)
	}
	return err
}
