package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	}
}
