package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/broker"
)

// TestProduceConsumeSecure: produce and consume reach a broker that wants
// SASL over mutual TLS through run's flags and SLUICE_SASL_PASSWORD, and a
// wrong password is an error (soon, and without the password), not a hang.
func TestProduceConsumeSecure(t *testing.T) {
	b, certs := startSecureBroker(t)
	clearEnv(t)
	sec := []string{"--brokers", strings.Join(b.Addrs(), ","), "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-256",
		"--sasl-username", "alice", "--ssl-ca", certs.CA, "--ssl-cert", certs.ClientCert, "--ssl-key", certs.ClientKey}
	t.Setenv("SLUICE_SASL_PASSWORD", testPassword)
	if out, err := runSluice(testCtx(t), append([]string{"topic", "create", "secure", "--partitions", "1"}, sec...)...); err != nil {
		t.Fatalf("topic create: %v\n%s", err, out)
	}
	if _, stderr, err := runSluiceIO(testCtx(t), "k|secret line\n", append([]string{"produce", "secure", "--key-separator", "|"}, sec...)...); err != nil {
		t.Fatalf("produce: %v\n%s", err, stderr)
	}
	out, stderr, err := runSluiceIO(testCtx(t), "", append([]string{"consume", "secure", "--from-beginning"}, sec...)...)
	if err != nil || out != "k\tsecret line\n" {
		t.Fatalf("consume: %v, printed %q\n%s", err, out, stderr)
	}

	t.Setenv("SLUICE_SASL_PASSWORD", "wrong-"+testPassword)
	for _, cmd := range [][]string{{"produce", "secure"}, {"consume", "secure", "--from-beginning"}} {
		start := time.Now()
		_, _, err := runSluiceIO(testCtx(t), "x\n", append(cmd, sec...)...)
		if err == nil || strings.Contains(err.Error(), testPassword) || time.Since(start) > 20*time.Second {
			t.Errorf("%s with a wrong password: %v after %v, want an error without the password", cmd[0], err, time.Since(start))
		}
	}
}

// startSecureBroker starts a broker that wants SCRAM-SHA-256 user alice
// (testPassword) over mutual TLS with certs.
func startSecureBroker(t *testing.T) (*broker.Broker, broker.Certs) {
	t.Helper()
	certs := testCerts(t)
	srv, err := certs.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Config{TLS: srv, Users: []broker.User{{Mechanism: broker.ScramSHA256, Name: "alice", Password: testPassword}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, certs
}
