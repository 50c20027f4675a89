package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The README's by-hand tour, run as written: the section is cut out of
// README.md and its blocks are run with the built sluice binary on PATH,
// following the conventions the section states:
//
//   - a line starting with "$ " is a command (run with sh -c), the lines
//     after it up to the next command its output; "..." stands for any
//     text, a line of its own for any lines;
//   - a block starting with "# terminal N" runs in the background and keeps
//     running: its command's output lines are waited for in order, other
//     lines may come between them; a later block for the same terminal
//     without a command waits for more lines, and "^C" sends it SIGINT and
//     waits for it to exit 0;
//   - every other block is terminal 1: each command must exit 0 and print
//     exactly its output.
//
// The substitutions, as the section says: each distinct 127.0.0.1:PORT is
// replaced by a free loopback port, and every command gets
// SLUICE_BOOTSTRAP_SERVERS, the broker's replaced address.

const tourHeading = "## By hand, with the sluice binary"

// tourSection returns the section of readme under tourHeading, up to the
// next heading of its level.
func tourSection(readme string) (string, error) {
	_, rest, ok := strings.Cut(readme, "\n"+tourHeading+"\n")
	if !ok {
		return "", fmt.Errorf("README has no %q section", tourHeading)
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section, nil
}

// tourStep is one command or wait of the tour.
type tourStep struct {
	line      int    // in the section, for messages
	terminal  int    // 1: run to its end; others: in the background
	command   string // "" for a wait or ^C
	interrupt bool
	expect    []string
}

var terminalComment = regexp.MustCompile(`^# terminal (\d+)$`)

// parseTour reads the steps of the section's ```sh blocks.
func parseTour(section string) ([]tourStep, error) {
	var steps []tourStep
	lines := strings.Split(section, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: a ```sh block without its end", i+1)
		}
		block := lines[start:end]
		i = end
		terminal := 1
		if len(block) > 0 {
			if m := terminalComment.FindStringSubmatch(block[0]); m != nil {
				terminal, _ = strconv.Atoi(m[1])
				if terminal < 2 {
					return nil, fmt.Errorf("line %d: # terminal %d: background terminals are 2 and up", start+1, terminal)
				}
				block = block[1:]
				start++
			}
		}
		if len(block) == 0 {
			return nil, fmt.Errorf("line %d: an empty block", start)
		}
		var cur *tourStep
		for j, l := range block {
			switch {
			case strings.HasPrefix(l, "$ "):
				steps = append(steps, tourStep{line: start + j + 1, terminal: terminal, command: strings.TrimPrefix(l, "$ ")})
				cur = &steps[len(steps)-1]
			case l == "^C" && terminal > 1:
				steps = append(steps, tourStep{line: start + j + 1, terminal: terminal, interrupt: true})
				cur = nil
			case cur == nil && terminal > 1:
				steps = append(steps, tourStep{line: start + j + 1, terminal: terminal})
				cur = &steps[len(steps)-1]
				cur.expect = append(cur.expect, l)
			case cur == nil:
				return nil, fmt.Errorf("line %d: output %q before any command", start+j+1, l)
			default:
				cur.expect = append(cur.expect, l)
			}
		}
	}
	if len(steps) == 0 {
		return nil, errors.New("no ```sh blocks")
	}
	return steps, nil
}

// linePattern is the regexp of one expected line: "..." is any text.
func linePattern(l string) *regexp.Regexp {
	parts := strings.Split(l, "...")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// matchAll reports whether got is exactly the expected lines, a line "..."
// standing for any lines.
func matchAll(expect, got []string) bool {
	if len(expect) == 0 {
		return len(got) == 0
	}
	if expect[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matchAll(expect[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && linePattern(expect[0]).MatchString(got[0]) && matchAll(expect[1:], got[1:])
}

// matchFrom matches expect as a subsequence of got from line from; it
// returns the line after the last one matched, or -1.
func matchFrom(expect, got []string, from int) int {
	for _, e := range expect {
		if e == "..." {
			continue
		}
		re := linePattern(e)
		for from < len(got) && !re.MatchString(got[from]) {
			from++
		}
		if from == len(got) {
			return -1
		}
		from++
	}
	return from
}

// lines returns the complete lines written so far.
func (b *syncBuffer) lines() []string {
	s := b.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.Split(s[:i], "\n")
	}
	return nil
}

// terminal is a background command of the tour.
type terminal struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	cursor int // lines already matched
	done   chan struct{}
	err    error
}

// tourEnv is where and how the tour's commands run.
type tourEnv struct {
	dir   string // the working directory
	env   []string
	ports map[string]string // README address → the test's
	// Bounds: a command of terminal 1, a wait for a background
	// terminal's lines, its exit after ^C.
	commandTimeout, waitTimeout time.Duration
}

// substitute replaces the README's addresses by the test's.
func (e tourEnv) substitute(s string) string {
	for from, to := range e.ports {
		s = strings.ReplaceAll(s, from, to)
	}
	return s
}

var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// newTourEnv picks a free loopback port for each address of section and
// a PATH starting with bin.
func newTourEnv(t *testing.T, section, bin string) tourEnv {
	t.Helper()
	e := tourEnv{dir: t.TempDir(), ports: map[string]string{}, commandTimeout: 30 * time.Second, waitTimeout: 30 * time.Second}
	for _, addr := range loopbackAddr.FindAllString(section, -1) {
		if _, ok := e.ports[addr]; ok {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		e.ports[addr] = ln.Addr().String()
		ln.Close()
	}
	broker, ok := e.ports["127.0.0.1:9092"]
	if !ok {
		broker = "127.0.0.1:9092"
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "LC_ALL=") {
			e.env = append(e.env, kv)
		}
	}
	e.env = append(e.env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "LC_ALL=C", "SLUICE_BOOTSTRAP_SERVERS="+broker)
	return e
}

// runTour runs steps in env, logging what it runs; it returns the first
// step that failed. Every background command it started is stopped before
// it returns.
func runTour(t *testing.T, env tourEnv, steps []tourStep) (err error) {
	terminals := map[int]*terminal{}
	var order []int // terminals in the order their commands started
	defer func() {
		// As a user would: the instances first, all at once, then
		// the broker they need to shut down cleanly (the first).
		stop := func(ns []int) {
			for _, n := range ns {
				// The process group: the command and whatever it
				// started, as a terminal's Ctrl-C reaches them.
				_ = syscall.Kill(-terminals[n].cmd.Process.Pid, syscall.SIGINT)
			}
			for _, n := range ns {
				term := terminals[n]
				select {
				case <-term.done:
				case <-time.After(env.waitTimeout):
					_ = syscall.Kill(-term.cmd.Process.Pid, syscall.SIGKILL)
					<-term.done
					if err == nil {
						err = fmt.Errorf("terminal %d did not stop on SIGINT", n)
					}
				}
				t.Logf("terminal %d:\n%s", n, strings.Join(term.out.lines(), "\n"))
			}
		}
		if len(order) > 0 {
			stop(order[1:])
			stop(order[:1])
		}
	}()
	for _, s := range steps {
		where := fmt.Sprintf("line %d (terminal %d)", s.line, s.terminal)
		command := env.substitute(s.command)
		expect := make([]string, len(s.expect))
		for i, l := range s.expect {
			expect[i] = env.substitute(l)
		}
		term := terminals[s.terminal]
		switch {
		case s.terminal == 1:
			t.Logf("$ %s", command)
			ctx, cancel := context.WithTimeout(context.Background(), env.commandTimeout)
			cmd := exec.CommandContext(ctx, "sh", "-c", command)
			cmd.Dir, cmd.Env = env.dir, env.env
			out, runErr := cmd.CombinedOutput()
			cancel()
			got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(out) == 0 {
				got = nil
			}
			if runErr != nil {
				return fmt.Errorf("%s: %s: %w\n%s", where, command, runErr, out)
			}
			if !matchAll(expect, got) {
				return fmt.Errorf("%s: %s printed\n%s\nwant\n%s", where, command, out, strings.Join(expect, "\n"))
			}
		case s.command != "":
			if term != nil {
				return fmt.Errorf("%s: terminal %d runs a command already", where, s.terminal)
			}
			t.Logf("terminal %d $ %s", s.terminal, command)
			// exec: Ctrl-C in a terminal reaches the command, not
			// the shell that started it, which would die of it.
			cmd := exec.Command("sh", "-c", "exec "+command)
			term = &terminal{cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
			cmd.Dir, cmd.Env = env.dir, env.env
			cmd.Stdout, cmd.Stderr = term.out, term.out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Start(); err != nil {
				return fmt.Errorf("%s: %s: %w", where, command, err)
			}
			go func() { term.err = cmd.Wait(); close(term.done) }()
			terminals[s.terminal] = term
			order = append(order, s.terminal)
			fallthrough
		case !s.interrupt:
			if term == nil {
				return fmt.Errorf("%s: no command runs in terminal %d", where, s.terminal)
			}
			deadline := time.Now().Add(env.waitTimeout)
			for {
				if next := matchFrom(expect, term.out.lines(), term.cursor); next >= 0 {
					term.cursor = next
					break
				}
				select {
				case <-term.done:
					if next := matchFrom(expect, term.out.lines(), term.cursor); next >= 0 {
						term.cursor = next
						break
					}
					return fmt.Errorf("%s: the command exited (%v) before printing\n%s\nit printed\n%s", where, term.err,
						strings.Join(expect, "\n"), strings.Join(term.out.lines(), "\n"))
				case <-time.After(20 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s: no lines\n%s\nafter %v; it printed\n%s", where, strings.Join(expect, "\n"),
						env.waitTimeout, strings.Join(term.out.lines(), "\n"))
				}
			}
		default: // ^C
			if term == nil {
				return fmt.Errorf("%s: ^C, but no command runs in terminal %d", where, s.terminal)
			}
			t.Logf("terminal %d ^C", s.terminal)
			_ = syscall.Kill(-term.cmd.Process.Pid, syscall.SIGINT)
			select {
			case <-term.done:
			case <-time.After(env.waitTimeout):
				return fmt.Errorf("%s: still running %v after ^C", where, env.waitTimeout)
			}
			if term.err != nil {
				return fmt.Errorf("%s: exited with %v after ^C\n%s", where, term.err, strings.Join(term.out.lines(), "\n"))
			}
		}
	}
	return nil
}

// tourBin is the directory of the sluice binary the tour tests built, removed
// by TestMain.
var tourBin string

// buildSluice builds the sluice binary once for the tour tests.
var buildSluice = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "sluice-tour-")
	if err != nil {
		return "", err
	}
	tourBin = dir
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "sluice"), ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if tourBin != "" {
		os.RemoveAll(tourBin)
	}
	os.Exit(code)
}

// tourPrerequisites builds sluice and checks for curl: missing, the test
// is skipped, or fails under CI=true.
func tourPrerequisites(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is not installed (Debian package curl); CI must have it")
		}
		t.Skip("curl is not installed: install the Debian package curl to run the README tour")
	}
	if raceEnabled {
		// CI's race step repeats cmd/...; the tour's sluice is a
		// binary of its own, built without the detector.
		t.Skip("the README tour runs a separate binary: nothing for the race detector")
	}
	if testing.Short() {
		t.Skip("the README tour runs processes for ~30 s; not with -short")
	}
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// readmeTour returns README's by-hand section and its steps.
func readmeTour(t *testing.T) (string, []tourStep) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section, err := tourSection(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseTour(section)
	if err != nil {
		t.Fatal(err)
	}
	return section, steps
}

