package processor_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// TestFromSavepointTakeInChild is the child process of
// TestFromSavepointTakeInSIGKILL: a bounded fork of kvCounts from a
// savepoint; with SPT_KILL=1 it kills itself with SIGKILL in the middle of
// taking a store copy in (copied, not yet in place).
func TestFromSavepointTakeInChild(t *testing.T) {
	if os.Getenv("SPT_CHILD") != "1" {
		t.Skip("child process of TestFromSavepointTakeInSIGKILL")
	}
	if os.Getenv("SPT_KILL") == "1" {
		defer processor.SetTakeInCopy(func(src, dst string) error {
			err := store.CopyDir(src, dst)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
			return err
		})()
	}
	app, err := processor.New(kvCounts(os.Getenv("SPT_IN"), os.Getenv("SPT_OUT"), "counts", serde.Int64),
		processor.ApplicationID(os.Getenv("SPT_APP")), processor.Brokers(os.Getenv("SPT_BROKERS")),
		processor.StateDir(os.Getenv("SPT_STATE")), processor.Bounded(),
		processor.FromSavepoint(os.Getenv("SPT_SAVEPOINT")), processor.AllowOtherApp(),
		processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := app.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFromSavepointTakeInSIGKILL: a fork from a savepoint (keys of every
// length, two partitions) is killed with SIGKILL in the middle of taking a
// store copy in, after the seed committed; the half-built copy is not in
// place. The fork run again takes both copies in (no changelog replay of
// the seeded records), then counts input produced after the savepoint:
// every key's counts go on from its count at the savepoint, each exactly
// once. Negative control: the counts a fork with empty stores would write
// are told apart by the same check.
func TestFromSavepointTakeInSIGKILL(t *testing.T) {
	addrs := testBrokers(t)
	dir, in, _, counts := kvSavepoint(t, addrs, 300)
	out := uniq(t, "spt-out")
	if err := broker.CreateTopic(context.Background(), addrs, out, 2, nil); err != nil {
		t.Fatal(err)
	}
	fork, state := uniq(t, "spt-fork"), t.TempDir()
	env := append(os.Environ(), "SPT_CHILD=1", "SPT_IN="+in, "SPT_OUT="+out, "SPT_APP="+fork,
		"SPT_BROKERS="+strings.Join(addrs, ","), "SPT_STATE="+state, "SPT_SAVEPOINT="+dir)
	run := func(kill bool) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFromSavepointTakeInChild$", "-test.v")
		cmd.Env = slices.Clone(env)
		if kill {
			cmd.Env = append(cmd.Env, "SPT_KILL=1")
		}
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return buf.String(), err
		case <-time.After(120 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("child did not end within 120s:\n%s", tail(buf.String(), 3000))
		}
		return "", nil
	}
	log, err := run(true)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("first run: %v, want killed by SIGKILL\n%s", err, tail(log, 3000))
	}
	// Killed mid take-in: a copy under .takein, no store in place.
	left, _ := filepath.Glob(filepath.Join(state, fork, ".takein", "*"))
	placed, _ := filepath.Glob(filepath.Join(state, fork, "*_*", "counts"))
	if len(left) == 0 || len(placed) != 0 {
		t.Fatalf("after the kill: %v under .takein, %v in place; want a copy under .takein and none in place", left, placed)
	}

	// Input after the savepoint: every key of every length, more than once.
	keys := testkeys.Bytes()
	var rs []*kgo.Record
	added := map[string]int64{}
	for i := range 3 * len(keys) {
		k := keys[(i*5)%len(keys)]
		added[string(k)]++
		rs = append(rs, &kgo.Record{Key: k, Value: []byte("v"), Timestamp: time.UnixMilli(int64(10_000 + i))})
	}
	produceAll(t, addrs, in, rs)

	log, err = run(false)
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, tail(log, 3000))
	}
	if n := strings.Count(log, "store copy taken in"); n != 2 {
		t.Fatalf("second run took %d store copies in, want 2\n%s", n, tail(log, 3000))
	}
	want, empty := map[string][]string{}, map[string][]string{}
	for k, n := range added {
		for i := range n {
			want[k] = append(want[k], string(serdeInt64(counts[k]+i+1)))
			empty[k] = append(empty[k], string(serdeInt64(i+1)))
		}
	}
	got := perKey(t, addrs, out)
	if d := diffPerKey(got, want); d != "" {
		t.Fatalf("the fork's counts after the savepoint: %s", d)
	}
	if diffPerKey(got, empty) == "" {
		t.Fatal("negative control: the check does not tell the savepoint's state from empty stores")
	}
	if left, _ := filepath.Glob(filepath.Join(state, fork, ".takein", "*")); len(left) != 0 {
		t.Errorf("left under .takein after the second run: %v", left)
	}

	// The state directory lost, more input, a third run still given the
	// savepoint: the changelogs moved on since the seed, so the copies are
	// not taken in (they could revive entries whose tombstones compaction
	// removed) and the stores restore from the changelogs; the counts go on.
	if err := os.RemoveAll(filepath.Join(state, fork)); err != nil {
		t.Fatal(err)
	}
	var again []*kgo.Record // records are not produced twice
	for _, r := range rs {
		again = append(again, &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp})
	}
	produceAll(t, addrs, in, again)
	log, err = run(false)
	if err != nil {
		t.Fatalf("third run: %v\n%s", err, tail(log, 3000))
	}
	if n := strings.Count(log, "store copy taken in"); n != 0 || !strings.Contains(log, "moved on since the seed") {
		t.Fatalf("third run took %d store copies in, want 0 (the changelogs moved on)\n%s", n, tail(log, 3000))
	}
	for k, n := range added {
		for i := range n {
			want[k] = append(want[k], string(serdeInt64(counts[k]+n+i+1)))
		}
	}
	if d := diffPerKey(perKey(t, addrs, out), want); d != "" {
		t.Fatalf("the fork's counts after a restart without state: %s", d)
	}
}
