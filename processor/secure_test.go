package processor_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/txn"
)

// These tests always start their own kfake, even with SLUICE_TEST_BROKERS
// set: they need a broker with SASL or TLS switched on.

// refuseWithin bounds how long a refused instance may take to stop: a
// refusal must end Run, not leave it retrying.
const refuseWithin = 20 * time.Second

func saslMechanism(method, user, pass string) sasl.Mechanism {
	switch method {
	case broker.Plain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case broker.ScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
}

func startSecure(t *testing.T, cfg broker.Config) []string {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Addrs()
}

// wordCountSecure runs wordcount exactly_once against a secured broker: the
// test's own clients use good, the app uses app. With app == good it checks
// the counts end to end and returns nil; otherwise it returns what Run
// returned.
func wordCountSecure(t *testing.T, addrs []string, good, app []kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	in, out := uniq(t, "lines"), uniq(t, "counts")
	for _, tp := range []string{in, out} {
		if err := broker.CreateTopic(ctx, addrs, tp, 2, nil, good...); err != nil {
			t.Fatal(err)
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in)}, good...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]int64{}
	var words int64
	for i := range 20 {
		line := fmt.Sprintf("secure w%d w%d", i%3, i%5)
		for _, w := range examples.Words(line) {
			want[w]++
			words++
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(line)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	a, err := processor.New(examples.WordCount(in, out, in+"-dlq"),
		processor.ApplicationID(uniq(t, "secure")), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.Guarantee(txn.ExactlyOnce),
		processor.ClientOptions(app...))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = runUntil(a, func(a *processor.App) bool { return a.Stats().Processed.Load() >= 20+words })
	if err != nil {
		if d := time.Since(start); d > refuseWithin {
			t.Errorf("refused after %v, want within %v", d, refuseWithin)
		}
		return err
	}
	if n := a.Stats().Processed.Load(); n < 20+words {
		t.Fatalf("processed %d records, want %d", n, 20+words)
	}
	recs, err := readback.ReadCommitted(ctx, addrs, out, good...)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range recs {
		n, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil {
			t.Fatalf("bad count %q", r.Value)
		}
		got[string(r.Key)] = n
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("word %q: got %d, want %d", w, got[w], n)
		}
	}
	return nil
}

// wantRefused checks that err is a clear authentication failure.
func wantRefused(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("Run succeeded, want a refusal")
	}
	if !errors.Is(err, processor.ErrAuthentication) {
		t.Fatalf("Run returned %v, want ErrAuthentication", err)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("error %q shows a secret", err)
		}
	}
	t.Logf("refused: %v", err)
}

func TestSecureSASL(t *testing.T) {
	for _, m := range []string{broker.Plain, broker.ScramSHA256, broker.ScramSHA512} {
		t.Run(m, func(t *testing.T) {
			addrs := startSecure(t, broker.Config{Partitions: 2, Users: []broker.User{{Mechanism: m, Name: "app", Password: "right-pw"}}})
			good := []kgo.Opt{kgo.SASL(saslMechanism(m, "app", "right-pw"))}
			if err := wordCountSecure(t, addrs, good, good); err != nil {
				t.Fatalf("right password: %v", err)
			}
			wantRefused(t, wordCountSecure(t, addrs, good, []kgo.Opt{kgo.SASL(saslMechanism(m, "app", "wrong-pw"))}), "wrong-pw", "right-pw")
			wantRefused(t, wordCountSecure(t, addrs, good, nil))
		})
	}
}

func TestSecureMutualTLS(t *testing.T) {
	certs, err := broker.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := broker.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := certs.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	addrs := startSecure(t, broker.Config{Partitions: 2, TLS: srv})
	tlsOpt := func(c broker.Certs, clientCert bool) []kgo.Opt {
		cfg, err := c.ClientTLS(clientCert)
		if err != nil {
			t.Fatal(err)
		}
		return []kgo.Opt{kgo.DialTLSConfig(cfg)}
	}
	good := tlsOpt(certs, true)
	if err := wordCountSecure(t, addrs, good, good); err != nil {
		t.Fatalf("trusted CA and client certificate: %v", err)
	}
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"untrusted CA", tlsOpt(stranger, true)},
		{"no client certificate", tlsOpt(certs, false)},
		{"plaintext", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRefused(t, wordCountSecure(t, addrs, good, tc.opts))
		})
	}
}
