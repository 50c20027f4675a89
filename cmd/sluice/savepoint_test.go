package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/serde"
)

// lockedBuffer collects a process's output for the test to read while it
// runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSavepointCreateCLI: against a `sluice broker` process and two
// `sluice run wordcount` processes, `sluice savepoint create` refuses an
// existing directory (changing nothing), then writes a savepoint whose
// counts are every word of the input, prints where it went, and both runs
// exit 0 saying they stopped with it; `sluice state ls` reads it.
func TestSavepointCreateCLI(t *testing.T) {
	if raceEnabled {
		t.Skip("runs separate binaries: nothing for the race detector")
	}
	if testing.Short() {
		t.Skip("runs processes for ~15 s; not with -short")
	}
	bin, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	sluice := filepath.Join(bin, "sluice")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	broker := exec.CommandContext(ctx, sluice, "broker", "--listen", "127.0.0.1:0")
	stdout, err := broker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { broker.Process.Kill(); broker.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the broker's listen line: %v", err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "sluice broker listening on ")
	if !ok {
		t.Fatalf("broker said %q", line)
	}
	go io.Copy(io.Discard, stdout)

	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, sluice, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("topic", "create", "lines", "--partitions", "4", "--brokers", addr); err != nil {
		t.Fatalf("topic create: %v\n%s", err, out)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("lines"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	words := int64(0)
	keys := testkeys.Bytes()
	for i := range 400 {
		l := fmt.Sprintf("w%d w%d %s", i%13, i%5, testkeys.UUIDs(3)[i%3])
		words += int64(len(examples.Words(l)))
		cl.Produce(ctx, &kgo.Record{Key: keys[i%len(keys)], Value: []byte(l)}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	type proc struct {
		out  *lockedBuffer
		done chan error
	}
	var procs []proc
	for i := range 2 {
		p := proc{out: &lockedBuffer{}, done: make(chan error, 1)}
		cmd := exec.CommandContext(ctx, sluice, "run", "wordcount", "--brokers", addr, "--app-id", "wc", "--instance-id", fmt.Sprintf("i%d", i),
			"--state-dir", t.TempDir(), "--input", "lines", "--output", "counts-out", "--dlq", "lines-dlq", "--create-topics", "--partitions", "4")
		cmd.Stdout, cmd.Stderr = p.out, p.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { p.done <- cmd.Wait() }()
		t.Cleanup(func() { cmd.Process.Kill() })
		procs = append(procs, p)
	}
	// Every line processed: the group committed the input's ends.
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(60 * time.Second)
	for {
		offs, err := adm.FetchOffsets(ctx, "wc")
		var n int64
		if err == nil {
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == "lines" {
					n += o.At
				}
			})
		}
		if n >= 400 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the input was not processed in a minute:\n%s\n%s", procs[0].out, procs[1].out)
		}
		time.Sleep(50 * time.Millisecond)
	}

	existing := t.TempDir()
	out, err := run("savepoint", "create", "--app-id", "wc", "--to", existing, "--brokers", addr)
	if err == nil || !strings.Contains(out, "directory exists") {
		t.Fatalf("savepoint create over an existing directory: %v\n%s", err, out)
	}

	dir := filepath.Join(t.TempDir(), "sp")
	out, err = run("savepoint", "create", "--app-id", "wc", "--to", dir, "--brokers", addr, "--timeout", "40s", "--log-level", "warn")
	if err != nil {
		t.Fatalf("savepoint create: %v\n%s", err, out)
	}
	t.Logf("savepoint create:\n%s", out)
	for _, want := range []string{"written to " + dir, "store counts (key-value, 4 partitions)", "input lines (4 partitions) at offsets", "the instances stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	for i, p := range procs {
		select {
		case err := <-p.done:
			if err != nil {
				t.Fatalf("run %d: %v\n%s", i, err, p.out)
			}
			if !strings.Contains(p.out.String(), "stopped with savepoint "+dir) {
				t.Errorf("run %d does not say it stopped with the savepoint:\n%s", i, p.out)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d did not stop:\n%s", i, p.out)
		}
	}

	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Verify(); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for p := range int32(4) {
		if err := sp.Each("counts", p, func(_, v []byte) error {
			n, err := serde.Int64.Decode(v)
			sum += n
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	if sum != words {
		t.Fatalf("the savepoint counts %d words, the input has %d", sum, words)
	}
	if out, err := run("state", "ls", dir); err != nil || !strings.Contains(out, "counts") {
		t.Fatalf("state ls of the savepoint: %v\n%s", err, out)
	}
	if _, err := os.Stat(existing); err != nil {
		t.Fatal(err)
	}
}
