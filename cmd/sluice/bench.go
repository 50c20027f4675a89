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
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/internal/bench"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/txn"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

func newBenchCmd() *cobra.Command {
	var (
		cfg           bench.Config
		asJSON        bool
		only          string
		cpuprofile    string
		memprofile    string
		inProcess     bool
		child         string
		dbs           bool
		brokerProcess bool
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure sluice against a raw franz-go consume→produce loop on the embedded broker",
		Long: `bench starts a fresh embedded broker for each scenario, preloads the input,
and measures records per second from start until the input is committed,
under exactly_once and at_least_once. vs_pipe is the ratio to the exactly_once
pipe measured in the same run. Scenarios: ` + strings.Join(bench.Scenarios, ", ") + `.

--only savepoint (not run by default: it is slow) loads --records distinct
keys into a count store, then times a restore from the changelog, taking a
savepoint, and starting a fork from it, verifying the state after each.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if only != "" {
				cfg.Scenarios = strings.Split(only, ",")
			}
			if brokerProcess {
				cfg.StartBroker = startBrokerProcess
			}
			if slices.Contains(cfg.Scenarios, bench.SavepointScenario) {
				cfg.Scenarios = slices.DeleteFunc(cfg.Scenarios, func(s string) bool { return s == bench.SavepointScenario })
				if err := runSavepointBench(ctx, cmd.OutOrStdout(), cfg, asJSON); err != nil || len(cfg.Scenarios) == 0 {
					return err
				}
			}
			if cpuprofile != "" && cfg.TimedCPUProfile != "" {
				return errors.New("bench: --cpuprofile and --cpuprofile-timed: one CPU profile at a time")
			}
			if cpuprofile != "" {
				f, err := os.Create(cpuprofile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if memprofile != "" {
				defer func() {
					if f, err := os.Create(memprofile); err == nil {
						runtime.GC()
						_ = pprof.Lookup("allocs").WriteTo(f, 0)
						f.Close()
					}
				}()
			}
			if child != "" {
				cfg.DBURLs = benchDBURLsFromEnv()
			} else if dbs {
				urls, stopDBs, err := startBenchDBs(ctx, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer stopDBs()
				cfg.DBURLs = urls
			}
			if child != "" {
				// One scenario in this process, its result as JSON on stdout.
				name, gs, _ := strings.Cut(child, ":")
				g, err := txn.ParseGuarantee(gs)
				if err != nil {
					return err
				}
				res, err := bench.RunScenario(ctx, cfg, name, g)
				if err != nil {
					return err
				}
				return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
			}
			if !inProcess && cpuprofile == "" && memprofile == "" {
				cfg.Isolate = childRunner
			}
			w := cmd.OutOrStdout()
			if !asJSON {
				order := "the embedded broker's fetch order"
				if cfg.RoundRobinFetch {
					order = "partitions fetched in turn"
				}
				where := "the broker in each job's process"
				if brokerProcess {
					where = "the broker in a process of its own"
				}
				fmt.Fprintf(w, "sluice bench: %d records, %d partitions, commit.interval %s, %s, %s, %d CPUs, %s\n",
					cfg.Records, cfg.Partitions, cfg.CommitInterval, order, where, runtime.NumCPU(), runtime.Version())
			}
			progress := func(r bench.Result) {
				if !asJSON {
					fmt.Fprintf(cmd.ErrOrStderr(), "  %-10s %-14s %10.0f records/s\n", r.Scenario, r.Guarantee, r.PerSecond)
				}
			}
			res, err := bench.Run(ctx, cfg, progress)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			printTable(w, res)
			return nil
		},
	}
	cmd.Flags().IntVar(&cfg.Records, "records", 1_000_000, "input records per scenario")
	cmd.Flags().Int32Var(&cfg.Partitions, "partitions", 8, "partitions of the input topic")
	cmd.Flags().DurationVar(&cfg.CommitInterval, "commit-interval", 100*time.Millisecond, "commit interval of every scenario")
	cmd.Flags().IntVar(&cfg.Runs, "runs", 3, "runs of each scenario under each guarantee, in rounds of every scenario once, the pipe first; the median counts")
	cmd.Flags().IntVar(&cfg.Rate, "rate", 50_000, "input records per second of the paced latency runs")
	cmd.Flags().DurationVar(&cfg.PacedFor, "paced-for", 10*time.Second, "how long each paced latency run produces input (0: no paced runs)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&cfg.RoundRobinFetch, "round-robin-fetch", false, "turn fetch sessions off for the pipe and every job, so that the embedded broker serves the partitions in turn as Kafka's brokers do (with them and the bench's large input batches it serves one partition until it is drained, which favours count and windowed: PERFORMANCE.md); scenarios only, not --nexmark or --scaling")
	cmd.Flags().StringVar(&only, "only", "", "comma-separated scenarios to run (the pipe always runs)")
	cmd.Flags().StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run")
	cmd.Flags().StringVar(&cfg.TimedCPUProfile, "cpuprofile-timed", "", "write a CPU profile of each timed run alone (no warm-up, preload, verification or paced run) to a new file PREFIX-<scenario>-<guarantee>-*.prof; with --nexmark, of each query's job process to PREFIX-<query>.prof")
	cmd.Flags().StringVar(&memprofile, "memprofile", "", "write an allocation profile of the whole run (implies --in-process)")
	cmd.Flags().BoolVar(&inProcess, "in-process", false, "run every scenario in this process instead of one child process each (no peak RSS then; later scenarios then run in a process the earlier runs warmed, which flatters their ratios to the pipe's first run: see PERFORMANCE.md)")
	cmd.Flags().BoolVar(&dbs, "db-scenarios", false, "also run billing writing to PostgreSQL and to MariaDB, in two_phase and offsets mode ("+strings.Join(bench.DBScenarios, ", ")+"), on private servers started for the run (Debian packages postgresql and mariadb-server); with --only, name them")
	cmd.Flags().BoolVar(&brokerProcess, "broker-process", false, "run each scenario's embedded broker in a process of its own, as --scaling and --nexmark do, instead of in the job's process: the job's process then holds none of the broker's logs, and cpu µs/record and peak RSS are the job's alone")
	cmd.Flags().StringVar(&child, "child", "", "internal: run one scenario:guarantee and print its result as JSON")
	_ = cmd.Flags().MarkHidden("child")
	return withScaling(withNexmark(cmd))
}

// childRunner runs each scenario in a child process of this binary, so that
// every scenario starts from a fresh heap and reports its own peak RSS.
func childRunner(ctx context.Context, cfg bench.Config, name string, g txn.Guarantee) (bench.Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return bench.Result{}, err
	}
	c := exec.CommandContext(ctx, exe, "bench", "--child", name+":"+g.String(),
		"--records", strconv.Itoa(cfg.Records), "--partitions", strconv.Itoa(int(cfg.Partitions)),
		"--commit-interval", cfg.CommitInterval.String(),
		"--rate", strconv.Itoa(cfg.Rate), "--paced-for", cfg.PacedFor.String(),
		"--cpuprofile-timed", cfg.TimedCPUProfile, "--round-robin-fetch="+strconv.FormatBool(cfg.RoundRobinFetch),
		"--broker-process="+strconv.FormatBool(cfg.StartBroker != nil))
	c.Env = benchDBEnv(cfg.DBURLs)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return bench.Result{}, fmt.Errorf("%s %s: %w\n%s", name, g, err, stderr.String())
	}
	var res bench.Result
	if err := json.Unmarshal(out, &res); err != nil {
		return bench.Result{}, fmt.Errorf("%s %s: %w: %q", name, g, err, out)
	}
	return res, nil
}

func printTable(w io.Writer, res []bench.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tguarantee\trecords\tseconds\trecords/s\tvs pipe\tcpu µs/record\tproduced/record\tsteady records/s\tpeak RSS MiB\tpaced rate\tp50 ms\tp99 ms\tmax ms\t")
	for _, r := range res {
		rss := "-"
		if r.PeakRSSBytes > 0 {
			rss = strconv.FormatInt(r.PeakRSSBytes>>20, 10)
		}
		paced := "-\t-\t-\t-"
		if r.PacedRecords > 0 {
			paced = fmt.Sprintf("%.0f\t%.1f\t%.1f\t%.1f", r.PacedRate, r.LatencyP50ms, r.LatencyP99ms, r.LatencyMaxms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t%s\t\n", r.Scenario, r.Guarantee, r.Records, r.Seconds, r.PerSecond, r.VsPipe, r.CPUMicrosPerRecord, r.ProducedPerRecord, r.SteadyPerSecond, rss, paced)
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, r := range res {
		runs := ""
		if len(r.RunsPerSecond) > 1 {
			runs = " (runs:"
			for _, x := range r.RunsPerSecond {
				runs += fmt.Sprintf(" %.0f", x)
			}
			runs += " records/s; the median counts"
			if len(r.RunsVsPipe) > 0 {
				runs += "; of the pipe in the same round:"
				for _, x := range r.RunsVsPipe {
					runs += fmt.Sprintf(" %.2f", x)
				}
			}
			runs += ")"
		}
		fmt.Fprintf(w, "%s %s: %s%s\n", r.Scenario, r.Guarantee, r.Note, runs)
		if len(r.LoopShares) > 0 {
			fmt.Fprintf(w, "  %s\n", loopShares(r.LoopShares))
		}
		if len(r.CPUProfiles) > 0 {
			fmt.Fprintf(w, "  CPU profiles of the timed runs: %s\n", strings.Join(r.CPUProfiles, " "))
		}
	}
}

// loopShares says where a sluice job's loop spent the timed run, phase by
// phase in the loop's order, in percent.
func loopShares(shares map[string]float64) string {
	var b strings.Builder
	b.WriteString("loop time:")
	for i, p := range processor.LoopPhases {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s %.0f%%", p, 100*shares[p])
	}
	return b.String()
}

// runSavepointBench runs the savepoint scenario in this process (it is
// one measurement of several phases, not a throughput run per guarantee)
// and prints its phases.
func runSavepointBench(ctx context.Context, w io.Writer, cfg bench.Config, asJSON bool) error {
	res, err := bench.RunSavepoint(ctx, cfg)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(w, "sluice bench savepoint: %d keys, %d partitions, commit.interval %s, %d CPUs, %s; savepoint %.1f MiB on disk\n",
		cfg.Records, cfg.Partitions, cfg.CommitInterval, runtime.NumCPU(), runtime.Version(), float64(res.Bytes)/(1<<20))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tkeys\tseconds\trecords/s\tcpu µs/record\t")
	for _, r := range res.Phases {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.0f\t%.2f\t\n", r.Scenario, r.Records, r.Seconds, r.PerSecond, r.CPUMicrosPerRecord)
	}
	tw.Flush()
	for _, r := range res.Phases {
		fmt.Fprintf(w, "%s: %s\n", r.Scenario, r.Note)
	}
	return nil
}
