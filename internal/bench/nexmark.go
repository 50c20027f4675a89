package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/examples/nexmark"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/memstat"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
)

// NexmarkFlinkPerCore is the throughput per core that the nexmark
// repository publishes for Flink 1.13 (events/s per core, 8-core workers,
// RocksDB, exactly-once checkpoints); q3 has none.
var NexmarkFlinkPerCore = map[string]float64{
	"q0": 155_000, "q1": 158_000, "q2": 175_000, "q4": 34_000, "q5": 22_000, "q7": 12_300,
	"q8": 146_000, "q11": 39_700, "q18": 53_700, "q19": 44_000, "q20": 19_000,
}

// NexmarkBounded lists the queries that run bounded (processor.Bounded):
// the others repartition without windowed state, which a bounded run
// refuses, so they run streaming until their output is the oracle's.
var NexmarkBounded = map[string]bool{"q0": true, "q1": true, "q2": true, "q5": true, "q7": true, "q8": true, "q11": true, "q19": true, "q20": true}

// NexmarkConfig is one `sluice bench --nexmark` run.
type NexmarkConfig struct {
	Events         int64
	Seed           uint64
	Rate           int   // events per second of event time; 0: Nexmark's 10,000
	Partitions     int32 // of the input and output topics
	CommitInterval time.Duration
	Queries        []string // default: nexmark.Queries
	Brokers        []string // the cluster (the broker in a process of its own, so its CPU is not the job's)
	// CPUProfile, if set, has each query's job write a CPU profile of
	// itself to CPUProfile-<query>.prof.
	CPUProfile string
	// LimitGoMemory sets every job's state.memory.go.limit.
	LimitGoMemory bool
	// Start runs a query's job; see NexmarkStart.
	Start NexmarkStart
}

// NexmarkStart starts job (a query, its topics and settings) and returns
// once it runs. exited receives the job's end if it ends by itself (a
// bounded job does); stop ends it (if it still runs) and returns what its
// process used.
type NexmarkStart func(ctx context.Context, job NexmarkJob) (stop func() (NexmarkUsage, error), exited <-chan error, err error)

// NexmarkJob is one query to run.
type NexmarkJob struct {
	Query          string                 `json:"query"`
	AppID          string                 `json:"app_id"`
	Topics         examples.NexmarkTopics `json:"topics"`
	Bounded        bool                   `json:"bounded"`
	Brokers        []string               `json:"brokers"`
	CommitInterval time.Duration          `json:"commit_interval"`
	CPUProfile     string                 `json:"cpu_profile,omitempty"`     // a file for the job's CPU profile
	LimitGoMemory  bool                   `json:"limit_go_memory,omitempty"` // state.memory.go.limit
}

