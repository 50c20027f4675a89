//go:build unix

package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// The zombie test's instances are this test binary run again in
// TestZombieChild, configured through these variables.
const (
	zombieChildEnv = "SLUICE_ZOMBIE_CHILD" // the instance's name
	zombieConfEnv  = "SLUICE_ZOMBIE_CONF"  // brokers|app id|state dir|input|output
)

// zombieTick is how often a ticking task punctuates: each punctuation
// writes one record that no input record caused.
const zombieTick = 50 * time.Millisecond

// tickTopology counts wall-clock punctuations per task in the store
// "ticks" and writes each count, with the instance that wrote it, to
// output: "<count> <instance>" under the task's id. Input records change
// nothing; their offsets are what the group commits.
func tickTopology(name, input, output string) *topology.Topology {
	t := topology.New()
	in := topology.From(t, input, serde.String, serde.String)
	ticks := topology.KeyValueStore("ticks", serde.String, serde.Int64)
	out := topology.Process(in, "tick", func() topology.Processor[string, string, string, string] {
		return &ticker{name: name, spec: ticks}
	}, ticks)
	topology.To(out, output, serde.String, serde.String)
	return t
}

type ticker struct {
	name string
	spec topology.Materialization[string, int64]
	kv   *topology.KV[string, int64]
	ctx  *topology.ProcessorContext[string, string]
}

func (p *ticker) Init(ctx *topology.ProcessorContext[string, string]) error {
	p.ctx, p.kv = ctx, p.spec.Open(ctx)
	ctx.Schedule(zombieTick, topology.WallClockTime, func(ts int64) error {
		id := ctx.TaskID()
		n, _, err := p.kv.Get(id)
		if err != nil {
			return err
		}
		n++
		if err := p.kv.Put(id, n); err != nil {
			return err
		}
		return ctx.Forward(topology.Record[string, string]{Key: id, Value: fmt.Sprintf("%d %s", n, p.name), Timestamp: ts})
	})
	return nil
}

func (p *ticker) Process(topology.Record[string, string]) error { return nil }
func (p *ticker) Close() error                                  { return nil }

