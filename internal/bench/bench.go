package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/memstat"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
)

// Config is one benchmark run.
type Config struct {
	Records        int
	Partitions     int32
	CommitInterval time.Duration
	Scenarios      []string // default: all
	// Rate and PacedFor make the paced run of the scenarios that have one:
	// Rate input records a second for PacedFor. PacedFor 0: no paced run.
	Rate     int
	PacedFor time.Duration
	// Runs is how often each scenario runs under each guarantee, in
	// rounds (Run); its result is the run of median throughput, and the
	// ratios are of medians (one run of the pipe alone varies by 1.5x and
	// more). Only the first round makes the paced runs. Default 1.
	Runs int
	// Isolate, if set, runs each scenario instead of Run doing it in this
	// process: `sluice bench` runs each in a child process (RunScenario),
	// so that each has a fresh heap and its own peak RSS. cfg is Run's,
	// with PacedFor 0 for the repeated runs.
	Isolate func(ctx context.Context, cfg Config, scenario string, g txn.Guarantee) (Result, error)
	// TimedCPUProfile, if set, makes every timed run write a CPU profile
	// of itself alone, without the warm-up, the preload, the verification
	// or the paced run, to a new file named
	// <TimedCPUProfile>-<scenario>-<guarantee>-*.prof (Result.CPUProfiles):
	// where the time goes in what the table measures.
	TimedCPUProfile string
	// DBURLs, by kind (DBPostgres, DBMariaDB), are database servers for
	// DBScenarios (billingdb.go); a kind without one has no scenarios.
	DBURLs map[string]string
	// RoundRobinFetch turns fetch sessions off for the pipe and every
	// sluice job of the scenarios, so that the embedded broker serves the
	// partitions in turn, as Kafka's brokers do; with them and the
	// bench's large input batches it serves one partition until it is
	// drained (DESIGN.md, beside
	// max.partition.fetch.bytes), which lets count and windowed combine
	// many records of a key or window in one transaction. franz-go's
	// option reaches the jobs through processor.ClientOptions.
	RoundRobinFetch bool
	// StartBroker, if set, starts each scenario's broker (empty, with
	// cfg.Partitions a topic) and returns its addresses and how to stop
	// it: `sluice bench --broker-process` starts it in a process of its
	// own, so that the job's process holds none of the broker's logs and
	// its CPU time is the job's alone. Unset: an embedded broker in this
	// process.
	StartBroker func(ctx context.Context, partitions int32) (addrs []string, stop func(), err error)
}