// NexmarkUsage is what a job's process used: CPU time (user and system)
// and peak resident memory, from the start of the process.
type NexmarkUsage struct {
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// NexmarkResult is one query's measurement.
type NexmarkResult struct {
	Query              string  `json:"query"`
	Events             int64   `json:"events"`
	Bounded            bool    `json:"bounded"`
	Seconds            float64 `json:"seconds"`
	EventsPerSecond    float64 `json:"events_per_second"`
	CPUSeconds         float64 `json:"cpu_seconds"`
	EventsPerCPUSecond float64 `json:"events_per_cpu_second"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes,omitempty"`
	FlinkPerCore       float64 `json:"flink_1_13_events_per_core_second,omitempty"`
	Outputs            int     `json:"outputs"`
	Note               string  `json:"note"`
}

// RunNexmark writes the Nexmark events once, then runs each query over
// them from the start: Seconds is from the job's start (joining the group
// included) until its committed output is the oracle's, which a reader
// in this process follows record by record (nexmark.Tracker). After each
// run the whole output is read again and checked exactly
// (nexmark.Check): a run whose output is wrong is an error, not a number.
// A bounded job's time ends when it exits.
func RunNexmark(ctx context.Context, cfg NexmarkConfig, progress func(NexmarkResult)) ([]NexmarkResult, error) {
	queries := cfg.Queries
	if len(queries) == 0 {
		queries = nexmark.Queries
	}
	for _, q := range queries {
		if _, ok := examples.NexmarkQuery(q, examples.NexmarkTopics{}); !ok {
			return nil, fmt.Errorf("bench: no Nexmark query %q (have %v)", q, nexmark.Queries)
		}
	}
	if cfg.Start == nil || len(cfg.Brokers) == 0 || cfg.Events < 1 {
		return nil, errors.New("bench: nexmark needs brokers, a way to start jobs and at least one event")
	}
	events, err := nexmark.Generate(nexmark.Config{Seed: cfg.Seed, Rate: cfg.Rate, Events: cfg.Events})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	topics := nexmark.Topics{Person: "nexmark-person-" + run, Auction: "nexmark-auction-" + run, Bid: "nexmark-bid-" + run}
	for _, t := range []string{topics.Person, topics.Auction, topics.Bid} {
		if err := broker.CreateTopic(ctx, cfg.Brokers, t, cfg.Partitions, nil); err != nil {
			return nil, err
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return nil, err
	}
	err = nexmark.Write(ctx, cl, topics, events, 0, 0)
	cl.Close()
	if err != nil {
		return nil, fmt.Errorf("bench: preload: %w", err)
	}
	var out []NexmarkResult
	for _, q := range queries {
		res, err := runNexmarkQuery(ctx, cfg, events, examples.NexmarkTopics{Topics: topics, Output: "nexmark-" + q + "-" + run}, q)
		if err != nil {
			return out, fmt.Errorf("bench: nexmark %s: %w", q, err)
		}
		out = append(out, res)
		if progress != nil {
			progress(res)
		}
	}
	return out, nil
}

func runNexmarkQuery(ctx context.Context, cfg NexmarkConfig, events []nexmark.Event, tp examples.NexmarkTopics, q string) (NexmarkResult, error) {
	want, err := nexmark.Oracle(q, events)
	if err != nil {
		return NexmarkResult{}, err
	}
	if err := broker.CreateTopic(ctx, cfg.Brokers, tp.Output, cfg.Partitions, nil); err != nil {
		return NexmarkResult{}, err
	}
	// The follower: reads the output as it commits, until the tracker
	// says it is the oracle's.
	fctx, stopFollowing := context.WithCancel(ctx)
	defer stopFollowing()
	complete := make(chan struct{})
	var followErr error
	var wg sync.WaitGroup
	tail, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.ConsumeTopics(tp.Output),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return NexmarkResult{}, err
	}
	defer tail.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tr := nexmark.NewTracker(want)
		for fctx.Err() == nil {
			fs := tail.PollFetches(fctx)
			if err := fs.Err0(); err != nil && !errors.Is(err, context.Canceled) {
				followErr = err
				return
			}
			fs.EachRecord(func(r *kgo.Record) { tr.Add(nexmark.Record{Key: string(r.Key), Value: r.Value}) })
			if tr.Done() {
				close(complete)
				return
			}
		}
	}()

	job := NexmarkJob{Query: q, AppID: "bench-" + tp.Output, Topics: tp, Bounded: NexmarkBounded[q], Brokers: cfg.Brokers, CommitInterval: cfg.CommitInterval, LimitGoMemory: cfg.LimitGoMemory}
	if cfg.CPUProfile != "" {
		job.CPUProfile = cfg.CPUProfile + "-" + q + ".prof"
	}
	start := time.Now()
	stop, exited, err := cfg.Start(ctx, job)
	if err != nil {
		return NexmarkResult{}, err
	}
	limit := time.NewTimer(30 * time.Minute)
	defer limit.Stop()
	var runErr error
	select {
	case <-complete:
	case err := <-exited:
		// A bounded job ends once its output is committed: the check
		// below reads it all.
		if err != nil {
			runErr = fmt.Errorf("the job failed: %w", err)
		}
	case <-limit.C:
		runErr = errors.New("no complete output within 30 minutes")
	case <-ctx.Done():
		runErr = ctx.Err()
	}
	took := time.Since(start)
	usage, serr := stop()
	stopFollowing()
	wg.Wait()
	if runErr == nil {
		runErr = serr
	}
	if runErr == nil && followErr != nil {
		runErr = followErr
	}
	if runErr != nil {
		return NexmarkResult{}, runErr
	}
	// The verdict, after the timed window: the whole output, exactly.
	rs, err := readback.ReadCommitted(ctx, cfg.Brokers, tp.Output)
	if err != nil {
		return NexmarkResult{}, err
	}
	got := make([]nexmark.Record, len(rs))
	for i, r := range rs {
		got[i] = nexmark.Record{Key: string(r.Key), Value: r.Value}
	}
	if err := nexmark.Check(want, got); err != nil {
		return NexmarkResult{}, err
	}
	res := NexmarkResult{
		Query: q, Events: cfg.Events, Bounded: job.Bounded, Seconds: took.Seconds(),
		EventsPerSecond: float64(cfg.Events) / took.Seconds(), CPUSeconds: usage.CPUSeconds,
		PeakRSSBytes: usage.PeakRSSBytes, FlinkPerCore: NexmarkFlinkPerCore[q], Outputs: len(got),
		Note: fmt.Sprintf("output checked against the oracle: %d records", len(got)),
	}
	if usage.CPUSeconds > 0 {
		res.EventsPerCPUSecond = float64(cfg.Events) / usage.CPUSeconds
	}
	return res, nil
}

// RunNexmarkJob runs job in this process until ctx ends or, bounded, until
// its input's end, and returns what the process used: what the child
// process of `sluice bench --nexmark` does.
func RunNexmarkJob(ctx context.Context, job NexmarkJob) (NexmarkUsage, error) {
	tp, ok := examples.NexmarkQuery(job.Query, job.Topics)
	if !ok {
		return NexmarkUsage{}, fmt.Errorf("bench: no Nexmark query %q", job.Query)
	}
	dir, err := os.MkdirTemp("", "sluice-nexmark-")
	if err != nil {
		return NexmarkUsage{}, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	opts := []processor.Opt{processor.ApplicationID(job.AppID), processor.Brokers(job.Brokers...), processor.StateDir(dir)}
	if job.CommitInterval > 0 {
		opts = append(opts, processor.CommitInterval(job.CommitInterval))
	}
	if job.Bounded {
		opts = append(opts, processor.Bounded())
	}
	if job.LimitGoMemory {
		opts = append(opts, processor.LimitGoMemory(true))
	}
	app, err := processor.New(tp, opts...)
	if err != nil {
		return NexmarkUsage{}, err
	}
	if job.CPUProfile != "" {
		f, err := os.Create(job.CPUProfile)
		if err != nil {
			return NexmarkUsage{}, fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return NexmarkUsage{}, fmt.Errorf("bench: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	err = app.Run(ctx)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	return NexmarkUsage{CPUSeconds: cpuTime().Seconds(), PeakRSSBytes: memstat.PeakRSS()}, err
}
