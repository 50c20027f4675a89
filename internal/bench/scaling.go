package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/memstat"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
	"github.com/sluice-streams/sluice/window"
)

// How cost grows (`sluice bench --scaling`): throughput and peak RSS of the
// count and the windowed job as the input grows and as the key space
// grows, under a memory budget, and the restore of a large store from its
// changelog and from the local checkpoint an instance killed with SIGKILL
// left. Every point's job runs in a process of its own (ScalingConfig.Start),
// so the peak RSS is that job's alone; the broker runs in yet another.

// ScalingConfig is one `sluice bench --scaling` run.
type ScalingConfig struct {
	// Scenarios are the jobs of the record and key sweeps: "count",
	// "windowed". Default both.
	Scenarios []string `json:"scenarios"`
	// Records are the input sizes of the record sweep (keys: 100,000, as
	// in the other scenarios). Default 1,000,000.
	Records []int `json:"records"`
	// Keys are the key spaces of the key sweep, each over
	// max(KeyRecords, keys) records. Default 10,000 and 1,000,000.
	Keys       []int `json:"keys"`
	KeyRecords int   `json:"key_records"`
	// RestoreBytes is the size of the store the restore points build
	// (keys of 10 bytes, values of RestoreValueBytes); 0: no restore
	// points.
	RestoreBytes      int64 `json:"restore_bytes"`
	RestoreValueBytes int   `json:"restore_value_bytes"`

	Partitions     int32         `json:"partitions"`
	CommitInterval time.Duration `json:"commit_interval"`
	// MemoryBudget is every job's state.memory.budget; LimitGoMemory
	// its state.memory.go.limit.
	MemoryBudget  int64 `json:"memory_budget"`
	LimitGoMemory bool  `json:"limit_go_memory"`

	// StartBroker starts an empty broker for one point and returns its
	// addresses and how to stop it.
	StartBroker func(ctx context.Context, partitions int32) (addrs []string, stop func(), err error) `json:"-"`
	// Start runs one point's job to its end, in a process of its own
	// (`sluice bench --scaling-child`), and returns what it measured. A
	// ScalingKill point ends with the process killing itself: Start then
	// returns its error only if it ended otherwise.
	Start func(ctx context.Context, p ScalingPoint) (ScalingUsage, error) `json:"-"`
}

// Kinds of scaling points.
const (
	ScalingThroughput        = "throughput"         // process the preloaded input
	ScalingKill              = "load-then-sigkill"  // build the restore store, then SIGKILL itself
	ScalingRestoreCheckpoint = "restore-checkpoint" // restart on the killed instance's state
	ScalingRestoreChangelog  = "restore-changelog"  // start on an empty state directory
)

// ScalingPoint is one job run: what a child process is told.
type ScalingPoint struct {
	Kind     string `json:"kind"`
	Scenario string `json:"scenario"`
	// Axis is the sweep the point belongs to ("records" or "keys"; empty
	// for restore points).
	Axis           string        `json:"axis,omitempty"`
	Records        int           `json:"records"`
	Keys           int           `json:"keys"`
	Brokers        []string      `json:"brokers"`
	Partitions     int32         `json:"partitions"`
	CommitInterval time.Duration `json:"commit_interval"`
	MemoryBudget   int64         `json:"memory_budget"`
	LimitGoMemory  bool          `json:"limit_go_memory"`
	StateDir       string        `json:"state_dir"`
	AppID          string        `json:"app_id"`
	// Target is how many records the job must have processed in committed
	// transactions (throughput, kill) or restored (restore) to be done.
	Target int64 `json:"target"`
}

