package testbroker

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/broker"
)

// Env is the variable naming a real cluster: host:port,host:port.
const Env = "SLUICE_TEST_BROKERS"

// External returns the brokers Env names, or nil when it is unset or empty.
func External() []string {
	var addrs []string
	for a := range strings.SplitSeq(os.Getenv(Env), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// Addrs returns the cluster a test runs against: the brokers Env names, or
// an in-process broker closed when the test ends.
func Addrs(tb testing.TB) []string {
	tb.Helper()
	if addrs := External(); len(addrs) > 0 {
		return addrs
	}
	return Start(tb)
}

// Start starts the embedded broker on loopback, closed when the test ends,
// whatever Env says: for tests that need kfake's own behaviour (fault
// injection, compaction on demand, SASL users).
func Start(tb testing.TB) []string {
	tb.Helper()
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: 1})
	if err != nil {
		tb.Fatalf("testbroker: start the in-process broker: %v", err)
	}
	tb.Cleanup(b.Close)
	return b.Addrs()
}

// Unique returns prefix followed by random hex digits, so that tests that
// share a real cluster, or run again on one, use their own topics and
// groups.
func Unique(tb testing.TB, prefix string) string {
	tb.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	return prefix + hex.EncodeToString(b[:])
}
