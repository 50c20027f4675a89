//go:build unix

package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type chaosConfig struct {
	bills     int
	kills     int
	seed      int64
	guarantee string
	logDir    string
	// dynamic runs the instances without --instance-id: dynamic group
	// membership, so every kill and restart is a rebalance that revokes
	// partitions in the middle of transactions.
	dynamic bool
}

const (
	chaosInstances  = 3
	chaosPartitions = 6
	// maxUnexpectedExits stops a run whose instances die on their own,
	// e.g. a binary without `run billing`, instead of restarting them for
	// minutes.
	maxUnexpectedExits = 5
	// stableFor is how long the outputs must stop growing, with the input
	// fully committed, before the run counts as finished: several commit
	// intervals, so a task still flushing would show.
	stableFor = 5 * time.Second
)

func chaosConfigFromEnv(t *testing.T) chaosConfig {
	t.Helper()
	c := chaosConfig{
		bills:     100_000,
		kills:     10,
		seed:      time.Now().UnixNano(),
		guarantee: "exactly_once",
		logDir:    os.Getenv("SLUICE_CHAOS_LOG_DIR"),
	}
	if os.Getenv("SLUICE_SOAK") == "1" {
		c.bills, c.kills = 1_000_000, 50
	}
	envInt := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*dst = n
		}
	}
	envInt("SLUICE_CHAOS_BILLS", &c.bills)
	envInt("SLUICE_CHAOS_KILLS", &c.kills)
	if v := os.Getenv("SLUICE_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("SLUICE_CHAOS_SEED=%q: %v", v, err)
		}
		c.seed = n
	}
	// Running with at_least_once shows that the test can fail: duplicates
	// after a kill are then allowed by the application and must be caught.
	if v := os.Getenv("SLUICE_CHAOS_GUARANTEE"); v != "" {
		c.guarantee = v
	}
	c.dynamic = os.Getenv("SLUICE_CHAOS_MEMBERSHIP") == "dynamic"
	return c
}

// TestBillingExactlyOnceUnderSIGKILL runs three billing instances as OS
// processes, SIGKILLs one of them every few seconds while input keeps
// arriving, restarts it with the same state directory and instance id, and
// then checks the committed outputs against the input log.
func TestBillingExactlyOnceUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	runBillingChaos(t, chaosConfigFromEnv(t))
}

// TestBillingExactlyOnceUnderRebalances is the same with dynamic group
// membership: every kill and restart rebalances the group, revoking
// partitions in the middle of transactions. Smaller by default, since a dead
// member stalls each rebalance for up to the rebalance timeout.
func TestBillingExactlyOnceUnderRebalances(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	cfg := chaosConfigFromEnv(t)
	cfg.dynamic = true
	if os.Getenv("SLUICE_CHAOS_BILLS") == "" && os.Getenv("SLUICE_SOAK") != "1" {
		cfg.bills = 20_000
	}
	if os.Getenv("SLUICE_CHAOS_KILLS") == "" && os.Getenv("SLUICE_SOAK") != "1" {
		cfg.kills = 4
	}
	runBillingChaos(t, cfg)
}

