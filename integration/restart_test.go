package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/readback"
)

// TestRestartReplaysOnlyTheChangelogTail kills a wordcount instance with
// SIGKILL and restarts it on the same state directory: it must restore only
// the changelog tail past its local checkpoint, not the whole changelog. Then
// it wipes the state directory: the instance must restore the whole changelog
// and still count exactly.
func TestRestartReplaysOnlyTheChangelogTail(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := buildSluice(t)
	addrs := testBrokers(t)
	prefix := uniquePrefix(t)
	in, out, appID := prefix+"lines", prefix+"counts", prefix+"wc"
	createTopics(t, addrs, 2, in, out, in+"-dlq")
	changelog := appID + "-counts-changelog"
	dir := t.TempDir()
	logDir := t.TempDir()

	want := map[string]int64{}
	rng := rand.New(rand.NewPCG(7, 7))
	produceLines := func(n int) {
		t.Helper()
		ctx := testContext(t, time.Minute)
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			var ws []string
			for range 1 + rng.IntN(6) {
				ws = append(ws, "w"+strconv.Itoa(rng.IntN(3000)))
			}
			line := strings.Join(ws, " ")
			for _, w := range examples.Words(line) {
				want[w]++
			}
			recs[i] = &kgo.Record{Value: []byte(line)}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	run := 0
	start := func() (*exec.Cmd, string) {
		t.Helper()
		run++
		logPath := filepath.Join(logDir, fmt.Sprintf("run-%d.log", run))
		f, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cmd := exec.Command(bin, "run", "wordcount", "--brokers", strings.Join(addrs, ","),
			"--app-id", appID, "--state-dir", dir, "--instance-id", "w0", "--commit-interval", "200ms",
			"--input", in, "--output", out, "--dlq", in+"-dlq")
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = childProcAttr()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		return cmd, logPath
	}
	stop := func(cmd *exec.Cmd, sig syscall.Signal) {
		t.Helper()
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if sig == syscall.SIGTERM && err != nil {
				t.Fatalf("instance exited with %v after SIGTERM", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("instance (pid %d) did not exit after %v", cmd.Process.Pid, sig)
		}
	}
	// waitCounts waits until the committed output holds exactly the
	// direct count of the input. (Committed group offsets cannot show that
	// the job is done: a transactional topic ends with a commit marker that
	// no consumer commits past.)
	waitCounts := func() {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			recs, err := readback.ReadCommitted(testContext(t, time.Minute), addrs, out)
			if err != nil {
				t.Fatal(err)
			}
			got := readback.Last(recs)
			var bad []string
			for w, n := range want {
				if string(got[w]) != strconv.FormatInt(n, 10) {
					bad = append(bad, fmt.Sprintf("count of %s: got %q, want %d", w, got[w], n))
				}
			}
			if len(got) != len(want) {
				bad = append(bad, fmt.Sprintf("%d words counted, want %d", len(got), len(want)))
			}
			if len(bad) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("counts still wrong after 2 minutes:\n%s", strings.Join(bad[:min(10, len(bad))], "\n"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	committedChangelog := func() int64 {
		t.Helper()
		recs, err := readback.ReadCommitted(testContext(t, time.Minute), addrs, changelog)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(recs))
	}

	// 1. Build up state over many commits, then SIGKILL.
	p, _ := start()
	for range 30 {
		produceLines(1_000)
		time.Sleep(250 * time.Millisecond)
	}
	waitCounts()
	stop(p, syscall.SIGKILL)
	total := committedChangelog()

	// 2. Restart on the same state dir: only the tail is replayed.
	produceLines(5_000)
	p, logPath := start()
	waitCounts()
	stop(p, syscall.SIGTERM)
	restored := restoredRecords(t, logPath)
	t.Logf("changelog held %d committed records; the restart restored %d", total, restored)
	if restored*4 >= total {
		t.Errorf("restart restored %d of %d changelog records: not just the tail past the local checkpoint", restored, total)
	}

	// 3. Wipe the state: the whole changelog is restored, results unchanged.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	total = committedChangelog()
	produceLines(5_000)
	p, logPath = start()
	waitCounts()
	stop(p, syscall.SIGTERM)
	restored = restoredRecords(t, logPath)
	t.Logf("after wiping the state dir, restored %d of %d committed changelog records", restored, total)
	if len(externalBrokers()) == 0 && restored != total {
		// The embedded broker compacts only hourly, so nothing was
		// compacted away: a full restore reads every record.
		t.Errorf("wiped restart restored %d records, want all %d", restored, total)
	}
}

var restoredRE = regexp.MustCompile(`msg="task opened" task=\S+ restored=(\d+)`)

// restoredRecords sums what the instance logged as restored per task.
func restoredRecords(t *testing.T, logPath string) int64 {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	ms := restoredRE.FindAllSubmatch(b, -1)
	if len(ms) == 0 {
		t.Fatalf("no task opened in %s:\n%s", logPath, b)
	}
	var n int64
	for _, m := range ms {
		v, _ := strconv.ParseInt(string(m[1]), 10, 64)
		n += v
	}
	return n
}
