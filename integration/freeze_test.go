//go:build unix

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// freezeSessionTimeout is the session timeout of the frozen instances: the
// smallest the broker accepts (group.min.session.timeout.ms, 6s), so that
// most freezes of 5 to 9 seconds outlast it and the group hands the frozen
// instance's partitions to another while it sleeps.
const freezeSessionTimeout = 6 * time.Second

// TestBillingExactlyOnceUnderSIGSTOP runs three billing instances as OS
// processes and freezes one of them (SIGSTOP) for 5 to 9 seconds, past its
// session timeout, then resumes it (SIGCONT), several times while input
// arrives: a GC pause, VM steal or a debugger. The group moves the frozen
// instance's tasks to another, and the resumed zombie must neither commit
// anything nor keep a task whose state another instance moved on, so the
// committed outputs must match the input exactly (CheckBilling).
//
// SLUICE_SOAK=1 runs 150,000 bills and 10 freezes; SLUICE_CHAOS_BILLS,
// SLUICE_CHAOS_KILLS (the freezes here) and SLUICE_CHAOS_SEED apply as in
// TestBillingExactlyOnceUnderSIGKILL.
func TestBillingExactlyOnceUnderSIGSTOP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	cfg := chaosConfigFromEnv(t)
	if os.Getenv("SLUICE_CHAOS_BILLS") == "" {
		cfg.bills = 30_000
		if os.Getenv("SLUICE_SOAK") == "1" {
			cfg.bills = 150_000
		}
	}
	if os.Getenv("SLUICE_CHAOS_KILLS") == "" {
		cfg.kills = 3
		if os.Getenv("SLUICE_SOAK") == "1" {
			cfg.kills = 10
		}
	}
	t.Logf("seed %d (set SLUICE_CHAOS_SEED=%d to replay), %d bills, %d freezes, guarantee %s",
		cfg.seed, cfg.seed, cfg.bills, cfg.kills, cfg.guarantee)
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 0x5ee9))

	bin := buildSluice(t)
	addrs := chaosBrokers(t)
	topics := DefaultTopics()
	createTopics(t, addrs, chaosPartitions, topics.Input, topics.Accepted, topics.Totals, topics.DLQ)
	appID := fmt.Sprintf("billing-freeze-%d", cfg.seed&0xffffffff)
	logDir := cfg.logDir
	if logDir == "" {
		logDir = t.TempDir()
	}
	run := []string{"run", "billing", "--max-record-bytes", strconv.Itoa(BillingMaxRecordBytes),
		"--session-timeout", freezeSessionTimeout.String()}
	h := newHarness(t, bin, addrs, appID, cfg.guarantee, cfg.dynamic, run, logDir, chaosInstances)

	bills := GenerateBills(cfg.seed, cfg.bills, max(cfg.bills/100, 10))
	produceCtx, stopProducing := context.WithCancel(context.Background())
	t.Cleanup(stopProducing)
	produced := make(chan produceResult, 1)
	go produceInChunks(produceCtx, addrs, topics.Input, bills, 4*cfg.kills, 1500*time.Millisecond, produced)

	finishBy := time.Now().Add(8 * time.Minute)
	if os.Getenv("SLUICE_SOAK") == "1" {
		finishBy = time.Now().Add(45 * time.Minute)
	}
	if d, ok := t.Deadline(); ok && d.Add(-3*time.Minute).Before(finishBy) {
		finishBy = d.Add(-3 * time.Minute)
	}
	input := h.freezes(rng, cfg.kills, produced, finishBy)
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
		t.Errorf("exactly-once violated after %d freezes (seed %d):\n%s", cfg.kills, cfg.seed, rep)
	}
}

// freezes SIGSTOPs a random instance for 5 to 9 seconds and then SIGCONTs
// it, with 2 to 4 seconds between freezes, until it has frozen n times and
// the input has been written; it returns the input log.
func (h *harness) freezes(rng *rand.Rand, n int, produced <-chan produceResult, finishBy time.Time) []InputRecord {
	t := h.t
	t.Helper()
	var (
		input   []InputRecord
		written bool
		frozen  int
		// thawed, when set, is the instance to resume when next fires.
		thawed   *instance
		next     = time.NewTimer(randDuration(rng, 2*time.Second, 4*time.Second))
		deadline = time.NewTimer(time.Until(finishBy))
	)
	defer next.Stop()
	defer deadline.Stop()
	// Never leave an instance stopped: the shutdown and killAll would wait.
	defer func() {
		if thawed != nil {
			_ = thawed.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	for frozen < n || !written || thawed != nil {
		select {
		case <-next.C:
			switch {
			case thawed != nil:
				h.cont(thawed)
				t.Logf("freeze %d/%d: resumed %s", frozen, n, thawed.id)
				thawed = nil
				next.Reset(randDuration(rng, 2*time.Second, 4*time.Second))
			case frozen < n:
				inst := h.instances[rng.IntN(len(h.instances))]
				if !inst.running() {
					next.Reset(time.Second)
					continue
				}
				d := randDuration(rng, 5*time.Second, 9*time.Second)
				if err := inst.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatalf("SIGSTOP %s (pid %d): %v", inst.id, inst.cmd.Process.Pid, err)
				}
				frozen++
				thawed = inst
				t.Logf("freeze %d/%d: stopped %s (pid %d) for %v", frozen, n, inst.id, inst.cmd.Process.Pid, d.Round(time.Millisecond))
				next.Reset(d)
			default:
				next.Reset(time.Second)
			}
		case ev := <-h.exits:
			h.unexpectedExit(ev)
		case res := <-produced:
			if res.err != nil {
				t.Fatalf("producing input: %v", res.err)
			}
			input, written = res.input, true
			t.Logf("all %d input records written", len(input))
		case <-deadline.C:
			t.Fatalf("freeze phase not over by %v: %d freezes, input written: %v", finishBy.Format(time.TimeOnly), frozen, written)
		}
	}
	return input
}

// cont resumes a stopped instance, by its pid.
func (h *harness) cont(inst *instance) {
	h.t.Helper()
	if !inst.running() {
		return
	}
	if err := inst.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		h.t.Errorf("SIGCONT %s (pid %d): %v", inst.id, inst.cmd.Process.Pid, err)
	}
}