// TestTour runs README's by-hand section as written.
func TestTour(t *testing.T) {
	bin := tourPrerequisites(t)
	section, steps := readmeTour(t)
	terminals := map[int]bool{}
	for _, s := range steps {
		terminals[s.terminal] = true
	}
	// What the section must show: the broker, two instances of
	// wordcount, a takeover, each example.
	for _, want := range []string{"$ sluice broker", "$ sluice run wordcount", "^C", "$ curl", "sluice produce", "sluice consume",
		"sluice run billing", "sluice run pageviews", "sluice run enrich", "--create-topics"} {
		if !strings.Contains(section, want) {
			t.Errorf("the tour lacks %q", want)
		}
	}
	start := time.Now()
	env := newTourEnv(t, section, bin)
	if err := runTour(t, env, steps); err != nil {
		t.Fatal(err)
	}
	t.Logf("the tour ran %d steps in %d terminals in %v", len(steps), len(terminals), time.Since(start).Round(time.Millisecond))
}

// TestTourCheckerFails: the tour's runner fails on a wrong output, a
// failing command, a background line that never comes and a ^C that does
// not end in a clean exit; and passes the same section when it is right.
func TestTourCheckerFails(t *testing.T) {
	bin := tourPrerequisites(t)
	const ok = "```sh\n# terminal 2\n$ sluice broker --listen 127.0.0.1:9092\nsluice broker listening on 127.0.0.1:9092\n```\n\n" +
		"```sh\n$ sluice topic create t --partitions 2\ncreated topic t (2 partitions)\n$ printf 'a|1\\nb|2\\n' | sluice produce t --key-separator '|'\nproduced 2 records to t\n" +
		"$ sluice consume t --from-beginning | sort\na\t1\nb\t2\n```\n\n```sh\n# terminal 2\n^C\n```\n"
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"right", "", "", ""},
		{"wrong output", "b\t2\n```", "b\t3\n```", "printed"},
		{"missing output line", "a\t1\nb\t2\n", "a\t1\n", "printed"},
		{"failing command", "sluice topic create t --partitions 2", "sluice topic create t --partitions 0", "exit status"},
		{"line never printed", "listening on 127.0.0.1:9092", "listening on 127.0.0.1:9092 for ever", "no lines"},
		{"^C of a command that exits badly", "$ sluice broker --listen 127.0.0.1:9092", "$ sh -c 'sluice broker --listen 127.0.0.1:9092; exit 3'", "exited with"},
	} {
		t.Run(c.name, func(t *testing.T) {
			section := strings.Replace(ok, c.from, c.to, 1)
			if section == ok && c.from != "" {
				t.Fatalf("%q is not in the section", c.from)
			}
			steps, err := parseTour(section)
			if err != nil {
				t.Fatal(err)
			}
			env := newTourEnv(t, section, bin)
			env.waitTimeout = 3 * time.Second
			err = runTour(t, env, steps)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("the right section failed: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("runTour: %v, want an error with %q", err, c.want)
			}
		})
	}
}

