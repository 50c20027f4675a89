package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/txn"
)

// TestTimedCPUProfile: a scenario run with Config.TimedCPUProfile leaves one
// CPU profile, of its timed run: none of the warm-up before it.
func TestTimedCPUProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job on an embedded broker")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{Records: 5000, Partitions: 2, CommitInterval: 20 * time.Millisecond, TimedCPUProfile: filepath.Join(dir, "cpu")}
	res, err := RunScenario(ctx, cfg, "stateless", txn.ExactlyOnce)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || len(res.CPUProfiles) != 1 || res.CPUProfiles[0] != files[0] {
		t.Fatalf("profiles %v, files %v: want the one of the timed run", res.CPUProfiles, files)
	}
	if !strings.HasPrefix(filepath.Base(files[0]), "cpu-stateless-exactly_once-") {
		t.Errorf("profile named %s", files[0])
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("%s is not a gzipped pprof profile (%d bytes)", files[0], len(b))
	}
}

// TestProducedPerRecord: the pipe and the stateless job write one record
// per input; the count writes an output and a changelog record per key and
// commit, so more than one per input (its keys rarely repeat in 5,000
// records) and at most two. A count of processed records in place of
// produced ones gives it 1, and fails.
func TestProducedPerRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs on an embedded broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{Records: 5000, Partitions: 2, CommitInterval: 20 * time.Millisecond}
	for _, c := range []struct {
		scenario string
		lo, hi   float64
	}{{"pipe", 1, 1}, {"stateless", 1, 1}, {"count", 1.01, 2}} {
		res, err := RunScenario(ctx, cfg, c.scenario, txn.ExactlyOnce)
		if err != nil {
			t.Fatal(err)
		}
		if res.ProducedPerRecord < c.lo || res.ProducedPerRecord > c.hi {
			t.Errorf("%s: %.3f records produced per input record, want %.2f to %.2f", c.scenario, res.ProducedPerRecord, c.lo, c.hi)
		}
		checkLoopShares(t, res)
	}
}

// checkLoopShares: a sluice job's result has its loop's share of the run in
// every phase, shares of one run that add up to at most all of it; the pipe,
// no sluice loop, has none.
func checkLoopShares(t *testing.T, res Result) {
	t.Helper()
	if res.Scenario == "pipe" {
		if res.LoopShares != nil {
			t.Errorf("pipe: loop shares %v", res.LoopShares)
		}
		return
	}
	sum := 0.0
	for _, p := range processor.LoopPhases {
		share, ok := res.LoopShares[p]
		if !ok || share < 0 {
			t.Errorf("%s: loop share of %s %v (%v)", res.Scenario, p, share, ok)
		}
		sum += share
	}
	// The processing of a run of records and its commits cannot be
	// nothing.
	if res.LoopShares[processor.PhaseProcess] == 0 || res.LoopShares[processor.PhaseEnd] == 0 || sum > 1 {
		t.Errorf("%s: loop shares %v add up to %.3f", res.Scenario, res.LoopShares, sum)
	}
}

// TestRunsGoInRounds: with Runs > 1, Run runs every scenario once per
// round, the pipe first, and only the first round makes the paced runs; a
// scenario's ratio is its median rate over the pipe's, and RunsVsPipe
// pairs each run with the pipe's of its round. The runner is Run's own
// hook for running a scenario elsewhere (Config.Isolate): it reports
// rates made up from the round, so that no job runs.
func TestRunsGoInRounds(t *testing.T) {
	type call struct {
		name  string
		g     txn.Guarantee
		paced bool
	}
	var calls []call
	rate := map[string]float64{"pipe": 1000, "count": 700}
	round := map[string]int{}
	cfg := Config{Runs: 3, Scenarios: []string{"count"}, PacedFor: time.Second,
		Isolate: func(_ context.Context, cfg Config, name string, g txn.Guarantee) (Result, error) {
			calls = append(calls, call{name, g, cfg.PacedFor > 0})
			key := name + g.String()
			round[key]++
			// The machine slows by half in the second round and speeds
			// up in the third: the pipe's rate moves with the count's.
			f := []float64{1, 0.5, 2}[round[key]-1]
			return Result{Scenario: name, Guarantee: g.String(), PerSecond: rate[name] * f}, nil
		}}
	res, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []call
	for i := range 3 {
		for _, n := range []string{"pipe", "count"} {
			for _, g := range []txn.Guarantee{txn.ExactlyOnce, txn.AtLeastOnce} {
				want = append(want, call{n, g, i == 0})
			}
		}
	}
	if len(calls) != len(want) {
		t.Fatalf("%d runs, want %d: %v", len(calls), len(want), calls)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("run %d: %v, want %v (all: %v)", i, calls[i], want[i], calls)
		}
	}
	if len(res) != 4 || res[2].Scenario != "count" || res[2].Guarantee != txn.ExactlyOnce.String() {
		t.Fatalf("results %+v", res)
	}
	c := res[2]
	if c.PerSecond != 700 || c.VsPipe != 0.7 {
		t.Errorf("count: %v records/s, %v of the pipe; want the medians, 700 and 0.7", c.PerSecond, c.VsPipe)
	}
	if fmt.Sprint(c.RunsPerSecond) != "[700 350 1400]" || fmt.Sprint(c.RunsVsPipe) != "[0.7 0.7 0.7]" {
		t.Errorf("count runs %v, of the pipe %v", c.RunsPerSecond, c.RunsVsPipe)
	}
}

// TestStartBroker: with Config.StartBroker, each scenario run (the warm-up
// and the timed run) gets a broker from it, runs and is verified on that
// broker, stops it, and says so in its result.
func TestStartBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job on an embedded broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var started, stopped int
	cfg := Config{Records: 2000, Partitions: 2, CommitInterval: 20 * time.Millisecond,
		StartBroker: func(ctx context.Context, partitions int32) ([]string, func(), error) {
			b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: int(partitions)})
			if err != nil {
				return nil, nil, err
			}
			started++
			return b.Addrs(), func() { stopped++; b.Close() }, nil
		}}
	res, err := RunScenario(ctx, cfg, "stateless", txn.ExactlyOnce)
	if err != nil {
		t.Fatal(err)
	}
	if started != 2 || stopped != 2 {
		t.Errorf("%d brokers started and %d stopped, want the warm-up's and the run's", started, stopped)
	}
	if !res.BrokerProcess || !strings.Contains(res.Note, "verified: 2000 outputs, exactly") {
		t.Errorf("result %+v", res)
	}
}
