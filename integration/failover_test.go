//go:build unix

package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
)

// wcCluster runs wordcount instances as OS processes (`sluice run
// wordcount`), each with its own state directory, log and HTTP port.
type wcCluster struct {
	t                *testing.T
	bin              string
	addrs            []string
	in, out, appID   string
	flags            []string // common extra flags
	want             map[string]int64
	rng              *rand.Rand
	logDir           string
	nodes            []*wcNode
	staticMembership bool
}

type wcNode struct {
	name, dir, http, logPath string
	cmd                      *exec.Cmd
	done                     chan struct{}
	err                      error
	starts                   int
}

func newWCCluster(t *testing.T, n int, static bool, flags ...string) *wcCluster {
	t.Helper()
	addrs := testBrokers(t)
	prefix := uniquePrefix(t)
	c := &wcCluster{t: t, bin: buildSluice(t), addrs: addrs, in: prefix + "lines", out: prefix + "counts", appID: prefix + "wc",
		flags: flags, want: map[string]int64{}, rng: rand.New(rand.NewPCG(11, 11)), logDir: t.TempDir(), staticMembership: static}
	createTopics(t, addrs, 2, c.in, c.out, c.in+"-dlq")
	for i := range n {
		c.nodes = append(c.nodes, &wcNode{name: fmt.Sprintf("i%d", i), dir: t.TempDir(), http: freeAddr(t),
			logPath: filepath.Join(c.logDir, fmt.Sprintf("i%d.log", i))})
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			if nd.running() {
				nd.cmd.Process.Kill()
				<-nd.done
			}
		}
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("----- %s -----\n%s", nd.name, tail(nd.logPath, 30))
			}
		}
	})
	return c
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func (nd *wcNode) running() bool {
	if nd.done == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

func (c *wcCluster) start(nd *wcNode) {
	c.t.Helper()
	f, err := os.OpenFile(nd.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	nd.starts++
	fmt.Fprintf(f, "\n===== start %d =====\n", nd.starts)
	args := append([]string{"run", "wordcount", "--brokers", strings.Join(c.addrs, ","),
		"--app-id", c.appID, "--state-dir", nd.dir, "--commit-interval", "200ms", "--http", nd.http,
		"--input", c.in, "--output", c.out, "--dlq", c.in + "-dlq"}, c.flags...)
	if c.staticMembership {
		args = append(args, "--instance-id", nd.name)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		c.t.Fatal(err)
	}
	nd.cmd, nd.done = cmd, make(chan struct{})
	done := nd.done
	go func() {
		nd.err = cmd.Wait()
		f.Close()
		close(done)
	}()
}

// stop signals the node's process and waits for it to exit.
func (c *wcCluster) stop(nd *wcNode, sig syscall.Signal) {
	c.t.Helper()
	if !nd.running() {
		return
	}
	if err := nd.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-nd.done:
	case <-time.After(60 * time.Second):
		c.t.Fatalf("%s (pid %d) did not exit within 60s of %v", nd.name, nd.cmd.Process.Pid, sig)
	}
	if sig == syscall.SIGTERM && nd.err != nil {
		c.t.Errorf("%s exited with %v after SIGTERM", nd.name, nd.err)
	}
}

func (c *wcCluster) produceLines(n int) {
	c.t.Helper()
	ctx := testContext(c.t, time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...), kgo.DefaultProduceTopic(c.in))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		var ws []string
		for range 1 + c.rng.IntN(6) {
			ws = append(ws, "w"+strconv.Itoa(c.rng.IntN(3000)))
		}
		line := strings.Join(ws, " ")
		for _, w := range examples.Words(line) {
			c.want[w]++
		}
		recs[i] = &kgo.Record{Value: []byte(line)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		c.t.Fatal(err)
	}
}

