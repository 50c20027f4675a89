package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/txn"
)

func init() { subcommands = append(subcommands, newDemoCmd) }

type demoConfig struct {
	lines      int
	instances  int
	partitions int32
	seed       uint64
	timeout    time.Duration
}

func newDemoCmd() *cobra.Command {
	var c demoConfig
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run wordcount on an in-process broker with two exactly-once instances and check every count",
		Long: `demo starts an in-process Kafka-protocol broker, produces a generated set of
text lines with a known word distribution, runs wordcount instances under
exactly_once, reads the results back with a read_committed consumer, prints
the top 10 words and checks every count against a direct count of the input.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDemo(ctx, cmd.OutOrStdout(), c)
		},
	}
	cmd.Flags().IntVar(&c.lines, "lines", 100_000, "number of text lines to generate")
	cmd.Flags().IntVar(&c.instances, "instances", 2, "wordcount instances to run")
	cmd.Flags().Int32Var(&c.partitions, "partitions", 4, "partitions of the input topic")
	cmd.Flags().Uint64Var(&c.seed, "seed", 1, "seed of the generated text")
	cmd.Flags().DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up after this long")
	return cmd
}

// vocabulary makes n pronounceable words, most frequent first.
func vocabulary(n int) []string {
	cons := []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"}
	vows := []string{"a", "e", "i", "o", "u"}
	words := make([]string, n)
	for i := range words {
		var sb strings.Builder
		x := i
		for {
			sb.WriteString(cons[x%len(cons)])
			x /= len(cons)
			sb.WriteString(vows[x%len(vows)])
			x /= len(vows)
			if x == 0 {
				break
			}
		}
		words[i] = sb.String()
	}
	return words
}

// demoText generates lines whose words follow a Zipf distribution, with a
// mix of case that wordcount folds, and returns the direct count.
func demoText(lines int, seed uint64) ([]string, map[string]int64, int64) {
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	vocab := vocabulary(5000)
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	want := map[string]int64{}
	var total int64
	out := make([]string, lines)
	for i := range out {
		n := 1 + r.IntN(8)
		ws := make([]string, n)
		for j := range ws {
			w := vocab[zipf.Uint64()]
			want[w]++
			if r.IntN(10) == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			ws[j] = w
		}
		total += int64(n)
		out[i] = strings.Join(ws, " ")
	}
	return out, want, total
}

func runDemo(ctx context.Context, w io.Writer, c demoConfig) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: int(c.partitions)})
	if err != nil {
		return err
	}
	defer b.Close()
	addrs := b.Addrs()
	fmt.Fprintf(w, "broker   listening on %s\n", strings.Join(addrs, ","))
	const input, output = "text-lines", "word-counts"
	for _, t := range []string{input, output, input + "-dlq"} {
		if err := broker.CreateTopic(ctx, addrs, t, c.partitions, nil); err != nil {
			return err
		}
	}

	lines, want, words := demoText(c.lines, c.seed)
	if err := produceLines(ctx, addrs, input, lines); err != nil {
		return err
	}
	fmt.Fprintf(w, "input    %d lines, %d words (%d distinct) in %s\n", len(lines), words, len(want), input)

	stateDir, err := os.MkdirTemp("", "sluice-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateDir)
	appCtx, stopApps := context.WithCancel(ctx)
	defer stopApps()
	apps := make([]*processor.App, c.instances)
	done := make(chan error, c.instances)
	for i := range apps {
		apps[i], err = processor.New(examples.WordCount(input, output, input+"-dlq"),
			processor.ApplicationID("sluice-demo"),
			processor.Brokers(addrs...),
			processor.Guarantee(txn.ExactlyOnce),
			processor.StateDir(fmt.Sprintf("%s/instance-%d", stateDir, i)),
			processor.InstanceID("demo-"+strconv.Itoa(i)),
		)
		if err != nil {
			return err
		}
		go func(a *processor.App) { done <- a.Run(appCtx) }(apps[i])
	}
	fmt.Fprintf(w, "running  %d wordcount instances, exactly_once, application.id sluice-demo\n", c.instances)

	// Every line is read once, and every word once more from the
	// repartition topic.
	target := int64(len(lines)) + words
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	runStart := time.Now()
	for {
		var processed, commits, tasks int64
		for _, a := range apps {
			processed += a.Stats().Processed.Load()
			commits += a.Stats().Commits.Load()
			tasks += a.Stats().Tasks.Load()
		}
		if processed >= target {
			fmt.Fprintf(w, "progress %d/%d records committed in %s\n", processed, target, time.Since(runStart).Round(time.Millisecond))
			break
		}
		select {
		case err := <-done:
			return fmt.Errorf("demo: an instance stopped: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("demo: timed out with %d/%d records committed", processed, target)
		case <-tick.C:
			fmt.Fprintf(w, "progress %d/%d records committed (%d tasks, %d commits)\n", processed, target, tasks, commits)
		}
	}
	stopApps()
	for range apps {
		if err := <-done; err != nil {
			return fmt.Errorf("demo: instance: %w", err)
		}
	}

	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	recs, err := readback.ReadCommitted(rctx, addrs, output)
	if err != nil {
		return err
	}
	got := map[string]int64{}
	for k, v := range readback.Last(recs) {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("demo: count of %q is %q: %v", k, v, err)
		}
		got[k] = n
	}
	fmt.Fprintf(w, "results  %d updates read back from %s (read_committed)\n", len(recs), output)
	top := make([]string, 0, len(got))
	for k := range got {
		top = append(top, k)
	}
	sort.Slice(top, func(i, j int) bool { return got[top[i]] > got[top[j]] || got[top[i]] == got[top[j]] && top[i] < top[j] })
	fmt.Fprintln(w, "top 10:")
	for i, k := range top[:min(10, len(top))] {
		fmt.Fprintf(w, "  %2d. %-12s %d\n", i+1, k, got[k])
	}
	var bad []string
	for k, n := range want {
		if got[k] != n {
			bad = append(bad, fmt.Sprintf("%s: got %d, want %d", k, got[k], n))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: counted %d, never in the input", k, got[k]))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return errors.New("demo: counts differ from the input:\n  " + strings.Join(bad[:min(20, len(bad))], "\n  "))
	}
	fmt.Fprintf(w, "check    all %d word counts match a direct count of the input\n", len(want))
	fmt.Fprintf(w, "done     in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

func produceLines(ctx context.Context, addrs []string, topic string, lines []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	errc := make(chan error, 1)
	for _, l := range lines {
		cl.Produce(ctx, &kgo.Record{Value: []byte(l)}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("demo: produce: %w", err)
	default:
		return nil
	}
}
