package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/bench"
)

// TestBenchBrokerProcess: `sluice bench --broker-process` hands the flag to
// each scenario's child process, which runs the job against a broker
// process of its own and says so in its result. It runs the built binary:
// the test binary cannot start itself as the child or the broker.
func TestBenchBrokerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the sluice binary's bench; not with -short")
	}
	if raceEnabled {
		t.Skip("runs a separate binary, built without the race detector")
	}
	dir, err := buildSluice()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "sluice"), "bench", "--broker-process", "--only", "stateless",
		"--records", "2000", "--partitions", "2", "--runs", "1", "--paced-for", "0", "--json").Output()
	if err != nil {
		t.Fatalf("sluice bench --broker-process: %v\n%s", err, out)
	}
	var res []bench.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(res) != 4 {
		t.Fatalf("%d results, want the pipe's and stateless's under two guarantees: %+v", len(res), res)
	}
	for _, r := range res {
		if !r.BrokerProcess || r.PeakRSSBytes == 0 || !strings.Contains(r.Note, "verified: 2000 outputs, exactly") {
			t.Errorf("%s %s: broker process %v, peak RSS %d, note %q", r.Scenario, r.Guarantee, r.BrokerProcess, r.PeakRSSBytes, r.Note)
		}
	}
}