func runBillingChaos(t *testing.T, cfg chaosConfig) {
	t.Logf("seed %d (set SLUICE_CHAOS_SEED=%d to replay), %d bills, %d kills, guarantee %s",
		cfg.seed, cfg.seed, cfg.bills, cfg.kills, cfg.guarantee)
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 0xc4a05))

	bin := buildSluice(t)
	addrs := chaosBrokers(t)
	topics := DefaultTopics()
	createTopics(t, addrs, chaosPartitions, topics.Input, topics.Accepted, topics.Totals, topics.DLQ)
	appID := fmt.Sprintf("billing-chaos-%d", cfg.seed&0xffffffff)

	logDir := cfg.logDir
	if logDir == "" {
		logDir = t.TempDir()
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Small enough that the generator's oversized bills are production
	// errors, and far above every good bill's output.
	run := []string{"run", "billing", "--max-record-bytes", strconv.Itoa(BillingMaxRecordBytes)}
	h := newHarness(t, bin, addrs, appID, cfg.guarantee, cfg.dynamic, run, logDir, chaosInstances)

	// The input arrives while the instances run and are killed, so kills
	// land in the middle of processing rather than on idle instances.
	bills := GenerateBills(cfg.seed, cfg.bills, max(cfg.bills/100, 10))
	chunks := 2 * cfg.kills
	produceCtx, stopProducing := context.WithCancel(context.Background())
	t.Cleanup(stopProducing)
	produced := make(chan produceResult, 1)
	go produceInChunks(produceCtx, addrs, topics.Input, bills, chunks, 1500*time.Millisecond, produced)

	// Bound the whole run by the test's own deadline, leaving room for the
	// shutdown and the check, so a hang ends with a report.
	finishBy := time.Now().Add(10 * time.Minute)
	if os.Getenv("SLUICE_SOAK") == "1" {
		finishBy = time.Now().Add(45 * time.Minute)
	}
	if d, ok := t.Deadline(); ok && d.Add(-3*time.Minute).Before(finishBy) {
		finishBy = d.Add(-3 * time.Minute)
	}
	input, kills := h.chaos(rng, cfg.kills, produced, finishBy)

	// Drain: every instance is running again; wait for the group to
	// commit the whole input and for all output to stop growing.
	h.waitFinished(finishBy, topics.Input, topics.outputs())

	h.stopAll(time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := CheckBilling(ctx, addrs, input, appID)
	if err != nil {
		t.Fatalf("CheckBilling: %v", err)
	}
	t.Log(rep)
	if !rep.OK() {
		t.Errorf("exactly-once violated after %d kills (seed %d):\n%s", kills, cfg.seed, rep)
	}
}

// chaosBrokers is testBrokers for a test that must own the billing topics:
// the example's topic names are fixed, so a real cluster must not have them.
func chaosBrokers(t *testing.T) []string {
	t.Helper()
	addrs := externalBrokers()
	if len(addrs) == 0 {
		return startBroker(t)
	}
	ctx := testContext(t, 30*time.Second)
	d := DefaultTopics()
	tds, err := newAdmin(t, addrs).ListTopics(ctx, d.Input, d.Accepted, d.Totals, d.DLQ)
	if err != nil {
		t.Fatalf("listing topics on %v: %v", addrs, err)
	}
	for _, td := range tds {
		if td.Err == nil {
			t.Skipf("topic %s already exists on SLUICE_TEST_BROKERS; the billing example's topic names are fixed, so this test needs a fresh cluster", td.Topic)
		}
	}
	return addrs
}

// buildSluice builds the binary under test once per test, unless
// SLUICE_CHAOS_BIN names one already built (say, with -race).
func buildSluice(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SLUICE_CHAOS_BIN"); bin != "" {
		return bin
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		t.Fatal("not inside the sluice module")
	}
	bin := filepath.Join(t.TempDir(), "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building ./cmd/sluice: %v\n%s", err, out)
	}
	return bin
}

type produceResult struct {
	input []InputRecord
	err   error
}

func produceInChunks(ctx context.Context, addrs []string, topic string, bills []InputBill, chunks int, every time.Duration, out chan<- produceResult) {
	var input []InputRecord
	size := (len(bills) + chunks - 1) / chunks
	for start := 0; start < len(bills); start += size {
		if start > 0 {
			select {
			case <-ctx.Done():
				out <- produceResult{err: ctx.Err()}
				return
			case <-time.After(every):
			}
		}
		recs, err := ProduceBills(ctx, addrs, topic, bills[start:min(start+size, len(bills))])
		if err != nil {
			out <- produceResult{err: err}
			return
		}
		input = append(input, recs...)
	}
	out <- produceResult{input: input}
}

