package main

import (
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
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/internal/bench"
	"github.com/sluice-streams/sluice/processor"
)

// withScaling adds --scaling to the bench command: how throughput, peak
// RSS and restore time grow with the input, the key space and the store
// (internal/bench/scaling.go), each point's job in a process of its own
// against a broker in another.
func withScaling(cmd *cobra.Command) *cobra.Command {
	var (
		on                        bool
		cfg                       bench.ScalingConfig
		records, keys, scenarios  string
		budget, restore, out, svg string
		child                     string
	)
	f := cmd.Flags()
	f.BoolVar(&on, "scaling", false, "measure how cost grows instead of the scenarios: throughput and peak RSS of count and windowed against input records and distinct keys, under a memory budget, and the restore of a large store; each job in a process of its own, the broker in another")
	f.StringVar(&records, "scaling-records", "1000000", "with --scaling: comma-separated input sizes of the record sweep (e.g. 1000000,10000000,30000000; empty: none)")
	f.StringVar(&keys, "scaling-keys", "10000,1000000", "with --scaling: comma-separated key spaces of the key sweep (e.g. 10000,1000000,10000000; empty: none)")
	f.IntVar(&cfg.KeyRecords, "scaling-key-records", 1_000_000, "with --scaling: input records of each key-sweep point (at least its keys)")
	f.StringVar(&scenarios, "scaling-scenarios", "count,windowed", "with --scaling: the jobs of the sweeps")
	f.StringVar(&budget, "scaling-memory-budget", formatBytes(processor.DefaultMemoryBudget), "with --scaling: every job's state.memory.budget")
	f.BoolVar(&cfg.LimitGoMemory, "scaling-limit-go-memory", true, "with --scaling: every job's state.memory.go.limit (the Go memory limit from the budget)")
	f.StringVar(&restore, "scaling-restore-bytes", "64MiB", "with --scaling: size of the store to restore from its changelog and from the checkpoint a SIGKILL left (e.g. 1GiB; 0: none)")
	f.StringVar(&out, "scaling-json", "", "with --scaling: write the points as JSON to this file")
	f.StringVar(&svg, "scaling-svg", "", "with --scaling: write the chart (SVG) to this file")
	f.StringVar(&child, "scaling-child", "", "internal: run one scaling point (JSON) and print its usage as JSON")
	_ = f.MarkHidden("scaling-child")
	inner := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if child != "" {
			var p bench.ScalingPoint
			if err := json.Unmarshal([]byte(child), &p); err != nil {
				return fmt.Errorf("bench: --scaling-child: %w", err)
			}
			return bench.RunScalingPoint(c.Context(), p, c.OutOrStdout())
		}
		if !on {
			return inner(c, args)
		}
		ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var err error
		if cfg.Records, err = intList(records); err != nil {
			return fmt.Errorf("bench: --scaling-records: %w", err)
		}
		if cfg.Keys, err = intList(keys); err != nil {
			return fmt.Errorf("bench: --scaling-keys: %w", err)
		}
		if cfg.MemoryBudget, err = parseBytes(budget); err != nil {
			return fmt.Errorf("bench: --scaling-memory-budget: %w", err)
		}
		if cfg.RestoreBytes, err = parseBytes(restore); err != nil {
			return fmt.Errorf("bench: --scaling-restore-bytes: %w", err)
		}
		cfg.Scenarios = strings.Split(scenarios, ",")
		cfg.Partitions, _ = f.GetInt32("partitions")
		cfg.CommitInterval, _ = f.GetDuration("commit-interval")
		cfg.StartBroker = startBrokerProcess
		cfg.Start = startScalingChild
		w := c.OutOrStdout()
		fmt.Fprintf(w, "sluice bench --scaling: memory budget %s, Go memory limit %v, %d partitions, commit.interval %s, each job in a process of its own, the broker in another, %d CPUs, %s\n",
			formatBytes(cfg.MemoryBudget), cfg.LimitGoMemory, cfg.Partitions, cfg.CommitInterval, runtime.NumCPU(), runtime.Version())
		rep, err := bench.RunScaling(ctx, cfg, func(r bench.ScalingResult) {
			fmt.Fprintf(c.ErrOrStderr(), "  %-18s %-9s %9s records %9s keys %10.0f records/s %6d MiB\n",
				r.Kind, r.Scenario, strconv.Itoa(r.Records), strconv.Itoa(r.Keys), r.PerSecond, r.PeakRSSBytes>>20)
		})
		if len(rep.Points) > 0 {
			printScaling(w, rep)
			if out != "" {
				b, _ := json.MarshalIndent(rep, "", "  ")
				if werr := os.WriteFile(out, append(b, '\n'), 0o644); werr != nil {
					err = errors.Join(err, werr)
				}
			}
			if svg != "" {
				if werr := os.WriteFile(svg, bench.ScalingSVG(rep), 0o644); werr != nil {
					err = errors.Join(err, werr)
				}
			}
		}
		return err
	}
	return cmd
}

// intList reads comma-separated positive integers; empty: none (not
// nil, so that the sweep is skipped rather than given its default).
func intList(s string) ([]int, error) {
	out := []int{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("want positive integers, got %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func printScaling(w io.Writer, rep bench.ScalingReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "point\tjob\tsweep\trecords\tkeys\tseconds\trecords/s\tCPU s\tpeak RSS MiB\tGo MiB\toutside Go MiB\t")
	for _, r := range rep.Points {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.2f\t%.0f\t%.2f\t%d\t%d\t%d\t\n", r.Kind, r.Scenario, r.Axis, r.Records, r.Keys, r.Seconds, r.PerSecond, r.CPUSeconds, r.PeakRSSBytes>>20, r.PeakGoBytes>>20, r.PeakOutsideGoBytes>>20)
	}
	tw.Flush()
	for _, r := range rep.Points {
		if r.Note != "" {
			fmt.Fprintf(w, "%s %s %d: %s\n", r.Kind, r.Scenario, r.Records, r.Note)
		}
	}
}

// startScalingChild runs one point in a child process of this binary and
// reads its usage from its stdout. A ScalingKill point must end killed by
// SIGKILL, after printing its usage.
func startScalingChild(ctx context.Context, p bench.ScalingPoint) (bench.ScalingUsage, error) {
	exe, err := os.Executable()
	if err != nil {
		return bench.ScalingUsage{}, err
	}
	spec, err := json.Marshal(p)
	if err != nil {
		return bench.ScalingUsage{}, err
	}
	cmd := exec.CommandContext(ctx, exe, "bench", "--scaling-child", string(spec))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if p.Kind == bench.ScalingKill {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return bench.ScalingUsage{}, fmt.Errorf("the instance was to kill itself, but ended with %v\n%s", err, stderr.String())
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			return bench.ScalingUsage{}, fmt.Errorf("the instance was to kill itself, but ended with %v\n%s", err, stderr.String())
		}
	} else if err != nil {
		return bench.ScalingUsage{}, fmt.Errorf("%w\n%s", err, stderr.String())
	}
	var u bench.ScalingUsage
	if err := json.Unmarshal(stdout.Bytes(), &u); err != nil {
		return u, fmt.Errorf("usage %q: %w\n%s", stdout.String(), err, stderr.String())
	}
	return u, nil
}
