//go:build unix

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"
)

// TestPageViewsExactlyOnceUnderSIGKILL runs three pageviews instances as OS
// processes under exactly_once, SIGKILLs one every few seconds while the
// views arrive, and checks with a read_committed consumer that each closed
// minute and session is emitted exactly once with the oracle's count, that
// late and unreadable views each land once; then a fresh application
// replays the same input from scratch and must write the same per-key
// sequences, byte for byte.
func TestPageViewsExactlyOnceUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	cfg := chaosConfigFromEnv(t)
	views := 30_000
	if os.Getenv("SLUICE_SOAK") == "1" {
		views = 300_000
	}
	if os.Getenv("SLUICE_CHAOS_BILLS") != "" {
		views = cfg.bills
	}
	kills := min(cfg.kills, 6)
	if os.Getenv("SLUICE_CHAOS_KILLS") != "" || os.Getenv("SLUICE_SOAK") == "1" {
		kills = cfg.kills
	}
	t.Logf("seed %d (SLUICE_CHAOS_SEED), %d views, %d kills, guarantee %s", cfg.seed, views, kills, cfg.guarantee)
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 0x5e55))

	bin := buildSluice(t)
	addrs := chaosBrokers(t)
	topics := DefaultPageViewTopics()
	createTopics(t, addrs, chaosPartitions, append([]string{topics.Input}, topics.outputs()...)...)
	gen := GeneratePageViews(cfg.seed, views, chaosPartitions)

	h := newPageViewsHarness(t, bin, addrs, fmt.Sprintf("pageviews-chaos-%d", cfg.seed&0xffffffff), cfg.guarantee, topics, chaosInstances)
	produceCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	produced := make(chan produceResult, 1)
	go func() {
		// In chunks, so kills land while views arrive.
		var all []InputRecord
		chunk := (len(gen) + 2*kills) / max(1, 2*kills)
		for i := 0; i < len(gen); i += chunk {
			in, err := ProduceKeyed(produceCtx, addrs, topics.Input, gen[i:min(i+chunk, len(gen))])
			if err != nil {
				produced <- produceResult{err: err}
				return
			}
			all = append(all, in...)
			select {
			case <-produceCtx.Done():
				produced <- produceResult{err: produceCtx.Err()}
				return
			case <-time.After(1500 * time.Millisecond):
			}
		}
		produced <- produceResult{input: all}
	}()

	finishBy := time.Now().Add(8 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-3*time.Minute).Before(finishBy) {
		finishBy = d.Add(-3 * time.Minute)
	}
	input, killed := h.chaos(rng, kills, produced, finishBy)
	h.waitFinished(finishBy, topics.Input, topics.outputs())
	h.stopAll(time.Minute)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exp := ExpectPageViews(input)
	t.Logf("oracle: %d closed minutes, %d closed sessions, %d late views, %d unreadable", len(exp.PerMinute), len(exp.Sessions), len(exp.Late), len(exp.Dead))
	if len(exp.PerMinute) == 0 || len(exp.Sessions) == 0 || len(exp.Late) == 0 || len(exp.Dead) == 0 {
		t.Fatal("the input does not exercise every output")
	}
	first, err := ReadOutputs(ctx, addrs, topics.outputs())
	if err != nil {
		t.Fatal(err)
	}
	if v := CheckPageViews(topics, exp, first); len(v) > 0 {
		t.Errorf("exactly-once violated after %d kills (seed %d):\n%s", killed, cfg.seed, joinLines(v))
	}

	// Replay from scratch: a new application id, new output topics, one
	// instance, no kills.
	replay := PageViewTopics{Input: topics.Input, PerMinute: "replay-" + topics.PerMinute, Late: "replay-" + topics.Late,
		Sessions: "replay-" + topics.Sessions, DLQ: "replay-" + topics.DLQ}
	createTopics(t, addrs, chaosPartitions, replay.outputs()...)
	r := newPageViewsHarness(t, bin, addrs, fmt.Sprintf("pageviews-replay-%d", cfg.seed&0xffffffff), cfg.guarantee, replay, 1)
	r.waitFinished(time.Now().Add(4*time.Minute), replay.Input, replay.outputs())
	r.stopAll(time.Minute)
	second, err := ReadOutputs(ctx, addrs, replay.outputs())
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{topics.PerMinute, replay.PerMinute}, {topics.Sessions, replay.Sessions}} {
		if diff := SameSequences(PerKeySequences(first[pair[0]]), PerKeySequences(second[pair[1]])); len(diff) > 0 {
			t.Errorf("replay wrote different %s for %d keys, e.g. %q", pair[0], len(diff), diff[0])
		}
	}
	for _, pair := range [][2]string{{topics.Late, replay.Late}} {
		if !slices.Equal(SortedRecords(first[pair[0]]), SortedRecords(second[pair[1]])) {
			t.Errorf("replay wrote different %s records", pair[0])
		}
	}
}

func newPageViewsHarness(t *testing.T, bin string, addrs []string, appID, guarantee string, topics PageViewTopics, n int) *harness {
	run := []string{"run", "pageviews", "--input", topics.Input, "--per-minute", topics.PerMinute, "--late", topics.Late, "--sessions", topics.Sessions, "--dlq", topics.DLQ}
	logDir := os.Getenv("SLUICE_CHAOS_LOG_DIR") // kept after the run, as billing's
	if logDir == "" {
		logDir = t.TempDir()
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return newHarness(t, bin, addrs, appID, guarantee, false, run, logDir, n)
}

func joinLines(v []string) string {
	s := ""
	for _, l := range v {
		s += "  " + l + "\n"
	}
	return s
}