func randDuration(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// instance is one sluice process slot: the same instance id and state dir
// across restarts, a new process each time.
type instance struct {
	id      string
	dir     string
	logPath string

	cmd    *exec.Cmd
	log    *os.File
	done   chan struct{} // closed once cmd has been waited for
	err    error         // cmd.Wait's result, valid after done
	starts int
	// signalled says the current process was told to stop by us, so its
	// exit is expected.
	signalled bool
}

type exitEvent struct {
	inst  *instance
	start int // which start of inst exited
	err   error
}

type harness struct {
	t *testing.T
	// run is the command line of an instance before the common flags,
	// e.g. run billing --max-record-bytes N.
	run       []string
	bin       string
	addrs     []string
	appID     string
	guarantee string
	dynamic   bool
	instances []*instance
	exits     chan exitEvent
	// unexpected counts exits nobody asked for.
	unexpected int
	// tolerate, if set, says an exit nobody asked for is one a supervisor
	// restarts after a pause without failing the test (say, an instance
	// that found its database down at start, as it must).
	tolerate  func(inst *instance) bool
	tolerated int
}

// newHarness starts n instances of the sluice command line run (without
// the common flags), each with its own state directory and log in logDir,
// and arranges for them to be killed when the test ends.
func newHarness(t *testing.T, bin string, addrs []string, appID, guarantee string, dynamic bool, run []string, logDir string, n int) *harness {
	h := &harness{t: t, run: run, bin: bin, addrs: addrs, appID: appID, guarantee: guarantee, dynamic: dynamic,
		exits: make(chan exitEvent, 4096)}
	for i := range n {
		h.instances = append(h.instances, &instance{
			id:      fmt.Sprintf("inst-%d", i),
			dir:     filepath.Join(t.TempDir(), "state"),
			logPath: filepath.Join(logDir, fmt.Sprintf("%s-inst-%d.log", appID, i)),
		})
	}
	// Cleanups run last-registered first: kill everything, then show the
	// logs, then delete the directories (registered by TempDir above),
	// which must not happen under a live process.
	t.Cleanup(func() {
		if t.Failed() {
			h.printTails(40)
		}
	})
	t.Cleanup(h.killAll)
	for _, inst := range h.instances {
		h.start(inst)
	}
	return h
}

// chaos SIGKILLs a random instance every 2 to 5 seconds and restarts it,
// until it has killed kills times and the input has been written (what
// produced reports); it returns the input log and the number of kills.
func (h *harness) chaos(rng *rand.Rand, kills int, produced <-chan produceResult, finishBy time.Time) ([]InputRecord, int) {
	t := h.t
	t.Helper()
	var (
		input    []InputRecord
		written  bool
		killed   int
		killWait = time.NewTimer(randDuration(rng, 2*time.Second, 5*time.Second))
		deadline = time.NewTimer(time.Until(finishBy))
	)
	defer killWait.Stop()
	defer deadline.Stop()
	for killed < kills || !written {
		select {
		case <-killWait.C:
			if killed < kills {
				inst := h.instances[rng.IntN(len(h.instances))]
				h.kill(inst)
				killed++
				t.Logf("kill %d/%d: %s (pid %d)", killed, kills, inst.id, inst.cmd.Process.Pid)
				h.start(inst)
			}
			killWait.Reset(randDuration(rng, 2*time.Second, 5*time.Second))
		case ev := <-h.exits:
			h.unexpectedExit(ev)
		case res := <-produced:
			if res.err != nil {
				t.Fatalf("producing input: %v", res.err)
			}
			input, written = res.input, true
			t.Logf("all %d input records written", len(input))
		case <-deadline.C:
			t.Fatalf("chaos phase not over by %v: %d kills, input written: %v", finishBy.Format(time.TimeOnly), killed, written)
		}
	}
	return input, killed
}

func (h *harness) start(inst *instance) {
	h.t.Helper()
	if inst.log == nil {
		f, err := os.OpenFile(inst.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			h.t.Fatal(err)
		}
		inst.log = f
		h.t.Cleanup(func() { f.Close() })
	}
	inst.starts++
	fmt.Fprintf(inst.log, "\n===== start %d of %s at %s =====\n", inst.starts, inst.id, time.Now().Format(time.RFC3339Nano))
	args := append(slices.Clone(h.run),
		"--brokers", strings.Join(h.addrs, ","),
		"--app-id", h.appID,
		"--state-dir", inst.dir,
		"--commit-interval", "1s",
		"--guarantee", h.guarantee,
	)
	if !h.dynamic {
		args = append(args, "--instance-id", inst.id)
	}
	// SLUICE_CHAOS_LOG_LEVEL=debug adds the Kafka client's own lines
	// (joins, transaction ends, the offsets an abort resets to).
	if lvl := os.Getenv("SLUICE_CHAOS_LOG_LEVEL"); lvl != "" {
		args = append(args, "--log-level", lvl)
	}
	cmd := exec.Command(h.bin, args...)
	cmd.Stdout = inst.log
	cmd.Stderr = inst.log
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("starting %s: %v", inst.id, err)
	}
	inst.cmd, inst.done, inst.signalled = cmd, make(chan struct{}), false
	done, start := inst.done, inst.starts
	go func() {
		err := cmd.Wait()
		inst.err = err
		close(done)
		// Whether the exit was expected is decided by the test
		// goroutine, which owns the instance; a full channel only drops
		// events nobody will read any more.
		select {
		case h.exits <- exitEvent{inst: inst, start: start, err: err}:
		default:
		}
	}()
}