// Result is one scenario's measurement.
type Result struct {
	Scenario        string  `json:"scenario"`
	Guarantee       string  `json:"guarantee"`
	Records         int     `json:"records"`
	Seconds         float64 `json:"seconds"`
	PerSecond       float64 `json:"records_per_second"`
	SteadyPerSecond float64 `json:"steady_records_per_second"`
	// PerSecond is input records over Seconds, the whole run from start
	// (joining the group included) to the last record committed.
	// SteadyPerSecond leaves out the start: input records from the first
	// commit to the last over that time (0 when one commit held all). It
	// is noisy when the run is only a few commits long.
	// VsPipe is PerSecond over the exactly_once pipe's of the same run.
	VsPipe float64 `json:"vs_pipe"`
	// VsBilling, for a database scenario, is PerSecond over billing's
	// without a database (exactly_once) of the same run.
	VsBilling float64 `json:"vs_billing,omitempty"`
	// RunsPerSecond lists PerSecond of every run, in run order, when the
	// scenario ran more than once; PerSecond is their median.
	RunsPerSecond []float64 `json:"runs_records_per_second,omitempty"`
	// RunsVsPipe lists, with RunsPerSecond, every run's PerSecond over
	// that of the exactly_once pipe's run in the same round (see Run):
	// how far the ratio moves from round to round.
	RunsVsPipe []float64 `json:"runs_vs_pipe,omitempty"`
	Note       string    `json:"note,omitempty"`
	// CPUProfiles names the profiles of the timed runs, in run order,
	// with Config.TimedCPUProfile.
	CPUProfiles []string `json:"cpu_profiles,omitempty"`
	// CPUMicrosPerRecord is the CPU time (user and system) the whole
	// process spent in the timed run, the in-process broker included
	// unless BrokerProcess, per input record: steadier than the rate when
	// the machine is shared, and the measure of cost when, as here, the
	// run keeps most of every core busy.
	CPUMicrosPerRecord float64 `json:"cpu_us_per_record"`
	// FaultsPerRecord is the minor page faults the process took in the
	// timed run, per input record.
	FaultsPerRecord float64 `json:"faults_per_record"`
	// ProducedPerRecord is the records the job wrote to Kafka in the
	// timed run (outputs, changelog, repartition and dead-letter records)
	// per input record: the pipe's is 1. It is the part of a job's cost
	// that grows with what it must keep and say, whatever its code.
	ProducedPerRecord float64 `json:"produced_per_record"`
	// LoopShares is, for a sluice job, the share of the timed run's wall
	// time its instance loop spent in each phase (processor.LoopPhases:
	// poll, process, flush, end, apply). What they leave is the start:
	// the group joined, the stores opened. With several runs, the median
	// run's, as for the other figures. The pipe has none.
	LoopShares map[string]float64 `json:"loop_shares,omitempty"`
	// RoundRobinFetch says the run was made with Config.RoundRobinFetch.
	RoundRobinFetch bool `json:"round_robin_fetch,omitempty"`
	// BrokerProcess says the broker ran outside the job's process
	// (Config.StartBroker): CPUMicrosPerRecord and PeakRSSBytes are then
	// the job's alone.
	BrokerProcess bool `json:"broker_process,omitempty"`
	// PeakRSSBytes is the process's peak resident memory (VmHWM), the
	// in-process broker included unless BrokerProcess; set only when the
	// scenario ran in a process of its own.
	PeakRSSBytes int64 `json:"peak_rss_bytes,omitempty"`
	// The paced run's end-to-end latency at PacedRate input records a
	// second, in milliseconds: from when an input record was due to be
	// produced to when its output was visible to a read_committed
	// consumer. Zero when the scenario has no paced run.
	PacedRate    float64 `json:"paced_rate,omitempty"`
	PacedRecords int     `json:"paced_records,omitempty"`
	LatencyP50ms float64 `json:"latency_p50_ms,omitempty"`
	LatencyP99ms float64 `json:"latency_p99_ms,omitempty"`
	LatencyMaxms float64 `json:"latency_max_ms,omitempty"`
}

// Scenarios lists the scenario names in run order.
var Scenarios = []string{"pipe", "stateless", "count", "windowed", "wordcount", "billing", "restore", "stream-join", "stream-join-memory", "table-join"}

// job is a scenario's job, running.
type job struct {
	stop func() error
	// committed reports how many records the job processed in committed
	// transactions; produced, how many it wrote to Kafka (outputs,
	// changelog, repartition and dead-letter records, committed or not).
	committed, produced func() int64
	// loop, for a sluice job, reports its instance loop's time by phase
	// (processor.Stats.LoopTime).
	loop func() map[string]time.Duration
}

type scenario struct {
	name string
	// input makes the records and says how many records the job processes
	// for them in all (the input plus what passes through repartition
	// topics).
	input func(n int, r *rand.Rand) (recs []*kgo.Record, processed int64)
	note  string
	// run starts the job over the preloaded input in e; onExit is called
	// if the job stops by itself (with its error).
	run func(ctx context.Context, e jobEnv, onExit func(error)) (job, error)
	// prepare, if set, runs before the timed run (in e.dir), after the
	// input is preloaded, or before it with prepareFirst.
	prepare      func(ctx context.Context, e jobEnv, target int64) error
	prepareFirst bool
	// verify, if set, checks the output after the timed run has stopped,
	// given the preloaded input (with the partitions and offsets it got);
	// what it returns is added to the note.
	verify func(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error)
	// covers, if set, gives the scenario a paced run (see paced.go).
	covers covers
	// exactlyOnceOnly: no at_least_once run (two-phase sinks need
	// exactly_once).
	exactlyOnceOnly bool
}

