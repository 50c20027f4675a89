//go:build unix

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// TestEnrichExactlyOnceUnderSIGKILL runs three enrich instances under
// exactly_once while orders and payments arrive, SIGKILLs them at random,
// then changes customers' tiers (and deletes some) and checks, with a
// read_committed consumer, that each order was emitted exactly once with
// its customer and payment, and that revenue-by-tier moved each customer's
// revenue to their final tier.
func TestEnrichExactlyOnceUnderSIGKILL(t *testing.T) { enrichUnderSIGKILL(t, "enrich") }

// TestEnrichInMemoryExactlyOnceUnderSIGKILL is TestEnrichExactlyOnceUnderSIGKILL
// with the order–payment join's records in memory (enrich-memory,
// ops.JoinMemory): every kill loses them, and every task that opens,
// after a kill or a rebalance, restores them from the changelogs alone.
func TestEnrichInMemoryExactlyOnceUnderSIGKILL(t *testing.T) { enrichUnderSIGKILL(t, "enrich-memory") }

func enrichUnderSIGKILL(t *testing.T, example string) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	cfg := chaosConfigFromEnv(t)
	orders, kills := 20_000, min(cfg.kills, 6)
	if os.Getenv("SLUICE_SOAK") == "1" {
		orders, kills = 200_000, cfg.kills
	}
	t.Logf("seed %d (SLUICE_CHAOS_SEED), %d orders, %d kills, guarantee %s", cfg.seed, orders, kills, cfg.guarantee)
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 0xe1))
	bin := buildSluice(t)
	addrs := chaosBrokers(t)
	topics := DefaultEnrichTopics()
	createTopics(t, addrs, chaosPartitions, append([]string{topics.Orders, topics.Customers, topics.Payments}, topics.outputs()...)...)
	in := GenerateEnrich(cfg.seed, orders, chaosPartitions)
	ctx := context.Background()
	if _, err := ProduceKeyed(ctx, addrs, topics.Customers, in.Customers); err != nil {
		t.Fatal(err)
	}
	appID := fmt.Sprintf("%s-chaos-%d", example, cfg.seed&0xffffffff)
	h := newHarness(t, bin, addrs, appID, cfg.guarantee, false, []string{"run", example}, t.TempDir(), chaosInstances)

	produced := make(chan produceResult, 1)
	go func() {
		chunks := 2 * kills
		for c := range chunks {
			lo, hi := c*len(in.Orders)/chunks, (c+1)*len(in.Orders)/chunks
			plo, phi := c*len(in.Payments)/chunks, (c+1)*len(in.Payments)/chunks
			if _, err := ProduceKeyed(ctx, addrs, topics.Orders, in.Orders[lo:hi]); err != nil {
				produced <- produceResult{err: err}
				return
			}
			if _, err := ProduceKeyed(ctx, addrs, topics.Payments, in.Payments[plo:phi]); err != nil {
				produced <- produceResult{err: err}
				return
			}
			time.Sleep(1500 * time.Millisecond)
		}
		produced <- produceResult{}
	}()
	finishBy := time.Now().Add(8 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-3*time.Minute).Before(finishBy) {
		finishBy = d.Add(-3 * time.Minute)
	}
	_, killed := h.chaos(rng, kills, produced, finishBy)
	h.waitFinished(finishBy, topics.Orders, topics.outputs())
	h.waitFinished(finishBy, topics.Payments, topics.outputs())
	// Customers change only now, after every order was enriched, so the
	// enriched orders carry the first version and the revenue the last.
	if _, err := ProduceKeyed(ctx, addrs, topics.Customers, in.Changes); err != nil {
		t.Fatal(err)
	}
	h.waitFinished(finishBy, topics.Customers, topics.outputs())
	h.stopAll(time.Minute)

	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := ReadOutputs(rctx, addrs, topics.outputs())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d enriched orders, %d revenue updates, %d customer changes", len(out[topics.Enriched]), len(out[topics.Revenue]), len(in.Changes))
	if v := CheckEnrich(topics, ExpectEnrich(in), out); len(v) > 0 {
		t.Errorf("exactly-once violated after %d kills (seed %d):\n%s", killed, cfg.seed, joinLines(v))
	}
}
