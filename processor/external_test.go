package processor_test

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/sink/sinkfile"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
)

// External sinks (invariant 7) on real processes: the test binary re-execs
// itself as an instance (TestExternalSinkChild) that writes a stream of
// uniquely numbered records through a sink on disk (package sinkfile) and
// kills itself (SIGKILL) or freezes (SIGSTOP) at a crash point of the
// protocol; another instance then finishes the job, and the checker reads
// the store: every input exactly once, nothing left prepared.

// child is what an instance process is told, through its environment.
type child struct {
	Brokers, App, In, State, Sink string
	Mode                          string // twophase, plain and norecovery (its negative controls), offsets, naive (offsets' negative control)
	Crash                         string // the crash point: prepare-before, prepare-after, commit-before, commit-after, write-before, write-after, process
	CrashAt                       int    // at its CrashAt-th call
	Action                        string // kill (default), later (kill 100ms later), stop, or fail
	Want                          int    // exit cleanly once the store holds this many distinct inputs
	ExitAfter                     time.Duration
	CommitInterval                time.Duration // default 30ms
}

func (c child) env() []string {
	return append(os.Environ(), "TPC_CHILD=1",
		"TPC_BROKERS="+c.Brokers, "TPC_APP="+c.App, "TPC_IN="+c.In, "TPC_STATE="+c.State, "TPC_SINK="+c.Sink,
		"TPC_MODE="+c.Mode, "TPC_CRASH="+c.Crash, "TPC_CRASH_AT="+strconv.Itoa(c.CrashAt), "TPC_ACTION="+c.Action,
		"TPC_WANT="+strconv.Itoa(c.Want), "TPC_EXIT_AFTER="+c.ExitAfter.String(), "TPC_COMMIT="+c.CommitInterval.String())
}

func childFromEnv() child {
	at, _ := strconv.Atoi(os.Getenv("TPC_CRASH_AT"))
	want, _ := strconv.Atoi(os.Getenv("TPC_WANT"))
	exitAfter, _ := time.ParseDuration(os.Getenv("TPC_EXIT_AFTER"))
	commit, _ := time.ParseDuration(os.Getenv("TPC_COMMIT"))
	return child{Brokers: os.Getenv("TPC_BROKERS"), App: os.Getenv("TPC_APP"), In: os.Getenv("TPC_IN"),
		State: os.Getenv("TPC_STATE"), Sink: os.Getenv("TPC_SINK"), Mode: os.Getenv("TPC_MODE"),
		Crash: os.Getenv("TPC_CRASH"), CrashAt: at, Action: os.Getenv("TPC_ACTION"), Want: want, ExitAfter: exitAfter,
		CommitInterval: commit}
}

// crasher kills or freezes the process at the CrashAt-th call of its point.
type crasher struct {
	point, action string
	at            int
	n             atomic.Int64
}

// errInjected is what a point fails with under the action fail.
var errInjected = errors.New("injected failure")