// Run runs the chosen scenarios under exactly_once and at_least_once.
//
// With cfg.Runs > 1 the runs go in rounds: each round runs every chosen
// scenario once under each guarantee, the pipe first, so that a scenario's
// runs and the pipe's are spread alike over the invocation and a machine
// that turns slower or faster during it moves both, not the ratio.
// progress hears of every run as it ends.
func Run(ctx context.Context, cfg Config, progress func(Result)) ([]Result, error) {
	want := map[string]bool{}
	for _, s := range cfg.Scenarios {
		if _, ok := scenarioIn(cfg, s); !ok {
			return nil, fmt.Errorf("bench: no scenario %q (have %v)", s, Scenarios)
		}
		want[s] = true
	}
	one := cfg.Isolate
	if one == nil {
		if err := warmUp(ctx, cfg); err != nil {
			return nil, err
		}
		one = func(ctx context.Context, cfg Config, name string, g txn.Guarantee) (Result, error) {
			sc, _ := scenarioIn(cfg, name)
			return measure(ctx, cfg, sc, g)
		}
	}
	type cell struct {
		sc   scenario
		g    txn.Guarantee
		runs []Result
	}
	var cells []*cell
	for _, sc := range append(scenarioList(), dbScenarios(cfg)...) {
		if len(want) > 0 && !want[sc.name] && sc.name != "pipe" && (sc.name != "billing" || len(cfg.DBURLs) == 0) {
			continue
		}
		for _, g := range []txn.Guarantee{txn.ExactlyOnce, txn.AtLeastOnce} {
			if !sc.exactlyOnceOnly || g == txn.ExactlyOnce {
				cells = append(cells, &cell{sc: sc, g: g})
			}
		}
	}
	for i := range max(cfg.Runs, 1) {
		c := cfg
		if i > 0 {
			c.PacedFor = 0 // only the first run makes the paced run
		}
		for _, cl := range cells {
			res, err := one(ctx, c, cl.sc.name, cl.g)
			if err != nil {
				return nil, fmt.Errorf("bench: %s %s: %w", cl.sc.name, cl.g, err)
			}
			cl.runs = append(cl.runs, res)
			if progress != nil {
				progress(res)
			}
		}
	}
	var out []Result
	var pipe, billing *cell
	for _, cl := range cells {
		res := median(cl.runs)
		switch {
		case cl.sc.name == "pipe" && cl.g == txn.ExactlyOnce:
			pipe = cl
		case cl.sc.name == "billing" && cl.g == txn.ExactlyOnce:
			billing = cl
		}
		if pipe != nil {
			pr := median(pipe.runs).PerSecond
			res.VsPipe = res.PerSecond / pr
			if len(cl.runs) > 1 {
				for i, r := range cl.runs {
					res.RunsVsPipe = append(res.RunsVsPipe, r.PerSecond/pipe.runs[i].PerSecond)
				}
			}
		}
		if cl.sc.exactlyOnceOnly && billing != nil {
			res.VsBilling = res.PerSecond / median(billing.runs).PerSecond
			res.Note += fmt.Sprintf("; %.2f of billing without a database (exactly_once, this run)", res.VsBilling)
		}
		out = append(out, res)
	}
	return out, nil
}

// median returns the run of median throughput of a scenario's runs, with
// the paced latency of the first run.
func median(runs []Result) Result {
	if len(runs) == 1 {
		return runs[0]
	}
	rates := make([]float64, len(runs))
	for i, r := range runs {
		rates[i] = r.PerSecond
	}
	byRate := slices.Clone(runs)
	slices.SortFunc(byRate, func(a, b Result) int { return cmp.Compare(a.PerSecond, b.PerSecond) })
	res := byRate[len(byRate)/2]
	res.PacedRate, res.PacedRecords = runs[0].PacedRate, runs[0].PacedRecords
	res.LatencyP50ms, res.LatencyP99ms, res.LatencyMaxms = runs[0].LatencyP50ms, runs[0].LatencyP99ms, runs[0].LatencyMaxms
	res.CPUProfiles = nil
	for _, r := range runs {
		res.PeakRSSBytes = max(res.PeakRSSBytes, r.PeakRSSBytes)
		res.CPUProfiles = append(res.CPUProfiles, r.CPUProfiles...)
	}
	res.RunsPerSecond = rates
	return res
}

