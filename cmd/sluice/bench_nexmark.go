package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/examples/nexmark"
	"github.com/sluice-streams/sluice/internal/bench"
	"github.com/sluice-streams/sluice/internal/broker"
)

// withNexmark adds --nexmark to the bench command: the Nexmark queries
// instead of the scenarios, each in a process of its own against a broker
// in another process, so that the CPU and memory reported are the job's
// alone.
func withNexmark(cmd *cobra.Command) *cobra.Command {
	var (
		on      bool
		cfg     bench.NexmarkConfig
		queries string
		child   string
	)
	f := cmd.Flags()
	f.BoolVar(&on, "nexmark", false, "run the Nexmark queries (examples nexmark-q*) instead of the scenarios: events/s, events per CPU-second of the job's process, peak RSS, beside Flink 1.13's published events/s per core")
	f.Int64Var(&cfg.Events, "nexmark-events", 1_000_000, "with --nexmark: Nexmark events (1 person, 3 auctions, 46 bids in every 50)")
	f.StringVar(&queries, "nexmark-queries", "", "with --nexmark: comma-separated queries (default: "+strings.Join(nexmark.Queries, ",")+")")
	f.Uint64Var(&cfg.Seed, "nexmark-seed", 0, "with --nexmark: the generator's seed")
	f.BoolVar(&cfg.LimitGoMemory, "nexmark-limit-go-memory", false, "with --nexmark: every job's state.memory.go.limit (the Go memory limit from the budget, GOGC off while it is set); not with --in-process, where the broker's logs share the heap")
	f.StringVar(&child, "nexmark-child", "", "internal: run one Nexmark job (JSON) until stdin closes and print its usage as JSON")
	_ = f.MarkHidden("nexmark-child")
	inner := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if child != "" {
			return runNexmarkChild(c, child)
		}
		if !on {
			return inner(c, args)
		}
		ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if queries != "" {
			cfg.Queries = strings.Split(queries, ",")
		}
		cfg.Partitions, _ = f.GetInt32("partitions")
		cfg.CommitInterval, _ = f.GetDuration("commit-interval")
		cfg.CPUProfile, _ = f.GetString("cpuprofile-timed")
		inProcess, _ := f.GetBool("in-process")
		asJSON, _ := f.GetBool("json")
		if inProcess && cfg.LimitGoMemory {
			return errors.New("sluice bench: --nexmark-limit-go-memory with --in-process would limit the broker's heap too")
		}
		w := c.OutOrStdout()
		if inProcess {
			b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: int(cfg.Partitions)})
			if err != nil {
				return err
			}
			defer b.Close()
			cfg.Brokers, cfg.Start = b.Addrs(), startNexmarkInProcess
		} else {
			addrs, stopBroker, err := startBrokerProcess(ctx, cfg.Partitions)
			if err != nil {
				return err
			}
			defer stopBroker()
			cfg.Brokers, cfg.Start = addrs, startNexmarkChild
		}
		if !asJSON {
			where := "each query in a process of its own, the broker in another"
			if inProcess {
				where = "in one process with the broker (CPU and RSS include it)"
			}
			fmt.Fprintf(w, "sluice bench --nexmark: %d events, %d partitions, commit.interval %s, Go memory limit %v, %s, %d CPUs, %s\n",
				cfg.Events, cfg.Partitions, cfg.CommitInterval, cfg.LimitGoMemory, where, runtime.NumCPU(), runtime.Version())
		}
		res, err := bench.RunNexmark(ctx, cfg, func(r bench.NexmarkResult) {
			if !asJSON {
				fmt.Fprintf(c.ErrOrStderr(), "  %-4s %10.0f events/s\n", r.Query, r.EventsPerSecond)
			}
		})
		if err != nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		printNexmarkTable(w, res)
		return nil
	}
	return cmd
}