// ScalingUsage is what a point's process measured.
type ScalingUsage struct {
	Seconds      float64 `json:"seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	Restored     int64   `json:"restored"`
	Processed    int64   `json:"processed"`
	// PeakGoBytes is the most memory the Go runtime held (its heap,
	// stacks and metadata, mapped and not released: what the Go memory
	// limit counts), and PeakOutsideGoBytes the most of the RSS beside it
	// (Pebble's block cache and memtables under cgo, the binary, the C
	// libraries), both sampled every 50 ms while the job ran.
	PeakGoBytes        int64 `json:"peak_go_bytes"`
	PeakOutsideGoBytes int64 `json:"peak_outside_go_bytes"`
}

// ScalingResult is one point measured.
type ScalingResult struct {
	ScalingPoint
	ScalingUsage
	PerSecond float64 `json:"records_per_second"`
	// StoreBytes is the restore store's size (keys and values).
	StoreBytes int64  `json:"store_bytes,omitempty"`
	Note       string `json:"note,omitempty"`
}

// ScalingReport is the JSON `sluice bench --scaling` writes.
type ScalingReport struct {
	Config ScalingConfig   `json:"config"`
	Points []ScalingResult `json:"points"`
}

func (c *ScalingConfig) defaults() {
	if len(c.Scenarios) == 0 {
		c.Scenarios = []string{"count", "windowed"}
	}
	if c.Records == nil {
		c.Records = []int{1_000_000}
	}
	if c.Keys == nil {
		c.Keys = []int{10_000, 1_000_000}
	}
	if c.KeyRecords <= 0 {
		c.KeyRecords = 1_000_000
	}
	if c.RestoreValueBytes <= 0 {
		c.RestoreValueBytes = 1000
	}
	if c.Partitions <= 0 {
		c.Partitions = 8
	}
	if c.CommitInterval <= 0 {
		c.CommitInterval = 100 * time.Millisecond
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = processor.DefaultMemoryBudget
	}
}

// scalingKeys is the number of keys of the record sweep, keyed's.
const scalingKeys = 100_000

// RunScaling measures every point of cfg in turn, each on a fresh broker,
// and checks each throughput point's output exactly after its job ended.
func RunScaling(ctx context.Context, cfg ScalingConfig, progress func(ScalingResult)) (ScalingReport, error) {
	cfg.defaults()
	rep := ScalingReport{Config: cfg}
	add := func(r ScalingResult) {
		rep.Points = append(rep.Points, r)
		if progress != nil {
			progress(r)
		}
	}
	for _, sc := range cfg.Scenarios {
		if sc != "count" && sc != "windowed" {
			return rep, fmt.Errorf("bench: scaling: no scenario %q (have count, windowed)", sc)
		}
	}
	for _, sc := range cfg.Scenarios {
		for _, n := range cfg.Records {
			r, err := scalingThroughput(ctx, cfg, sc, "records", n, scalingKeys)
			if err != nil {
				return rep, err
			}
			add(r)
		}
		for _, k := range cfg.Keys {
			r, err := scalingThroughput(ctx, cfg, sc, "keys", max(cfg.KeyRecords, k), k)
			if err != nil {
				return rep, err
			}
			add(r)
		}
	}
	if cfg.RestoreBytes > 0 {
		rs, err := scalingRestore(ctx, cfg)
		if err != nil {
			return rep, err
		}
		for _, r := range rs {
			add(r)
		}
	}
	return rep, nil
}

// keyedN is keyed over a key space of k keys (8 bytes below 10^8).
func keyedN(n, k int, r *rand.Rand) []*kgo.Record {
	recs := make([]*kgo.Record, n)
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'a' + byte(i%26)
	}
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "%08d", r.IntN(k)), Value: val}
	}
	return recs
}

func scalingThroughput(ctx context.Context, cfg ScalingConfig, sc, axis string, n, keys int) (ScalingResult, error) {
	addrs, stop, err := scalingBroker(ctx, cfg)
	if err != nil {
		return ScalingResult{}, err
	}
	defer stop()
	recs := keyedN(n, keys, rand.New(rand.NewPCG(1, 2)))
	if sc == "windowed" {
		tr := rand.New(rand.NewPCG(3, 4))
		bound := windowBound.Milliseconds()
		for i, rec := range recs {
			rec.Timestamp = time.UnixMilli(windowBase + int64(i) - tr.Int64N(bound+1))
		}
	}
	if err := preload(ctx, addrs, recs); err != nil {
		return ScalingResult{}, err
	}
	dir, err := os.MkdirTemp("", "sluice-scaling-")
	if err != nil {
		return ScalingResult{}, err
	}
	defer os.RemoveAll(dir)
	p := ScalingPoint{Kind: ScalingThroughput, Scenario: sc, Axis: axis, Records: n, Keys: keys, Brokers: addrs,
		Partitions: cfg.Partitions, CommitInterval: cfg.CommitInterval, MemoryBudget: cfg.MemoryBudget,
		LimitGoMemory: cfg.LimitGoMemory, StateDir: dir, AppID: "scaling-" + sc, Target: int64(n)}
	u, err := cfg.Start(ctx, p)
	if err != nil {
		return ScalingResult{}, fmt.Errorf("bench: scaling %s %s %d: %w", sc, axis, n, err)
	}
	verify := verifyWindowed
	if sc == "count" {
		verify = verifyCounts("out", keyCounts, true)
	}
	note, err := verify(ctx, addrs, txn.ExactlyOnce, recs)
	if err != nil {
		return ScalingResult{}, fmt.Errorf("bench: scaling %s %s %d: verify: %w", sc, axis, n, err)
	}
	return ScalingResult{ScalingPoint: p, ScalingUsage: u, PerSecond: float64(n) / u.Seconds, Note: note}, nil
}

func scalingBroker(ctx context.Context, cfg ScalingConfig) ([]string, func(), error) {
	addrs, stop, err := cfg.StartBroker(ctx, cfg.Partitions)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range []string{"in", "out"} {
		if err := broker.CreateTopic(ctx, addrs, t, cfg.Partitions, nil); err != nil {
			stop()
			return nil, nil, err
		}
	}
	return addrs, stop, nil
}

// scalingRestore builds a store of about cfg.RestoreBytes (distinct keys,
// each with a value of cfg.RestoreValueBytes), in a process that kills
// itself with SIGKILL once all of it is committed; then restores it in a
// new process from the killed one's state directory (the local
// checkpoint: only the changelog's tail is read), and in another from an
// empty one (the whole changelog).
func scalingRestore(ctx context.Context, cfg ScalingConfig) ([]ScalingResult, error) {
	addrs, stop, err := scalingBroker(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop()
	per := int64(10 + cfg.RestoreValueBytes)
	keys := int(max(cfg.RestoreBytes/per, 1))
	val := make([]byte, cfg.RestoreValueBytes)
	for i := range val {
		val[i] = 'a' + byte(i%26)
	}
	recs := make([]*kgo.Record, keys)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "%010d", i), Value: val}
	}
	if err := preload(ctx, addrs, recs); err != nil {
		return nil, err
	}
	recs = nil
	dir, err := os.MkdirTemp("", "sluice-scaling-restore-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base := ScalingPoint{Scenario: "latest", Records: keys, Keys: keys, Brokers: addrs, Partitions: cfg.Partitions,
		CommitInterval: cfg.CommitInterval, MemoryBudget: cfg.MemoryBudget, LimitGoMemory: cfg.LimitGoMemory, AppID: "scaling-restore", Target: int64(keys)}
	var out []ScalingResult

	load := base
	load.Kind, load.StateDir = ScalingKill, filepath.Join(dir, "killed")
	u, err := cfg.Start(ctx, load)
	if err != nil {
		return nil, fmt.Errorf("bench: scaling: build the store: %w", err)
	}
	out = append(out, ScalingResult{ScalingPoint: load, ScalingUsage: u, PerSecond: float64(keys) / u.Seconds,
		StoreBytes: int64(keys) * per, Note: "builds the store, then SIGKILLs its own process"})

	for _, kind := range []string{ScalingRestoreCheckpoint, ScalingRestoreChangelog} {
		p := base
		p.Kind, p.StateDir = kind, load.StateDir
		if kind == ScalingRestoreChangelog {
			p.StateDir = filepath.Join(dir, "empty")
		}
		u, err := cfg.Start(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("bench: scaling %s: %w", kind, err)
		}
		r := ScalingResult{ScalingPoint: p, ScalingUsage: u, StoreBytes: int64(keys) * per}
		switch kind {
		case ScalingRestoreCheckpoint:
			// The checkpoint may trail the last commit by the batches
			// Pebble's unsynced WAL lost; never by the whole store.
			if u.Restored >= int64(keys) {
				return nil, fmt.Errorf("bench: scaling: restarting on the killed instance's state restored %d records of %d: the checkpoint was not used", u.Restored, keys)
			}
			r.Note = fmt.Sprintf("restart on the state a SIGKILL left: %d changelog records replayed past the checkpoint", u.Restored)
		default:
			if u.Restored < int64(keys) {
				return nil, fmt.Errorf("bench: scaling: restore from the changelog restored %d records, want at least %d", u.Restored, keys)
			}
			r.PerSecond = float64(u.Restored) / u.Seconds
			r.Note = fmt.Sprintf("%d changelog records into an empty state directory", u.Restored)
		}
		out = append(out, r)
	}
	return out, nil
}

// RunScalingPoint runs one point's job in this process, what a child
// process of `sluice bench --scaling` does, and writes its usage to w as
// JSON; a ScalingKill point then kills the process with SIGKILL.
func RunScalingPoint(ctx context.Context, p ScalingPoint, w io.Writer) error {
	u, err := runScalingPoint(ctx, p, func(u ScalingUsage) error { return json.NewEncoder(w).Encode(u) })
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(u)
}

// runScalingPoint runs p; for a ScalingKill point it hands killed the
// usage, then kills the process.
func runScalingPoint(ctx context.Context, p ScalingPoint, killed func(ScalingUsage) error) (ScalingUsage, error) {
	var t *topology.Topology
	opts := []processor.Opt{processor.ApplicationID(p.AppID), processor.Brokers(p.Brokers...),
		// Static membership: a restarted instance takes its killed
		// predecessor's place at once, instead of the group waiting out
		// its session, which would count as restore time.
		processor.InstanceID("scaling-0"),
		processor.Guarantee(txn.ExactlyOnce), processor.CommitInterval(p.CommitInterval),
		processor.StateDir(p.StateDir), processor.MemoryBudget(p.MemoryBudget), processor.LimitGoMemory(p.LimitGoMemory)}
	switch p.Scenario {
	case "count":
		t = topology.New()
		s := topology.From(t, "in", serde.String, serde.Bytes)
		c := topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.String, serde.Int64))
		topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
		opts = append(opts, processor.FoldUpdates(true))
	case "windowed":
		t = topology.New()
		s := topology.From(t, "in", serde.String, serde.Bytes, topology.Watermarks(window.BoundedOutOfOrderness(windowBound)))
		ws := topology.WindowedBy(topology.GroupByKey(s), window.Tumbling(windowSize), topology.EmitFinal())
		c := topology.CountWindows(ws, topology.Materialized("window-counts", serde.String, serde.Int64))
		topology.To(topology.ToStream(c), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
	case "latest":
		t = topology.New()
		s := topology.From(t, "in", serde.String, serde.Bytes)
		topology.Reduce(topology.GroupByKey(s), func(_, v []byte) []byte { return v },
			topology.Materialized("latest", serde.String, serde.Bytes))
	default:
		return ScalingUsage{}, fmt.Errorf("bench: scaling: no scenario %q", p.Scenario)
	}
	app, err := processor.New(t, opts...)
	if err != nil {
		return ScalingUsage{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	cpu0, start := cpuTime(), time.Now()
	stopSampling := sampleMemory(50 * time.Millisecond)
	defer stopSampling() // on the paths that return early
	go func() { done <- app.Run(rctx) }()
	finished := func() bool {
		switch p.Kind {
		case ScalingRestoreCheckpoint, ScalingRestoreChangelog:
			st := app.Status()
			if !st.Ready || len(st.Tasks) < int(p.Partitions) {
				return false
			}
			for _, ts := range st.Tasks {
				if ts.State != processor.TaskRunning {
					return false
				}
			}
			return true
		}
		return app.Stats().Processed.Load() >= p.Target
	}
	deadline := time.Now().Add(60 * time.Minute)
	for !finished() {
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("the job stopped")
			}
			return ScalingUsage{}, err
		case <-ctx.Done():
			return ScalingUsage{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return ScalingUsage{}, fmt.Errorf("bench: scaling: %s not done within an hour", p.Kind)
		}
	}
	mem := stopSampling()
	u := ScalingUsage{Seconds: time.Since(start).Seconds(), CPUSeconds: (cpuTime() - cpu0).Seconds(),
		Restored: app.Stats().Restored.Load(), Processed: app.Stats().Processed.Load(), PeakRSSBytes: memstat.PeakRSS(),
		PeakGoBytes: mem.goBytes, PeakOutsideGoBytes: mem.outsideGo}
	if prefix := os.Getenv("SLUICE_SCALING_HEAPPROFILE"); prefix != "" {
		// Where the Go memory is, at the end of the point with the job
		// still running (a diagnostic: not set by the bench).
		if f, err := os.Create(fmt.Sprintf("%s-%s-%s-%d-%d.prof", prefix, p.Kind, p.Scenario, p.Records, p.Keys)); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
	if p.Kind == ScalingKill {
		if err := killed(u); err != nil {
			return u, err
		}
		// No shutdown, no flush, no leaving the group: what a crash
		// leaves behind.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // not reached
	}
	cancel()
	if err := <-done; err != nil {
		return u, err
	}
	return u, nil
}

// formatCount writes n as 10k, 1M, 30M.
func formatCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}
