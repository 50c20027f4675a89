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