// warmUp runs a discarded pipe first: the first run in a process pays for
// heap growth and page faults that would otherwise count against it.
func warmUp(ctx context.Context, cfg Config) error {
	warm := cfg
	warm.Records = max(cfg.Records/10, 1000)
	warm.TimedCPUProfile = ""
	if _, err := runOne(ctx, warm, scenarioList()[0], txn.ExactlyOnce); err != nil {
		return fmt.Errorf("bench: warm-up: %w", err)
	}
	return nil
}

func scenarioNamed(name string) (scenario, bool) { return scenarioIn(Config{}, name) }

// scenarioIn finds a scenario among those cfg has, its database ones
// included.
func scenarioIn(cfg Config, name string) (scenario, bool) {
	for _, sc := range append(scenarioList(), dbScenarios(cfg)...) {
		if sc.name == name {
			return sc, true
		}
	}
	return scenario{}, false
}

// RunScenario runs one scenario after a warm-up and reports the process's
// peak RSS: what a child process of `sluice bench` does.
func RunScenario(ctx context.Context, cfg Config, name string, g txn.Guarantee) (Result, error) {
	sc, ok := scenarioIn(cfg, name)
	if !ok {
		return Result{}, fmt.Errorf("bench: no scenario %q (have %v)", name, Scenarios)
	}
	if err := warmUp(ctx, cfg); err != nil {
		return Result{}, err
	}
	res, err := measure(ctx, cfg, sc, g)
	if err != nil {
		return res, err
	}
	res.PeakRSSBytes = memstat.PeakRSS()
	return res, nil
}

// measure runs a scenario's throughput run, then its paced run if it has
// one, each from a fresh start.
func measure(ctx context.Context, cfg Config, sc scenario, g txn.Guarantee) (Result, error) {
	res, err := runOne(ctx, cfg, sc, g)
	if err != nil || sc.covers == nil || cfg.PacedFor <= 0 {
		return res, err
	}
	lat, err := runPaced(ctx, cfg, sc, g)
	if err != nil {
		return res, fmt.Errorf("paced: %w", err)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	res.PacedRate, res.PacedRecords = lat.Rate, lat.Records
	res.LatencyP50ms, res.LatencyP99ms, res.LatencyMaxms = ms(lat.P50), ms(lat.P99), ms(lat.Max)
	return res, nil
}

// usage is the process's resource usage; all zero where it cannot be read.
func usage() syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return syscall.Rusage{}
	}
	return ru
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	ru := usage()
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// minorFaults is the count of minor page faults the process has taken:
// first touches of memory, each of which costs far more than the write
// that takes it on some virtual machines (11 µs on this project's).
func minorFaults() int64 { return usage().Minflt }

