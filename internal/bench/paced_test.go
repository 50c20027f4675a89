package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/txn"
)

// TestPacedRun runs the count scenario's paced run small: every paced input
// must be accounted for by an output, and an output claiming more inputs
// than its key had must be refused.
func TestPacedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job on an embedded broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{Partitions: 2, CommitInterval: 50 * time.Millisecond, Rate: 4000, PacedFor: time.Second}
	sc, _ := scenarioNamed("count")
	lat, err := runPaced(ctx, cfg, sc, txn.ExactlyOnce)
	if err != nil {
		t.Fatal(err)
	}
	if lat.Records != 4000 || lat.P50 <= 0 || lat.P50 > lat.P99 || lat.P99 > lat.Max {
		t.Errorf("latency %+v: want 4000 records and 0 < p50 <= p99 <= max", lat)
	}
	t.Logf("%+v", lat)

	// Negative control: outputs read as covering twice what they do.
	sc.covers = func(out *kgo.Record) (string, int, error) {
		k, n, err := runningCount(out)
		return k, 2 * n, err
	}
	if _, err := runPaced(ctx, cfg, sc, txn.ExactlyOnce); err == nil || !strings.Contains(err.Error(), "covers") {
		t.Errorf("over-counting outputs: got %v, want an error that an output covers more inputs than were produced", err)
	}
}