// TestZombieChild is an instance of TestZombieCannotCommitWithoutInput, run
// as a process of its own; it does nothing in a normal run.
func TestZombieChild(t *testing.T) {
	name := os.Getenv(zombieChildEnv)
	if name == "" {
		t.Skip("an instance of TestZombieCannotCommitWithoutInput")
	}
	conf := strings.Split(os.Getenv(zombieConfEnv), "|")
	if len(conf) != 5 {
		t.Fatalf("%s=%q", zombieConfEnv, os.Getenv(zombieConfEnv))
	}
	app, err := processor.New(tickTopology(name, conf[3], conf[4]),
		processor.Brokers(strings.Split(conf[0], ",")...),
		processor.ApplicationID(conf[1]),
		processor.StateDir(conf[2]),
		processor.CommitInterval(200*time.Millisecond),
		processor.SessionTimeout(freezeSessionTimeout),
		processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestZombieCannotCommitWithoutInput freezes (SIGSTOP) an instance whose
// tasks produce records without input — wall-clock punctuations, here —
// for longer than its session timeout, so that the group gives its tasks
// to the other instance, and then resumes it (SIGCONT): the zombie
// punctuates at once, with nothing polled to commit offsets for. Nothing
// it produces then may become visible to a read_committed reader, and
// nothing may be lost: every task's counts, read back, are 1, 2, 3, ...
// with neither a repeat (a zombie's commit from its stale state) nor a gap.
//
// The input has two partitions and records only in partition 0, so an
// instance owning partition 1 alone has no committed input offset at all.
func TestZombieCannotCommitWithoutInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two instances as processes for about a minute")
	}
	// With the in-process broker, the heartbeats that reach it in the
	// first moments after a resume are held back, so that the zombie's
	// first commit, not a heartbeat telling it that it lost its
	// partitions, is what it sends first (a race it may win or lose on
	// its own). Against SLUICE_TEST_BROKERS the race decides.
	addrs := externalBrokers()
	holdHeartbeats := func(time.Duration) {}
	if len(addrs) == 0 {
		b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		addrs = b.Addrs()
		c := b.Cluster()
		holdHeartbeats = func(d time.Duration) {
			until := time.Now().Add(d)
			c.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
				if wait := time.Until(until); wait > 0 {
					c.KeepControl()
					c.SleepControl(func() { time.Sleep(wait) })
				}
				return nil, nil, false
			})
		}
	}
	prefix := uniquePrefix(t)
	input, output, appID := prefix+"in", prefix+"ticks", prefix+"zombie"
	createTopics(t, addrs, 2, input, output)
	produceStrings(t, addrs, input, 0, 20)

	logDir := t.TempDir()
	if d := os.Getenv("SLUICE_CHAOS_LOG_DIR"); d != "" {
		logDir = d
	}
	type child struct {
		name string
		cmd  *exec.Cmd
		done chan struct{}
		err  error
	}
	var children []*child
	start := func(name string) *child {
		f, err := os.OpenFile(filepath.Join(logDir, appID+"-"+name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cmd := exec.Command(os.Args[0], "-test.run", "^TestZombieChild$", "-test.timeout", "20m")
		cmd.Env = append(os.Environ(), zombieChildEnv+"="+name,
			zombieConfEnv+"="+strings.Join([]string{strings.Join(addrs, ","), appID, filepath.Join(t.TempDir(), "state"), input, output}, "|"))
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = childProcAttr()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := &child{name: name, cmd: cmd, done: make(chan struct{})}
		go func() { c.err = cmd.Wait(); close(c.done) }()
		children = append(children, c)
		return c
	}
	t.Cleanup(func() {
		for _, c := range children {
			_ = c.cmd.Process.Signal(syscall.SIGCONT)
			_ = c.cmd.Process.Signal(syscall.SIGKILL)
			<-c.done
		}
		if t.Failed() {
			for _, c := range children {
				t.Logf("----- %s -----\n%s", c.name, tail(filepath.Join(logDir, appID+"-"+c.name+".log"), 40))
			}
		}
	})
	a, b := start("a"), start("b")

	// Both tasks tick before the first freeze.
	waitTicks(t, addrs, output, 2, time.Minute)
	for round, c := range []*child{a, b, a, b, a, b} {
		if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// Past the session timeout, short of the transaction timeout:
		// a transaction the zombie left open is still open when it
		// resumes.
		time.Sleep(freezeSessionTimeout + 2*time.Second)
		holdHeartbeats(2 * time.Second)
		if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: froze %s (pid %d) for %v", round+1, c.name, c.cmd.Process.Pid, freezeSessionTimeout+2*time.Second)
		time.Sleep(4 * time.Second)
	}
	for _, c := range children {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range children {
		select {
		case <-c.done:
		case <-time.After(time.Minute):
			t.Fatalf("%s (pid %d) did not exit within a minute of SIGTERM", c.name, c.cmd.Process.Pid)
		}
		if c.err != nil {
			t.Errorf("%s exited with %v", c.name, c.err)
		}
	}

	recs, err := readback.ReadCommitted(testContext(t, time.Minute), addrs, output)
	if err != nil {
		t.Fatal(err)
	}
	bad, writers := checkTicks(recs)
	if len(bad) > 0 {
		t.Fatalf("a zombie's records became visible, or records were lost (%d records):\n%s", len(recs), strings.Join(bad[:min(len(bad), 20)], "\n"))
	}
	// The freezes moved tasks: else the run proved nothing.
	moved := false
	for _, w := range writers {
		moved = moved || len(w) > 1
	}
	if !moved {
		t.Fatalf("no task was written by both instances: the freezes did not move a task (writers %v)", writers)
	}
	t.Logf("%d ticks committed; writers per task: %v", len(recs), writers)
}

// checkTicks checks that every task's counts are 1, 2, 3, ... and returns
// what is wrong, and the instances that wrote each task's counts.
func checkTicks(recs []*kgo.Record) (bad []string, writers map[string][]string) {
	last := map[string]int64{}
	lastBy := map[string]string{}
	writers = map[string][]string{}
	for _, r := range recs {
		task := string(r.Key)
		ns, by, _ := strings.Cut(string(r.Value), " ")
		n, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			bad = append(bad, fmt.Sprintf("task %s: bad value %q at %d/%d", task, r.Value, r.Partition, r.Offset))
			continue
		}
		if n != last[task]+1 {
			bad = append(bad, fmt.Sprintf("task %s: count %d by %s at %d/%d after %d by %s", task, n, by, r.Partition, r.Offset, last[task], lastBy[task]))
		}
		last[task], lastBy[task] = max(n, last[task]), by
		if !slices.Contains(writers[task], by) {
			writers[task] = append(writers[task], by)
		}
	}
	return bad, writers
}

// waitTicks waits until tasks tasks have committed counts.
func waitTicks(t *testing.T, addrs []string, topic string, tasks int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		recs, err := readback.ReadCommitted(testContext(t, time.Minute), addrs, topic)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			seen[string(r.Key)] = true
		}
		if len(seen) >= tasks {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("fewer than %d tasks committed ticks within %v", tasks, within)
}

// produceStrings writes n records to one partition of topic.
func produceStrings(t *testing.T, addrs []string, topic string, partition int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Key: []byte(strconv.Itoa(i)), Value: []byte("x")}
	}
	if err := cl.ProduceSync(testContext(t, time.Minute), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