func runOne(ctx context.Context, cfg Config, sc scenario, g txn.Guarantee) (Result, error) {
	addrs, stopBroker, err := startBroker(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer stopBroker()
	recs, target := sc.input(cfg.Records, rand.New(rand.NewPCG(1, 2)))
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	env := cfg.env(addrs, g, dir)
	prepare := func() error {
		if sc.prepare == nil {
			return nil
		}
		if err := sc.prepare(ctx, env, target); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		return nil
	}
	if sc.prepareFirst {
		if err := prepare(); err != nil {
			return Result{}, err
		}
	}
	if err := preload(ctx, addrs, recs); err != nil {
		return Result{}, err
	}
	if !sc.prepareFirst {
		if err := prepare(); err != nil {
			return Result{}, err
		}
	}
	profile, stopProfile, err := startTimedProfile(cfg.TimedCPUProfile, sc.name, g)
	if err != nil {
		return Result{}, err
	}
	defer stopProfile()
	cpu0, faults0 := cpuTime(), minorFaults()
	start := time.Now()
	wctx, stopWaiting := context.WithCancelCause(ctx)
	defer stopWaiting(nil)
	j, err := sc.run(ctx, env, func(err error) {
		stopWaiting(fmt.Errorf("bench: the job stopped: %v", err))
	})
	if err != nil {
		return Result{}, err
	}
	steady, werr := waitCommitted(wctx, j.committed, target)
	if werr != nil && context.Cause(wctx) != nil {
		werr = context.Cause(wctx)
	}
	took, cpu, faults := time.Since(start), cpuTime()-cpu0, minorFaults()-faults0
	stopProfile()
	produced := j.produced()
	var shares map[string]float64
	if j.loop != nil {
		shares = map[string]float64{}
		for phase, d := range j.loop() {
			shares[phase] = d.Seconds() / took.Seconds()
		}
	}
	if serr := j.stop(); werr == nil {
		werr = serr
	}
	if werr != nil {
		return Result{}, werr
	}
	note := sc.note
	if sc.verify != nil {
		v, err := sc.verify(ctx, addrs, g, recs)
		if err != nil {
			return Result{}, fmt.Errorf("verify: %w", err)
		}
		note += "; " + v
	}
	return Result{
		Scenario: sc.name, Guarantee: g.String(), Records: len(recs),
		Seconds: took.Seconds(), PerSecond: float64(len(recs)) / took.Seconds(),
		SteadyPerSecond: steady * float64(len(recs)) / float64(target), Note: note,
		CPUMicrosPerRecord: float64(cpu.Microseconds()) / float64(len(recs)),
		ProducedPerRecord:  float64(produced) / float64(len(recs)),
		FaultsPerRecord:    float64(faults) / float64(len(recs)),
		LoopShares:         shares,
		CPUProfiles:        profile,
		RoundRobinFetch:    cfg.RoundRobinFetch,
		BrokerProcess:      cfg.StartBroker != nil,
	}, nil
}

// startTimedProfile starts a CPU profile of one timed run into a new file
// named after prefix (see Config.TimedCPUProfile); with no prefix it does
// nothing. stop may be called more than once.
func startTimedProfile(prefix, scenario string, g txn.Guarantee) (files []string, stop func(), err error) {
	if prefix == "" {
		return nil, func() {}, nil
	}
	f, err := os.CreateTemp(filepath.Dir(prefix), filepath.Base(prefix)+"-"+scenario+"-"+g.String()+"-*.prof")
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	stopped := false
	return []string{f.Name()}, func() {
		if !stopped {
			stopped = true
			pprof.StopCPUProfile()
			f.Close()
		}
	}, nil
}

// startBroker starts a broker with the topics every scenario uses, by
// cfg.StartBroker or embedded in this process; the caller calls stop.
func startBroker(ctx context.Context, cfg Config) (addrs []string, stop func(), err error) {
	if cfg.StartBroker == nil {
		b, err := freshBroker(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		return b.Addrs(), b.Close, nil
	}
	if addrs, stop, err = cfg.StartBroker(ctx, cfg.Partitions); err != nil {
		return nil, nil, err
	}
	if err := createTopics(ctx, cfg, addrs); err != nil {
		stop()
		return nil, nil, err
	}
	return addrs, stop, nil
}

// freshBroker starts an embedded broker with the topics every scenario
// uses; the caller closes it.
func freshBroker(ctx context.Context, cfg Config) (*broker.Broker, error) {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: int(cfg.Partitions)})
	if err != nil {
		return nil, err
	}
	if err := createTopics(ctx, cfg, b.Addrs()); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func createTopics(ctx context.Context, cfg Config, addrs []string) error {
	for _, t := range []string{"in", "in2", "table", "out", "out2", "dlq"} {
		if err := broker.CreateTopic(ctx, addrs, t, cfg.Partitions, nil); err != nil {
			return err
		}
	}
	return nil
}

func preload(ctx context.Context, addrs []string, recs []*kgo.Record) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	var perr error
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && perr == nil {
				perr = err
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return perr
}

// waitCommitted waits until the job has processed target records in
// committed transactions, and returns the steady rate: the records
// committed after the first commit over the time since it, so that joining
// the group and opening tasks do not count. (Committed group offsets cannot
// tell when the job is done: a transactional topic ends with a commit marker
// that no consumer commits past.)
func waitCommitted(ctx context.Context, committed func() int64, target int64) (perSecond float64, err error) {
	deadline := time.Now().Add(30 * time.Minute)
	var first int64
	var t0 time.Time
	for {
		n := committed()
		if n > 0 && first == 0 {
			first, t0 = n, time.Now()
		}
		if n >= target {
			break
		}
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bench: %d of %d records committed at the deadline", n, target)
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(t0).Seconds()
	if first >= target || el <= 0 {
		return 0, nil // everything in one commit: no steady rate to measure
	}
	return float64(target-first) / el, nil
}

func keyed(n int, r *rand.Rand) ([]*kgo.Record, int64) {
	recs := make([]*kgo.Record, n)
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'a' + byte(i%26)
	}
	for i := range recs {
		k := make([]byte, 8)
		copy(k, fmt.Sprintf("%08d", r.IntN(100_000)))
		recs[i] = &kgo.Record{Topic: "in", Key: k, Value: val}
	}
	return recs, int64(n)
}

func scenarioList() []scenario {
	return []scenario{
		{name: "pipe", input: keyed, note: "raw franz-go consume→produce loop", run: runPipe, covers: oneEach,
			verify: verifyOnePerInput(func(v []byte) []byte { return v })},
		{name: "stateless", input: keyed, note: "map+filter", run: runTopology(func() *topology.Topology {
			t := topology.New()
			s := topology.From(t, "in", serde.Bytes, serde.Bytes)
			s = topology.MapValues(s, func(v []byte) []byte { return v[:len(v)-1] })
			s = topology.Filter(s, func(k, _ []byte) bool { return len(k) > 0 })
			topology.To(s, "out", serde.Bytes, serde.Bytes)
			return t
		}), covers: oneEach, verify: verifyOnePerInput(func(v []byte) []byte { return v[:len(v)-1] })},
		{name: "count", input: keyed, note: "count per key, Pebble store with changelog, updates folded per commit under exactly_once", run: foldingUnderEOS(func() *topology.Topology {
			t := topology.New()
			s := topology.From(t, "in", serde.String, serde.Bytes)
			c := topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.String, serde.Int64))
			topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
			return t
		}), covers: runningCount, verify: verifyCounts("out", keyCounts, true)},
		{name: "windowed", input: timedKeyed, note: "count per key in 1-minute tumbling windows, watermark 5 s behind, EmitFinal, Pebble window store",
			run: runTopology(windowedTopology), verify: verifyWindowed},
		{name: "wordcount", input: lines, note: "input lines of ~4.5 words, through a repartition topic, updates folded per commit under exactly_once", run: foldingUnderEOS(func() *topology.Topology {
			return examples.WordCount("in", "out", "dlq")
		}), verify: verifyCounts("out", wordCounts, true)},
		{name: "restore", input: unique, note: "a fresh instance restoring a count store of one changelog record per input record into Pebble",
			prepare: prepareRestore, run: runRestore},
		{name: "billing", input: bills, note: "JSON bills, half re-keyed through a repartition topic, 2 stores", run: runTopology(func() *topology.Topology {
			return examples.Billing("in", "out", "out2", "dlq")
		}, billingOptions()...), verify: verifyBilling},
		{name: "stream-join", input: joinInput, note: "inner stream–stream join of two topics (in, in2: half the input each, both counted) in a 1-minute window, Pebble window stores",
			run: runTopology(streamJoinTopology), verify: verifyStreamJoin},
		{name: "stream-join-memory", input: joinInput, note: "stream-join with the window's records in memory (topology.InMemory), restored from the changelogs whenever a task opens",
			run: runTopology(streamJoinMemoryTopology), verify: verifyStreamJoin},
		{name: "table-join", input: keyed, note: "stream enriched from a table of 100,000 keys (loaded into Pebble before the timed run)",
			prepare: prepareTableJoin, prepareFirst: true, run: runTableJoin, verify: verifyTableJoin},
	}
}

