package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-streams/sluice/internal/bench"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

func newBenchCmd() *cobra.Command {
	var (
		cfg        bench.Config
		asJSON     bool
		only       string
		cpuprofile string
		memprofile string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure sluice against a raw franz-go consume→produce loop on the embedded broker",
		Long: `bench starts a fresh embedded broker for each scenario, preloads the input,
and measures records per second from start until the input is committed,
under exactly_once and at_least_once. vs_pipe is the ratio to the exactly_once
pipe measured in the same run. Scenarios: ` + strings.Join(bench.Scenarios, ", ") + ".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if only != "" {
				cfg.Scenarios = strings.Split(only, ",")
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
			w := cmd.OutOrStdout()
			if !asJSON {
				fmt.Fprintf(w, "sluice bench: %d records, %d partitions, commit.interval %s, %d CPUs, %s\n",
					cfg.Records, cfg.Partitions, cfg.CommitInterval, runtime.NumCPU(), runtime.Version())
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&only, "only", "", "comma-separated scenarios to run (the pipe always runs)")
	cmd.Flags().StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run")
	cmd.Flags().StringVar(&memprofile, "memprofile", "", "write an allocation profile of the whole run")
	return cmd
}

func printTable(w io.Writer, res []bench.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tguarantee\trecords\tseconds\trecords/s\tvs pipe\tsteady records/s\t")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.0f\t%.2f\t%.0f\t\n", r.Scenario, r.Guarantee, r.Records, r.Seconds, r.PerSecond, r.VsPipe, r.SteadyPerSecond)
	}
	tw.Flush()
}