func (inst *instance) running() bool {
	if inst.done == nil {
		return false
	}
	select {
	case <-inst.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the current process of inst, by its pid.
func (h *harness) signal(inst *instance, sig syscall.Signal) {
	if !inst.running() {
		return
	}
	inst.signalled = true
	if err := inst.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		h.t.Errorf("signalling %s (pid %d): %v", inst.id, inst.cmd.Process.Pid, err)
	}
}

func (h *harness) kill(inst *instance) {
	h.t.Helper()
	h.signal(inst, syscall.SIGKILL)
	select {
	case <-inst.done:
	case <-time.After(30 * time.Second):
		h.t.Fatalf("%s (pid %d) did not die within 30s of SIGKILL", inst.id, inst.cmd.Process.Pid)
	}
}

// unexpectedExit restarts an instance that died on its own, as a supervisor
// would, and fails the test: nothing in this run justifies an instance
// dying.
func (h *harness) unexpectedExit(ev exitEvent) {
	h.t.Helper()
	if ev.start != ev.inst.starts || ev.inst.signalled {
		return // one we killed, or an older process of a restarted slot
	}
	if h.tolerate != nil && h.tolerate(ev.inst) {
		h.tolerated++
		time.Sleep(time.Second)
		h.start(ev.inst)
		return
	}
	h.unexpected++
	h.t.Errorf("%s exited on its own (start %d): %v", ev.inst.id, ev.start, ev.err)
	if h.unexpected >= maxUnexpectedExits {
		h.t.Fatalf("%d unexpected exits; giving up", h.unexpected)
	}
	h.start(ev.inst)
}

// waitFinished waits, until finishBy at the latest, for the group to have
// committed all of the input, to have consumed every record of its
// repartition topics, and for every output and internal topic to stop
// growing. The outputs alone may stop growing while records wait: a
// partition assigned to a member that was killed during the rebalance has
// no consumer until the coordinator gives up on that member. Not finishing
// is an error, but the check still runs, since its report says what is
// missing.
func (h *harness) waitFinished(finishBy time.Time, input string, outputs []string) {
	t := h.t
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	var (
		last      map[string]int64
		stableAt  time.Time
		lastLog   time.Time
		tick      = time.NewTicker(time.Second)
		lastState string
	)
	defer tick.Stop()
	for time.Now().Before(finishBy) {
		select {
		case ev := <-h.exits:
			h.unexpectedExit(ev)
			continue
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lag, waiting, ends, err := h.progress(ctx, adm, input, outputs)
		cancel()
		if err != nil {
			lastState = err.Error()
			continue
		}
		state := fmt.Sprintf("input lag %d, %d repartition partitions with records waiting", lag, waiting)
		// Every change once the input is committed, when the run is
		// nearly over and a stall says most.
		if time.Since(lastLog) > 10*time.Second || lag == 0 && state != lastState {
			t.Logf("waiting for the run to finish: %s", state)
			lastLog = time.Now()
		}
		lastState = state
		if lag != 0 || waiting != 0 || !maps.Equal(ends, last) {
			last, stableAt = ends, time.Time{}
			continue
		}
		if stableAt.IsZero() {
			stableAt = time.Now()
		}
		if time.Since(stableAt) >= stableFor {
			t.Logf("finished: input committed, repartition topics consumed, outputs stable for %v", stableFor)
			return
		}
	}
	t.Errorf("the run did not finish by %v (%s)", finishBy.Format(time.TimeOnly), lastState)
}

// progress returns how far the group's committed offsets are behind the
// input's end, how many partitions of its repartition topics hold records
// it has not consumed, and the end offsets of every topic the application
// writes.
func (h *harness) progress(ctx context.Context, adm *kadm.Client, input string, outputs []string) (lag int64, waiting int, ends map[string]int64, err error) {
	inEnds, err := listOffsets(ctx, adm.ListEndOffsets, []string{input})
	if err != nil {
		return 0, 0, nil, err
	}
	committed, err := groupOffsets(ctx, adm, h.appID)
	if err != nil {
		return 0, 0, nil, err
	}
	for p, end := range inEnds[input] {
		at := int64(0)
		if o, ok := committed.Lookup(input, p); ok && o.At > 0 {
			at = o.At
		}
		lag += end - at
	}

	written := slices.Clone(outputs)
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return 0, 0, nil, err
	}
	var reparts []string
	for _, name := range tds.Names() {
		if strings.HasPrefix(name, h.appID+"-") {
			written = append(written, name)
			if strings.HasSuffix(name, "-repartition") {
				reparts = append(reparts, name)
			}
		}
	}
	if lag == 0 && len(reparts) > 0 {
		unread, err := unconsumed(ctx, h.addrs, adm, h.appID, reparts...)
		if err != nil {
			return 0, 0, nil, err
		}
		for _, ps := range unread {
			waiting += len(ps)
		}
	}
	outEnds, err := listOffsets(ctx, adm.ListEndOffsets, written)
	if err != nil {
		return 0, 0, nil, err
	}
	ends = make(map[string]int64)
	for topic, ps := range outEnds {
		for p, o := range ps {
			ends[fmt.Sprintf("%s/%d", topic, p)] = o
		}
	}
	return lag, waiting, ends, nil
}

// stopAll asks every instance to shut down and waits for them. A graceful
// shutdown may exit 0 or by the signal itself; an error exit (a panic, a
// failed final commit) fails the test.
func (h *harness) stopAll(grace time.Duration) {
	t := h.t
	t.Helper()
	for _, inst := range h.instances {
		h.signal(inst, syscall.SIGTERM)
	}
	timeout := time.After(grace)
	for _, inst := range h.instances {
		if inst.done == nil {
			continue
		}
		select {
		case <-inst.done:
		case <-timeout:
			t.Errorf("%s (pid %d) did not exit within %v of SIGTERM; killing it", inst.id, inst.cmd.Process.Pid, grace)
			h.kill(inst)
			continue
		}
		var ee *exec.ExitError
		if errors.As(inst.err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				continue
			}
			t.Errorf("%s exited with %v after SIGTERM", inst.id, inst.err)
		}
	}
}

// killAll is the last line of defence: every process this test started
// that still runs is killed, by pid, and waited for.
func (h *harness) killAll() {
	for _, inst := range h.instances {
		if inst.running() {
			inst.signalled = true
			_ = inst.cmd.Process.Signal(syscall.SIGKILL)
			select {
			case <-inst.done:
			case <-time.After(10 * time.Second):
				h.t.Logf("%s (pid %d) still running after SIGKILL", inst.id, inst.cmd.Process.Pid)
			}
		}
	}
}

func (h *harness) printTails(lines int) {
	for _, inst := range h.instances {
		h.t.Logf("----- last %d lines of %s (%s) -----\n%s", lines, inst.id, inst.logPath, tail(inst.logPath, lines))
	}
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var ls []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		ls = append(ls, sc.Text())
		if len(ls) > n {
			ls = ls[1:]
		}
	}
	return strings.Join(ls, "\n")
}