func printNexmarkTable(w io.Writer, res []bench.NexmarkResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tmode\tevents\tseconds\tevents/s\tCPU s\tevents/CPU-s\tpeak RSS MiB\tFlink 1.13 events/s/core\tratio\t")
	for _, r := range res {
		mode := "streaming"
		if r.Bounded {
			mode = "bounded"
		}
		rss, flink, ratio := "-", "-", "-"
		if r.PeakRSSBytes > 0 {
			rss = strconv.FormatInt(r.PeakRSSBytes>>20, 10)
		}
		if r.FlinkPerCore > 0 {
			flink = fmt.Sprintf("%.0f", r.FlinkPerCore)
			if r.EventsPerCPUSecond > 0 {
				ratio = fmt.Sprintf("%.2f", r.EventsPerCPUSecond/r.FlinkPerCore)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%.2f\t%.0f\t%s\t%s\t%s\t\n", r.Query, mode, r.Events, r.Seconds, r.EventsPerSecond, r.CPUSeconds, r.EventsPerCPUSecond, rss, flink, ratio)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nratio: events per CPU-second of the job's process over Flink's events/s per core; every output checked against the oracle")
}

// startBrokerProcess runs `sluice broker` as a child process and returns
// its address.
func startBrokerProcess(ctx context.Context, partitions int32) ([]string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	c := exec.Command(exe, "broker", "--listen", "127.0.0.1:0", "--partitions", strconv.Itoa(int(partitions)))
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		return nil, nil, fmt.Errorf("bench: start the broker: %w", err)
	}
	stop := func() {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait()
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "sluice broker listening on "); ok {
				select {
				case lines <- addr:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-lines:
		return []string{addr}, stop, nil
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	stop()
	return nil, nil, errors.New("bench: the broker process did not say where it listens")
}

// startNexmarkChild runs a job in a child process of this binary; closing
// its stdin stops it, and it prints its usage on stdout as it exits.
func startNexmarkChild(ctx context.Context, job bench.NexmarkJob) (func() (bench.NexmarkUsage, error), <-chan error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	spec, err := json.Marshal(job)
	if err != nil {
		return nil, nil, err
	}
	c := exec.Command(exe, "bench", "--nexmark-child", string(spec))
	stdin, err := c.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		return nil, nil, fmt.Errorf("bench: start %s: %w", job.Query, err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = c.Wait()
		exited <- waitErr
		close(done)
	}()
	stop := func() (bench.NexmarkUsage, error) {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = c.Process.Kill()
			<-done
		}
		if waitErr != nil {
			return bench.NexmarkUsage{}, fmt.Errorf("bench: %s: %w\n%s", job.Query, waitErr, stderr.String())
		}
		var u bench.NexmarkUsage
		if err := json.Unmarshal(stdout.Bytes(), &u); err != nil {
			return u, fmt.Errorf("bench: %s: usage %q: %w", job.Query, stdout.String(), err)
		}
		return u, nil
	}
	return stop, exited, nil
}

// runNexmarkChild is the child's side: the job until stdin closes (or,
// bounded, until its input's end), then its usage on stdout.
func runNexmarkChild(c *cobra.Command, spec string) error {
	var job bench.NexmarkJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		return fmt.Errorf("bench: --nexmark-child: %w", err)
	}
	ctx, cancel := context.WithCancel(c.Context())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	u, err := bench.RunNexmarkJob(ctx, job)
	if err != nil {
		return err
	}
	return json.NewEncoder(c.OutOrStdout()).Encode(u)
}

// startNexmarkInProcess runs a job in this process: its usage is the CPU
// time the whole process spent meanwhile (broker and follower included),
// with no peak RSS.
func startNexmarkInProcess(ctx context.Context, job bench.NexmarkJob) (func() (bench.NexmarkUsage, error), <-chan error, error) {
	jctx, cancel := context.WithCancel(ctx)
	cpu0 := processCPU()
	exited := make(chan error, 1)
	done := make(chan struct{})
	var runErr error
	go func() {
		_, runErr = bench.RunNexmarkJob(jctx, job)
		exited <- runErr
		close(done)
	}()
	var once sync.Once
	var u bench.NexmarkUsage
	stop := func() (bench.NexmarkUsage, error) {
		once.Do(func() {
			cancel()
			<-done
			u.CPUSeconds = (processCPU() - cpu0).Seconds()
		})
		return u, runErr
	}
	return stop, exited, nil
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
