package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/bench"
)

// TestBenchNexmarkInProcess: `sluice bench --nexmark --in-process --json`
// runs the chosen queries, checks them and reports each (the test binary
// cannot start itself as the job's process, hence --in-process).
func TestBenchNexmarkInProcess(t *testing.T) {
	out, err := runSluice(testCtx(t), "bench", "--nexmark", "--in-process", "--json", "--nexmark-events", "3000",
		"--nexmark-queries", "q1,q7", "--partitions", "2")
	if err != nil {
		t.Fatalf("bench --nexmark: %v\n%s", err, out)
	}
	var res []bench.NexmarkResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(res) != 2 || res[0].Query != "q1" || res[1].Query != "q7" || res[0].Outputs == 0 || res[0].EventsPerSecond <= 0 ||
		res[0].FlinkPerCore != 158_000 || !strings.Contains(res[1].Note, "checked against the oracle") {
		t.Fatalf("results %+v", res)
	}
	if _, err := runSluice(testCtx(t), "bench", "--nexmark", "--in-process", "--nexmark-queries", "q99"); err == nil {
		t.Fatal("an unknown query ran")
	}
	if out, err := runSluice(testCtx(t), "bench", "--nexmark", "--in-process", "--nexmark-limit-go-memory", "--nexmark-queries", "q1"); err == nil ||
		!strings.Contains(err.Error(), "broker's heap") {
		t.Fatalf("--nexmark-limit-go-memory with --in-process: %v\n%s", err, out)
	}
}