// TestTourParse: the conventions, on the README's own section: each
// background terminal starts with a command before it is waited on or
// interrupted, and the patterns match as the section says.
func TestTourParse(t *testing.T) {
	_, steps := readmeTour(t)
	started := map[int]bool{}
	for _, s := range steps {
		if s.terminal > 1 && s.command == "" && !started[s.terminal] {
			t.Errorf("line %d: terminal %d is waited on or interrupted before a command runs there", s.line, s.terminal)
		}
		if s.command != "" {
			started[s.terminal] = true
		}
	}
	for _, c := range []struct {
		expect, got []string
		want        bool
	}{
		{[]string{"a", "b"}, []string{"a", "b"}, true},
		{[]string{"a", "b"}, []string{"a", "b", "c"}, false},
		{[]string{"a", "..."}, []string{"a", "b", "c"}, true},
		{[]string{"x=... y=2"}, []string{"x=1 y=2"}, true},
		{[]string{"x=... y=2"}, []string{"x=1 y=3"}, false},
		{[]string{"a.b"}, []string{"aXb"}, false},
		{nil, nil, true},
		{nil, []string{""}, false},
	} {
		if got := matchAll(c.expect, c.got); got != c.want {
			t.Errorf("matchAll(%q, %q) = %t", c.expect, c.got, got)
		}
	}
	if n := matchFrom([]string{"b", "d"}, []string{"a", "b", "c", "d", "e"}, 0); n != 4 {
		t.Errorf("matchFrom = %d, want 4", n)
	}
	if n := matchFrom([]string{"d", "b"}, []string{"a", "b", "c", "d", "e"}, 0); n != -1 {
		t.Errorf("matchFrom out of order = %d, want -1", n)
	}
	if _, err := tourSection("# x\n## Other\n"); err == nil {
		t.Error("tourSection of a README without the section: no error")
	}
}