// waitCounts waits until the committed output holds exactly the direct
// count of the input, and checks that every update of a word's count is its
// previous count plus one: a duplicate or a lost update shows. With
// --fold-updates a word's updates within a commit go out as one, so an
// update may add more than one, but never none or less.
func (c *wcCluster) waitCounts(within time.Duration) (updates int) {
	c.t.Helper()
	folded := slices.Contains(c.flags, "--fold-updates")
	deadline := time.Now().Add(within)
	for {
		recs, err := readback.ReadCommitted(testContext(c.t, time.Minute), c.addrs, c.out)
		if err != nil {
			c.diagnose()
			c.t.Fatal(err)
		}
		got := map[string]int64{}
		var bad []string
		for _, r := range recs {
			n, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil || n != got[string(r.Key)]+1 && !(folded && n > got[string(r.Key)]) {
				bad = append(bad, fmt.Sprintf("word %s: update %q after %d", r.Key, r.Value, got[string(r.Key)]))
			}
			got[string(r.Key)] = n
		}
		if len(bad) > 0 {
			c.t.Fatalf("exactly-once violated:\n%s", strings.Join(bad[:min(10, len(bad))], "\n"))
		}
		for w, n := range c.want {
			if got[w] != n {
				bad = append(bad, fmt.Sprintf("count of %s: got %d, want %d", w, got[w], n))
			}
		}
		if len(got) != len(c.want) {
			bad = append(bad, fmt.Sprintf("%d words counted, want %d", len(got), len(c.want)))
		}
		if len(bad) == 0 {
			return len(recs)
		}
		if time.Now().After(deadline) {
			c.diagnose()
			c.t.Fatalf("counts still wrong after %v:\n%s", within, strings.Join(bad[:min(10, len(bad))], "\n"))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// diagnose logs the output's high watermarks and last stable offsets and
// every node's tasks: a transaction left open shows as LSO < HW.
func (c *wcCluster) diagnose() {
	ctx := testContext(c.t, 10*time.Second)
	adm := newAdmin(c.t, c.addrs)
	for _, tp := range []string{c.out, c.appID + "-counts-changelog"} {
		hw, err1 := adm.ListEndOffsets(ctx, tp)
		lso, err2 := adm.ListCommittedOffsets(ctx, tp)
		c.t.Logf("%s: end offsets %v (%v), last stable offsets %v (%v)", tp, hw, err1, lso, err2)
	}
	for _, nd := range c.nodes {
		c.t.Logf("%s (running %v) tasks: %+v", nd.name, nd.running(), nd.tasks())
	}
}

// tasks reads the node's /tasks, keyed by task id; nil if it does not
// answer.
func (nd *wcNode) tasks() map[string]processor.TaskStatus {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + nd.http + "/tasks")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var ts []processor.TaskStatus
	if json.NewDecoder(resp.Body).Decode(&ts) != nil {
		return nil
	}
	out := map[string]processor.TaskStatus{}
	for _, t := range ts {
		out[t.ID] = t
	}
	return out
}

// await polls cond every 200ms until it holds, or fails the test after
// within, naming what.
func await(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return time.Since(start)
}

// statefulTasks are wordcount's counting tasks (sub-topology 1).
func isStateful(id string) bool { return strings.HasPrefix(id, "1_") }

// TestFailoverResumesOnTheStandby runs two wordcount instances with one
// standby replica, SIGKILLs the one running the counting tasks once the
// other's standby copies caught up, and checks that the tasks resume on the
// survivor within a bound, restoring a small part of what the changelog
// holds, with exactly-once counts. The negative control runs the same
// without standbys: the survivor then restores the whole changelog.
func TestFailoverResumesOnTheStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	for _, replicas := range []int{1, 0} {
		t.Run(fmt.Sprintf("standbys=%d", replicas), func(t *testing.T) { testFailover(t, replicas) })
	}
}

func testFailover(t *testing.T, replicas int) {
	c := newWCCluster(t, 2, false, "--standby-replicas", strconv.Itoa(replicas),
		"--session-timeout", "6s", "--probing-rebalance-interval", "2s")
	for _, nd := range c.nodes {
		c.start(nd)
	}
	// Both in the group, with nothing to restore yet, before any input:
	// the first balanced assignment then sticks.
	await(t, time.Minute, "both instances running tasks", func() bool {
		for _, nd := range c.nodes {
			n := 0
			for _, st := range nd.tasks() {
				if st.State == processor.TaskRunning {
					n++
				}
			}
			if n == 0 {
				return false
			}
		}
		return true
	})
	for range 20 {
		c.produceLines(1_000)
		time.Sleep(200 * time.Millisecond)
	}
	c.waitCounts(2 * time.Minute)

	// The victim runs counting tasks; with standbys, the survivor's copies
	// of them must have caught up (lag 0: at the changelog's end).
	var victim, survivor *wcNode
	var moved []string
	changelog := c.appID + "-counts-changelog"
	await(t, time.Minute, "a counting task running and its standby caught up", func() bool {
		victim, survivor, moved = nil, nil, nil
		a, b := c.nodes[0].tasks(), c.nodes[1].tasks()
		for i, ts := range []map[string]processor.TaskStatus{a, b} {
			for id, st := range ts {
				if isStateful(id) && st.State == processor.TaskRunning {
					victim, survivor = c.nodes[i], c.nodes[1-i]
				}
			}
			if victim != nil {
				other := []map[string]processor.TaskStatus{a, b}[1-i]
				for id, st := range ts {
					if !isStateful(id) || st.State != processor.TaskRunning {
						continue
					}
					moved = append(moved, id)
					if replicas > 0 {
						sb, ok := other[id]
						if !ok || sb.State != processor.TaskStandby || sb.Lag[changelog] != 0 {
							return false
						}
					}
				}
				return true
			}
		}
		return false
	})
	slices.Sort(moved)
	// The store's size: the committed changelog records of the moving
	// tasks' partitions (the embedded broker does not compact within a
	// test, so a full restore reads all of them).
	recs, err := readback.ReadCommitted(testContext(t, time.Minute), c.addrs, changelog)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, r := range recs {
		if slices.Contains(moved, "1_"+strconv.Itoa(int(r.Partition))) {
			size++
		}
	}
	t.Logf("killing %s, which runs %v (%d changelog records); survivor %s", victim.name, moved, size, survivor.name)

	c.stop(victim, syscall.SIGKILL)
	c.produceLines(2_000)
	var restored int64
	took := await(t, 90*time.Second, "the killed instance's counting tasks running on the survivor", func() bool {
		ts := survivor.tasks()
		restored = 0
		for _, id := range moved {
			st, ok := ts[id]
			if !ok || st.State != processor.TaskRunning {
				return false
			}
			restored += st.Restored
		}
		return true
	})
	t.Logf("standbys=%d: tasks %v resumed on %s %v after the kill, restoring %d of %d changelog records",
		replicas, moved, survivor.name, took.Round(100*time.Millisecond), restored, size)
	if fromLog := restoredOf(t, survivor.logPath, moved); fromLog != restored {
		t.Errorf("log says %d records restored, /tasks %d", fromLog, restored)
	}
	c.waitCounts(2 * time.Minute)
	c.stop(survivor, syscall.SIGTERM)

	if size < 10_000 {
		t.Fatalf("the changelog holds only %d records: too small to tell a tail from a full restore", size)
	}
	if replicas > 0 {
		// Generous: the session timeout (6s) and the dead instance's
		// open transaction (aborted by the broker after the transaction
		// timeout, 10s) come first.
		if took > 45*time.Second {
			t.Errorf("failover took %v, want well under 45s", took)
		}
		if restored*10 > size {
			t.Errorf("failover restored %d of %d records: not just the tail past the standby copy", restored, size)
		}
	} else if len(externalBrokers()) == 0 && restored != size {
		t.Errorf("without standbys the survivor restored %d records, want all %d", restored, size)
	}
}

// restoredOf sums the "task opened ... restored=N" lines of the given tasks
// in the log of the node's last start.
func restoredOf(t *testing.T, logPath string, ids []string) int64 {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.LastIndex(string(b), "===== start"); i >= 0 {
		b = b[i:]
	}
	var n int64
	re := regexp.MustCompile(`msg="task opened" task=(\S+) restored=(\d+)`)
	last := map[string]int64{}
	for _, m := range re.FindAllSubmatch(b, -1) {
		if slices.Contains(ids, string(m[1])) {
			v, _ := strconv.ParseInt(string(m[2]), 10, 64)
			last[string(m[1])] = v
		}
	}
	for _, v := range last {
		n += v
	}
	return n
}