// hit acts at the point's CrashAt-th call: kill, stop (freeze until
// SIGCONT), or fail (an error from this call and the 4 after it).
func (c *crasher) hit(point string) error {
	if c == nil || point != c.point {
		return nil
	}
	n := c.n.Add(1)
	switch {
	case c.action == "fail" && n >= int64(c.at) && n < int64(c.at)+5:
		return errInjected
	case n != int64(c.at):
	case c.action == "stop":
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	case c.action == "later":
		// In a moment (100ms): while the records after this one are in an
		// open transaction (this one's are held in its unit until it
		// returns).
		go func() {
			time.Sleep(100 * time.Millisecond)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}()
	case c.action == "":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	return nil
}

// hookedParticipant is sinkfile's Participant with the crash points of the
// protocol around its calls.
type hookedParticipant struct {
	*sinkfile.Participant[string, []byte]
	c *crasher
}

func (h hookedParticipant) Prepare(ctx context.Context, xid string, recs []sink.Record[string, []byte]) error {
	if err := h.c.hit("prepare-before"); err != nil {
		return err
	}
	err := h.Participant.Prepare(ctx, xid, recs)
	h.c.hit("prepare-after")
	return err
}

func (h hookedParticipant) CommitPrepared(ctx context.Context, xid string) error {
	if err := h.c.hit("commit-before"); err != nil {
		return err
	}
	err := h.Participant.CommitPrepared(ctx, xid)
	h.c.hit("commit-after")
	return err
}

// plainParticipant is the negative control: it writes at Prepare, visible
// at once, so there is nothing to roll back or to recover.
type plainParticipant struct{ hookedParticipant }

func (p plainParticipant) Prepare(ctx context.Context, xid string, recs []sink.Record[string, []byte]) error {
	if err := p.c.hit("prepare-before"); err != nil {
		return err
	}
	err := p.Participant.Prepare(ctx, xid, recs)
	if err == nil {
		err = p.Participant.CommitPrepared(ctx, xid)
	}
	p.c.hit("prepare-after")
	return err
}
func (plainParticipant) CommitPrepared(context.Context, string) error   { return nil }
func (plainParticipant) RollbackPrepared(context.Context, string) error { return nil }
func (plainParticipant) Prepared(context.Context, string) ([]string, error) {
	return nil, nil
}

// blindParticipant is the other negative control: two-phase, but its
// Prepared finds nothing, so that recovery resolves nothing.
type blindParticipant struct{ hookedParticipant }

func (blindParticipant) Prepared(context.Context, string) ([]string, error) { return nil, nil }

// hookedStore is sinkfile's Store with crash points around Write.
type hookedStore struct {
	*sinkfile.Store[string, []byte]
	c *crasher
}

func (h hookedStore) Write(ctx context.Context, name, topic string, recs []sink.Record[string, []byte], next map[int32]int64) error {
	if err := h.c.hit("write-before"); err != nil {
		return err
	}
	err := h.Store.Write(ctx, name, topic, recs, next)
	h.c.hit("write-after")
	return err
}

// naiveStore is offsets mode's negative control: it appends every record
// it is handed to a file and stores no offsets, so a restarted writer
// hands it everything again.
type naiveStore struct {
	path string
	c    *crasher
	mu   sync.Mutex
}

func (s *naiveStore) Offsets(context.Context, string, string) (map[int32]int64, error) {
	return map[int32]int64{}, nil
}

func (s *naiveStore) Write(_ context.Context, _, _ string, recs []sink.Record[string, []byte], _ map[int32]int64) error {
	if err := s.c.hit("write-before"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, r := range recs {
		fmt.Fprintf(f, "%s\n", idOf(r.Value))
	}
	err = errors.Join(f.Sync(), f.Close())
	s.c.hit("write-after")
	return err
}

// idOf is the input number a value carries: "<id>|<payload>".
func idOf(v []byte) string {
	id, _, _ := strings.Cut(string(v), "|")
	return id
}

const sinkName = "out-db"

// TestExternalSinkChild is an instance process of the tests below; it
// runs only when re-executed by them.
func TestExternalSinkChild(t *testing.T) {
	if os.Getenv("TPC_CHILD") != "1" {
		t.Skip("an instance process of the external sink tests")
	}
	c := childFromEnv()
	cr := &crasher{point: c.Crash, action: c.Action, at: c.CrashAt}
	tp := topology.New()
	s := topology.MapValues(topology.From(tp, c.In, serde.String, serde.Bytes), func(v []byte) []byte {
		cr.hit("process")
		return v
	})
	var held func() (int, error)
	switch c.Mode {
	case "twophase", "plain", "norecovery":
		p, err := sinkfile.NewParticipant(c.Sink, serde.String, serde.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		var part sink.Participant[string, []byte] = hookedParticipant{p, cr}
		switch c.Mode {
		case "plain":
			part = plainParticipant{hookedParticipant{p, cr}}
		case "norecovery":
			part = blindParticipant{hookedParticipant{p, cr}}
		}
		topology.ToParticipant(s, sinkName, part)
		held = func() (int, error) {
			recs, err := p.Committed()
			return distinct(recs), err
		}
	case "offsets":
		st, err := sinkfile.NewStore(c.Sink, serde.String, serde.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		topology.ToIdempotent(s, sinkName, hookedStore{st, cr}, serde.String, serde.Bytes)
		held = func() (int, error) {
			recs, err := st.Records(sinkName, c.App+"-"+sinkName+"-sink")
			return distinct(recs), err
		}
	case "naive":
		ns := &naiveStore{path: filepath.Join(c.Sink, "naive.log"), c: cr}
		topology.ToIdempotent[string, []byte](s, sinkName, ns, serde.String, serde.Bytes)
		held = func() (int, error) {
			ids, err := readNaive(ns.path)
			set := map[string]bool{}
			for _, id := range ids {
				set[id] = true
			}
			return len(set), err
		}
	}
	app, err := processor.New(tp, processor.ApplicationID(c.App), processor.Brokers(strings.Split(c.Brokers, ",")...),
		processor.StateDir(c.State), processor.CommitInterval(cmp.Or(c.CommitInterval, 30*time.Millisecond)),
		processor.SessionTimeout(6*time.Second), processor.RebalanceTimeout(6*time.Second),
		processor.TransactionTimeout(10*time.Second),
		processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	start := time.Now()
	for {
		select {
		case err := <-done:
			t.Fatalf("instance stopped: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if c.ExitAfter > 0 && time.Since(start) > c.ExitAfter {
			break
		}
		if n, err := held(); err == nil && c.Want > 0 && n >= c.Want {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("timed out")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func distinct(recs []sink.Record[string, []byte]) int {
	set := map[string]bool{}
	for _, r := range recs {
		set[idOf(r.Value)] = true
	}
	return len(set)
}

func readNaive(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ids = append(ids, sc.Text())
	}
	return ids, sc.Err()
}

// checkExactlyOnce is the checker: the ids held are 0..n-1, each once.
func checkExactlyOnce(ids []string, n int) error {
	count := map[string]int{}
	for _, id := range ids {
		count[id]++
	}
	var dup, lost []string
	for id, c := range count {
		if c > 1 {
			dup = append(dup, fmt.Sprintf("%s×%d", id, c))
		}
	}
	for i := range n {
		if count[strconv.Itoa(i)] == 0 {
			lost = append(lost, strconv.Itoa(i))
		}
	}
	if len(count) > n+len(dup) || len(dup) > 0 || len(lost) > 0 {
		return fmt.Errorf("%d records held: %d duplicated (%.10v), %d lost (%.10v)", len(ids), len(dup), dup, len(lost), lost)
	}
	return nil
}

// extHarness runs a scenario: a broker, an input topic fed with n
// adversarial records, instance processes, and the store's directory.
type extHarness struct {
	t        *testing.T
	brokers  []string
	app, in  string
	sinkDir  string
	n        int
	feedDone chan struct{}
	outs     map[*exec.Cmd]*strings.Builder // what each instance logged; read after it ended
}

func newExtHarness(t *testing.T, n int) *extHarness {
	addrs := testBrokers(t)
	h := &extHarness{t: t, brokers: addrs, app: uniq(t, "tpc"), in: uniq(t, "tpc-in"), sinkDir: t.TempDir(), n: n, feedDone: make(chan struct{})}
	cl := setup(t, addrs, 3, h.in)
	keys := testkeys.All()
	go func() {
		// Fed while instances run, so that the records spread over many
		// transactions.
		defer close(h.feedDone)
		for i := range n {
			v := fmt.Sprintf("%d|", i)
			switch i % 4 {
			case 1:
				v += string([]byte{0xff, 0xfe, 0})
			case 2:
				v += strings.Repeat("x", 300)
			}
			cl.Produce(context.Background(), &kgo.Record{Key: []byte(keys[i%len(keys)]), Value: []byte(v)}, nil)
			if i%5 == 4 {
				time.Sleep(10 * time.Millisecond)
			}
		}
		if err := cl.Flush(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { <-h.feedDone })
	return h
}

// start starts an instance process with its own state directory.
func (h *extHarness) start(c child) *exec.Cmd {
	h.t.Helper()
	c.Brokers, c.App, c.In, c.Sink = strings.Join(h.brokers, ","), h.app, h.in, h.sinkDir
	if c.State == "" {
		c.State = h.t.TempDir()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestExternalSinkChild$", "-test.v")
	cmd.Env = c.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if h.outs == nil {
		h.outs = map[*exec.Cmd]*strings.Builder{}
	}
	h.outs[cmd] = out
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if h.t.Failed() {
			h.t.Logf("instance %d (%s %s@%d):\n%s", cmd.Process.Pid, c.Mode, c.Crash, c.CrashAt, tail(out.String(), 4000))
		}
	})
	return cmd
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// wait waits for an instance to end and reports whether it was killed.
func (h *extHarness) wait(cmd *exec.Cmd, timeout time.Duration) (killed bool) {
	h.t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true
		}
		if err != nil {
			h.t.Fatalf("instance failed: %v", err)
		}
		return false
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		h.t.Fatalf("instance did not end within %v", timeout)
		return false
	}
}

// crashAndRestart runs instance c to its crash point (it must be killed
// there), calls between, and then runs the same instance again (its state
// directory) until the store holds all the input, once it is all fed.
func (h *extHarness) crashAndRestart(c child, between func()) (restart *exec.Cmd) {
	h.t.Helper()
	if c.State == "" {
		c.State = h.t.TempDir()
	}
	if !h.wait(h.start(c), 30*time.Second) {
		h.t.Fatal("the instance did not reach its crash point")
	}
	if between != nil {
		between()
	}
	<-h.feedDone
	again := child{Mode: c.Mode, State: c.State, Want: h.n}
	if c.Mode == "norecovery" {
		// It loses records, so it never holds them all: it stops after
		// a while, past the end of the input.
		again.Want, again.ExitAfter = 0, 5*time.Second
	}
	restart = h.start(again)
	h.wait(restart, 45*time.Second)
	return restart
}

// participant opens the store's directory as a reader.
func (h *extHarness) participant() *sinkfile.Participant[string, []byte] {
	p, err := sinkfile.NewParticipant(h.sinkDir, serde.String, serde.Bytes)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *extHarness) committedIDs() []string {
	recs, err := h.participant().Committed()
	if err != nil {
		h.t.Fatal(err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = idOf(r.Value)
		if r.Topic != h.in || r.Offset < 0 {
			h.t.Errorf("record %s has the coordinates %s/%d@%d, not its input's", ids[i], r.Topic, r.Partition, r.Offset)
		}
	}
	return ids
}

func (h *extHarness) prepared() int {
	n, err := h.participant().PreparedCount()
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// TestTwoPhaseSinkCrashPointsConverge kills an instance at each crash
// point of the protocol, restarts, and checks that the store holds every
// input exactly once with nothing left prepared. What the crash left is
// checked too, so that the cases between Prepare and CommitPrepared
// provably hit their point: a prepared transaction is left after
// prepare-after (rolled back by recovery: its Kafka transaction aborted)
// and after commit-before (committed by recovery: its Kafka transaction
// committed). (Before a Prepare, the other tasks' Prepares of the same
// commit may have run.)
func TestTwoPhaseSinkCrashPointsConverge(t *testing.T) {
	for _, tc := range []struct {
		point        string
		leftPrepared bool
		recovery     string // what the restart's recovery logged, a regexp
	}{
		{"prepare-before", false, ""},
		{"prepare-after", true, `recovered prepared transactions".*committed=0 rolled_back=[1-9]`},
		{"commit-before", true, `recovered prepared transactions".*committed=1 `},
		{"commit-after", false, ""},
	} {
		t.Run(tc.point, func(t *testing.T) {
			h := newExtHarness(t, 600)
			restart := h.crashAndRestart(child{Mode: "twophase", Crash: tc.point, CrashAt: 3}, func() {
				if n := h.prepared(); tc.leftPrepared && n == 0 {
					t.Errorf("after the crash nothing is prepared: the crash point was not between Prepare and CommitPrepared")
				}
			})
			if tc.recovery != "" && !regexp.MustCompile(tc.recovery).MatchString(h.outs[restart].String()) {
				t.Errorf("the restart's recovery did not log %q", tc.recovery)
			}
			if err := checkExactlyOnce(h.committedIDs(), h.n); err != nil {
				t.Error(err)
			}
			if n := h.prepared(); n != 0 {
				t.Errorf("%d transactions left prepared after a clean stop", n)
			}
		})
	}
}

// TestTwoPhaseSinkNegativeControl: the same crash with a sink that writes
// without two-phase commit (visible at Prepare) duplicates what the
// aborted Kafka transaction had written, and the checker says so.
func TestTwoPhaseSinkNegativeControl(t *testing.T) {
	h := newExtHarness(t, 600)
	h.crashAndRestart(child{Mode: "plain", Crash: "prepare-after", CrashAt: 3}, nil)
	if err := checkExactlyOnce(h.committedIDs(), h.n); err == nil {
		t.Error("the checker found nothing wrong with a sink that writes without two-phase commit")
	} else {
		t.Logf("as expected: %v", err)
	}
}

// TestTwoPhaseSinkInjectedFailures: a Prepare that fails aborts the Kafka
// transaction, whose records are replayed into a new one; a CommitPrepared
// that fails after the Kafka commit is retried (with backoff) before the
// task prepares again. Five failures in a row of each, in one instance
// that then finishes: every input exactly once, nothing prepared.
func TestTwoPhaseSinkInjectedFailures(t *testing.T) {
	for _, point := range []string{"prepare-before", "commit-before"} {
		t.Run(point, func(t *testing.T) {
			h := newExtHarness(t, 600)
			cmd := h.start(child{Mode: "twophase", Crash: point, CrashAt: 3, Action: "fail", Want: h.n})
			h.wait(cmd, 45*time.Second)
			// The failures took the path under test.
			want := map[string]string{"prepare-before": "a sink could not prepare", "commit-before": "sink commit failed after the Kafka commit"}[point]
			if got := strings.Count(h.outs[cmd].String(), want); got < 2 {
				t.Errorf("the instance logged %q %d times, want 2 or more (5 failures over up to 3 tasks per commit)", want, got)
			}
			if err := checkExactlyOnce(h.committedIDs(), h.n); err != nil {
				t.Error(err)
			}
			if n := h.prepared(); n != 0 {
				t.Errorf("%d transactions left prepared after a clean stop", n)
			}
		})
	}
}

// stopped reports whether pid is stopped (SIGSTOP), from /proc.
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "T")
}

// TestTwoPhaseSinkZombie freezes an instance (SIGSTOP) right after it
// prepared, lets another instance take its tasks over (after the frozen
// one's session timeout) and finish the job, then thaws the zombie: its
// Kafka commit is fenced, and its prepared transaction, rolled back by the
// new owner's recovery, never becomes visible.
func TestTwoPhaseSinkZombie(t *testing.T) {
	h := newExtHarness(t, 600)
	zombie := h.start(child{Mode: "twophase", Crash: "prepare-after", CrashAt: 3, Action: "stop", Want: h.n})
	deadline := time.Now().Add(30 * time.Second)
	for !stopped(zombie.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("the instance did not freeze at its crash point")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if h.prepared() == 0 {
		t.Fatal("the frozen instance left nothing prepared")
	}
	<-h.feedDone
	h.wait(h.start(child{Mode: "twophase", Want: h.n}), 60*time.Second)
	if n := h.prepared(); n != 0 {
		t.Errorf("the new owner left %d transactions prepared: the zombie's was not rolled back", n)
	}
	if err := checkExactlyOnce(h.committedIDs(), h.n); err != nil {
		t.Error(err)
	}
	// Thawed, the zombie finds its commit fenced and stops (the store
	// holds everything already; Run may return the fencing, as it
	// stopped while its session failed).
	syscall.Kill(zombie.Process.Pid, syscall.SIGCONT)
	done := make(chan error, 1)
	go func() { done <- zombie.Wait() }()
	select {
	case err := <-done:
		t.Logf("the zombie ended: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the zombie did not end")
	}
	if err := checkExactlyOnce(h.committedIDs(), h.n); err != nil {
		t.Errorf("after the zombie thawed: %v", err)
	}
	if n := h.prepared(); n != 0 {
		t.Errorf("%d transactions left prepared after the zombie stopped", n)
	}
}

// TestExternalSinksRebalance runs two instances over one input: the
// second joins while the first works (its tasks, and with them the
// offsets-mode writers, move mid-flight), then the first leaves (they move
// back); exactly once throughout, in both modes.
func TestExternalSinksRebalance(t *testing.T) {
	for _, mode := range []string{"twophase", "offsets"} {
		t.Run(mode, func(t *testing.T) {
			h := newExtHarness(t, 2000) // fed for about 4.5s
			a := h.start(child{Mode: mode, ExitAfter: 3 * time.Second})
			time.Sleep(1500 * time.Millisecond)
			b := h.start(child{Mode: mode, Want: h.n})
			h.wait(a, 45*time.Second)
			h.wait(b, 60*time.Second)
			if mode == "offsets" {
				if err := checkExactlyOnce(h.storeIDs(), h.n); err != nil {
					t.Error(err)
				}
				return
			}
			if err := checkExactlyOnce(h.committedIDs(), h.n); err != nil {
				t.Error(err)
			}
			if n := h.prepared(); n != 0 {
				t.Errorf("%d transactions left prepared after clean stops", n)
			}
		})
	}
}

// TestTwoPhaseSinkNeedsExactlyOnce: New refuses a two-phase sink under
// the other guarantees, naming the sink.
func TestTwoPhaseSinkNeedsExactlyOnce(t *testing.T) {
	p, err := sinkfile.NewParticipant(t.TempDir(), serde.String, serde.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []txn.Guarantee{txn.AtLeastOnce, txn.AtMostOnce} {
		tp := topology.New()
		topology.ToParticipant(topology.From(tp, "in", serde.String, serde.Bytes), "db", p)
		_, err := processor.New(tp, processor.ApplicationID("a"), processor.Guarantee(g))
		if !errors.Is(err, processor.ErrSinkGuarantee) || !strings.Contains(err.Error(), `"db"`) {
			t.Errorf("%s: %v, want ErrSinkGuarantee naming the sink", g, err)
		}
	}
	tp := topology.New()
	topology.ToParticipant(topology.From(tp, "in", serde.String, serde.Bytes), "db", p)
	if _, err := processor.New(tp, processor.ApplicationID("a")); err != nil {
		t.Errorf("exactly_once: %v", err)
	}
}

// storeIDs reads what a reader of the offsets-mode store sees.
func (h *extHarness) storeIDs() []string {
	st, err := sinkfile.NewStore(h.sinkDir, serde.String, serde.Bytes)
	if err != nil {
		h.t.Fatal(err)
	}
	recs, err := st.Records(sinkName, h.app+"-"+sinkName+"-sink")
	if err != nil {
		h.t.Fatal(err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = idOf(r.Value)
	}
	return ids
}

// TestOffsetsSinkCrashesConverge kills an instance of an offsets-mode
// sink around its store's Write, and in the middle of a transaction (its
// records already in the sink topic, then aborted by the restart); the
// restarted instance's writer skips what the store holds and never hands
// it an aborted record.
func TestOffsetsSinkCrashesConverge(t *testing.T) {
	for _, point := range []string{"write-before", "write-after", "process"} {
		t.Run(point, func(t *testing.T) {
			h := newExtHarness(t, 600)
			c := child{Mode: "offsets", Crash: point, CrashAt: 3}
			if point == "process" {
				// Long transactions, so that the kill finds one open
				// with records in the sink topic.
				c.CrashAt, c.Action, c.CommitInterval = 250, "later", time.Second
			}
			h.crashAndRestart(c, nil)
			if err := checkExactlyOnce(h.storeIDs(), h.n); err != nil {
				t.Error(err)
			}
			if point == "process" {
				// The crash left aborted records in the sink topic
				// (the case is about them), which the store lacks.
				topic := h.app + "-" + sinkName + "-sink"
				committed, err := readback.ReadCommitted(context.Background(), h.brokers, topic)
				if err != nil {
					t.Fatal(err)
				}
				if all := h.uncommitted(topic); all <= len(committed) {
					t.Errorf("the sink topic has %d records read_uncommitted and %d read_committed: the crash aborted none", all, len(committed))
				}
			}
		})
	}
}

// uncommitted counts the data records of topic read_uncommitted: those of
// aborted transactions too.
func (h *extHarness) uncommitted(topic string) int {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	if err != nil {
		h.t.Fatal(err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	cl.Close()
	if err != nil {
		h.t.Fatal(err)
	}
	left := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition], parts[o.Partition] = o.Offset, kgo.NewOffset().AtStart()
		}
	})
	cl, err = kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords())
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	for len(left) > 0 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				n++
			}
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
		})
	}
	return n
}

// TestTwoPhaseSinkWithoutRecovery is the negative control of recovery: a
// crash after the Kafka commit and before CommitPrepared, with a
// participant whose Prepared finds nothing, loses the committed
// transaction's records, and the checker says so.
func TestTwoPhaseSinkWithoutRecovery(t *testing.T) {
	h := newExtHarness(t, 600)
	h.crashAndRestart(child{Mode: "norecovery", Crash: "commit-before", CrashAt: 3}, nil)
	if err := checkExactlyOnce(h.committedIDs(), h.n); err == nil || !strings.Contains(err.Error(), "0 duplicated") {
		t.Errorf("the checker found %v with a sink whose recovery is blind, want losses only", err)
	} else {
		t.Logf("as expected: %v", err)
	}
}

// TestOffsetsSinkNegativeControl: a store that keeps no offsets is handed
// everything again after a restart, and the checker says so.
func TestOffsetsSinkNegativeControl(t *testing.T) {
	h := newExtHarness(t, 600)
	h.crashAndRestart(child{Mode: "naive", Crash: "write-after", CrashAt: 3}, nil)
	ids, err := readNaive(filepath.Join(h.sinkDir, "naive.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkExactlyOnce(ids, h.n); err == nil {
		t.Error("the checker found nothing wrong with a store that keeps no offsets")
	} else {
		t.Logf("as expected: %v", err)
	}
}