func lines(n int, r *rand.Rand) ([]*kgo.Record, int64) {
	words := []string{"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "cat"}
	recs := make([]*kgo.Record, n)
	processed := int64(n)
	for i := range recs {
		var line []byte
		for j := range 1 + r.IntN(8) {
			if j > 0 {
				line = append(line, ' ')
			}
			line = append(line, words[r.IntN(len(words))]...)
			line = strconv.AppendInt(line, int64(r.IntN(1000)), 10)
			processed++ // each word passes the repartition topic, or is combined (settled)
		}
		recs[i] = &kgo.Record{Topic: "in", Value: line}
	}
	return recs, processed
}

func bills(n int, r *rand.Rand) ([]*kgo.Record, int64) {
	recs := make([]*kgo.Record, n)
	processed := int64(n)
	for i := range recs {
		b := examples.Bill{BillID: "b" + strconv.Itoa(i), Account: "acct-" + strconv.Itoa(r.IntN(10_000)), AmountCents: 1 + int64(r.IntN(100_000)), TS: int64(i)}
		v, _ := json.Marshal(b)
		var key []byte
		if i%2 == 0 {
			key = []byte(b.Account)
		} else {
			processed++ // re-keyed through the repartition topic
		}
		recs[i] = &kgo.Record{Topic: "in", Key: key, Value: v}
	}
	return recs, processed
}

func runTopology(build func() *topology.Topology, opts ...processor.Opt) func(context.Context, jobEnv, func(error)) (job, error) {
	return func(ctx context.Context, e jobEnv, onExit func(error)) (job, error) {
		group := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		stop, app, err := start(ctx, build(), onExit, append(opts, e.opts(group)...)...)
		if err != nil {
			return job{}, err
		}
		return job{stop, settled(app), app.Stats().Produced.Load, app.Stats().LoopTime}, nil
	}
}

// settled is job.committed for app: the records it processed in committed
// transactions, and those a count's combining sink kept from its
// repartition topic (processor.Stats.Combined), which it would have
// processed without combining.
func settled(app *processor.App) func() int64 {
	st := app.Stats()
	return func() int64 { return st.Processed.Load() + st.Combined.Load() }
}

// foldingUnderEOS is runTopology with processor.FoldUpdates under
// exactly_once, where a reader sees no update before the commit anyway, and
// every update forwarded under at_least_once, where it sees them at once.
func foldingUnderEOS(build func() *topology.Topology) func(context.Context, jobEnv, func(error)) (job, error) {
	return func(ctx context.Context, e jobEnv, onExit func(error)) (job, error) {
		return runTopology(build, processor.FoldUpdates(e.g == txn.ExactlyOnce))(ctx, e, onExit)
	}
}

// jobEnv is where a scenario's job runs: the broker, the guarantee and
// commit interval, the state directory, and client options for the pipe
// and every sluice job (Config.RoundRobinFetch).
type jobEnv struct {
	addrs    []string
	g        txn.Guarantee
	interval time.Duration
	dir      string
	client   []kgo.Opt
}

func (c Config) env(addrs []string, g txn.Guarantee, dir string) jobEnv {
	e := jobEnv{addrs: addrs, g: g, interval: c.CommitInterval, dir: dir}
	if c.RoundRobinFetch {
		e.client = []kgo.Opt{kgo.DisableFetchSessions()}
	}
	return e
}

// opts are a sluice job's options in e, as application appID.
func (e jobEnv) opts(appID string) []processor.Opt {
	return []processor.Opt{processor.ApplicationID(appID), processor.Brokers(e.addrs...), processor.ClientOptions(e.client...),
		processor.Guarantee(e.g), processor.CommitInterval(e.interval), processor.StateDir(e.dir)}
}

// start runs an app until stop; onExit hears of it stopping by itself.
func start(ctx context.Context, t *topology.Topology, onExit func(error), opts ...processor.Opt) (func() error, *processor.App, error) {
	app, err := processor.New(t, opts...)
	if err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		err := app.Run(rctx)
		if rctx.Err() == nil {
			onExit(err)
		}
		done <- err
	}()
	return func() error { cancel(); return <-done }, app, nil
}

