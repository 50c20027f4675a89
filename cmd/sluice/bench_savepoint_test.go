package main

import (
	"encoding/json"
	"testing"

	"github.com/sluice-streams/sluice/internal/bench"
)

// TestBenchSavepoint: `sluice bench --only savepoint --json` runs the
// savepoint scenario alone (no pipe) and reports its four phases.
func TestBenchSavepoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs on an embedded broker")
	}
	out, err := runSluice(testCtx(t), "bench", "--only", "savepoint", "--json", "--records", "2000", "--partitions", "2",
		"--commit-interval", "20ms")
	if err != nil {
		t.Fatalf("bench --only savepoint: %v\n%s", err, out)
	}
	var res bench.SavepointResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(res.Phases) != 5 || res.Phases[3].Scenario != bench.SavepointPhaseStart || res.Phases[3].Records != 2000 ||
		res.Phases[4].Scenario != bench.SavepointPhaseSeed || res.Bytes <= 0 {
		t.Fatalf("result %+v", res)
	}
}
