package integration

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// externalBrokers returns SLUICE_TEST_BROKERS split, or nil.
func externalBrokers() []string { return testbroker.External() }

// testBrokers returns the cluster a test runs against: SLUICE_TEST_BROKERS,
// or an in-process broker closed when the test ends.
func testBrokers(t testing.TB) []string {
	t.Helper()
	return testbroker.Addrs(t)
}

// startBroker starts sluice's embedded broker, the one `sluice broker` and
// `sluice demo` run, on loopback.
func startBroker(t testing.TB) []string {
	t.Helper()
	return testbroker.Start(t)
}

// uniquePrefix keeps tests that share a real cluster, or reruns against
// one, from reading each other's topics and groups.
func uniquePrefix(t testing.TB) string {
	t.Helper()
	return testbroker.Unique(t, "it-") + "-"
}

func newAdmin(t testing.TB, addrs []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func createTopics(t testing.TB, addrs []string, partitions int32, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// -1: the broker's default replication factor, right for one node and
	// for a real cluster alike.
	resp, err := newAdmin(t, addrs).CreateTopics(ctx, partitions, -1, nil, topics...)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("creating topics %v: %v", topics, err)
	}
}

func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