// runPipe is the limit: consume, produce each record unchanged, commit every
// interval — in a transaction under exactly_once.
func runPipe(ctx context.Context, e jobEnv, onExit func(error)) (job, error) {
	g, interval := e.g, e.interval
	group := "pipe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// The client's settings are sluice's where they are not sluice's work:
	// no linger, max.partition.fetch.bytes's default (with franz-go's
	// 1 MiB the pipe ran 1.4 to 1.8 times slower here: PERFORMANCE.md,
	// session 30) and the fetch's wait.
	sess, err := txn.NewSession(g, group+"-txn", append([]kgo.Opt{
		kgo.SeedBrokers(e.addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("in"),
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1 << 20),
		kgo.FetchMaxPartitionBytes(processor.DefaultMaxPartitionFetchBytes), kgo.FetchMaxWait(processor.DefaultFetchMaxWait)}, e.client...)...)
	if err != nil {
		return job{}, err
	}
	if g == txn.ExactlyOnce {
		// As sluice does: initialise the producer before the group
		// hands out partitions, not on the first record.
		if _, _, err := sess.Client().ProducerID(ctx); err != nil {
			sess.Close()
			return job{}, err
		}
	}
	var committed, produced atomic.Int64
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		defer sess.Close()
		for rctx.Err() == nil {
			if err := sess.Begin(); err != nil {
				onExit(err)
				done <- err
				return
			}
			start := time.Now()
			var n int64
			// A period without records does not end the transaction,
			// as sluice does not: franz-go holds the End after an empty
			// one back for 500ms (see processor's instance.end).
			for (time.Since(start) < interval || n == 0) && rctx.Err() == nil {
				pctx, pcancel := context.WithDeadline(rctx, time.Now().Add(max(interval-time.Since(start), time.Millisecond)))
				fs := sess.PollRecords(pctx, 0)
				pcancel()
				fs.EachRecord(func(r *kgo.Record) {
					n++
					produced.Add(1)
					sess.Produce(rctx, &kgo.Record{Topic: "out", Key: r.Key, Value: r.Value}, nil)
				})
			}
			ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
			ok, err := sess.End(ectx, rctx.Err() == nil)
			ecancel()
			if err != nil {
				onExit(err)
				done <- err
				return
			}
			if ok {
				committed.Add(n)
			}
		}
		done <- nil
	}()
	return job{func() error { cancel(); return <-done }, committed.Load, produced.Load, nil}, nil
}

// unique makes n records with distinct keys, so that a count over them
// leaves n changelog records.
func unique(n int, _ *rand.Rand) ([]*kgo.Record, int64) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("%010d", i)), Value: []byte("v")}
	}
	return recs, int64(n)
}

const restoreApp = "bench-restore"

func countTopology() *topology.Topology {
	t := topology.New()
	s := topology.From(t, "in", serde.String, serde.Bytes)
	topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.String, serde.Int64))
	return t
}

// prepareRestore counts the input, leaving one changelog record per key.
func prepareRestore(ctx context.Context, e jobEnv, target int64) error {
	e.dir += "/first"
	app, err := processor.New(countTopology(), e.opts(restoreApp)...)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(rctx) }()
	_, werr := waitCommitted(ctx, app.Stats().Processed.Load, target)
	cancel()
	if err := <-done; werr == nil {
		werr = err
	}
	return werr
}

// runRestore starts an instance of the same application with empty state:
// it restores every changelog record.
func runRestore(ctx context.Context, e jobEnv, onExit func(error)) (job, error) {
	e.dir += "/second"
	stop, app, err := start(ctx, countTopology(), onExit, e.opts(restoreApp)...)
	if err != nil {
		return job{}, err
	}
	return job{stop, app.Stats().Restored.Load, app.Stats().Produced.Load, app.Stats().LoopTime}, nil
}

func billingOptions() []processor.Opt {
	e, _ := examples.Get("billing")
	return e.Options(e.Defaults(map[string]string{"input": "in", "accepted": "out", "totals": "out2", "dlq": "dlq"}))
}
