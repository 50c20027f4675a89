package broker

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// secureTimeout bounds every attempt against a secured broker: a refused
// client must fail, not retry until the test's deadline.
const secureTimeout = 15 * time.Second

// listTopics makes one admin request with opts and returns its error.
func listTopics(t *testing.T, addrs []string, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), secureTimeout)
	defer cancel()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RequestRetries(2)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = kadm.NewClient(cl).ListTopics(ctx)
	if ctx.Err() != nil {
		t.Fatalf("request still retrying after %v (err %v): a refused client must fail", secureTimeout, err)
	}
	return err
}

func mechanism(method, user, pass string) sasl.Mechanism {
	switch method {
	case Plain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism()
	case ScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	default:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
}

func TestSecureSASL(t *testing.T) {
	for _, m := range []string{Plain, ScramSHA256, ScramSHA512} {
		t.Run(m, func(t *testing.T) {
			b := start(t, Config{Users: []User{{m, "alice", "s3cret"}}})
			if err := listTopics(t, b.Addrs(), kgo.SASL(mechanism(m, "alice", "s3cret"))); err != nil {
				t.Fatalf("right password: %v", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), secureTimeout)
			defer cancel()
			if err := CreateTopic(ctx, b.Addrs(), "t", 1, nil, kgo.SASL(mechanism(m, "alice", "s3cret"))); err != nil {
				t.Fatalf("CreateTopic with SASL: %v", err)
			}
			if err := listTopics(t, b.Addrs(), kgo.SASL(mechanism(m, "alice", "wrong"))); err == nil {
				t.Fatal("wrong password accepted")
			} else {
				t.Logf("wrong password: %v", err)
			}
			if err := listTopics(t, b.Addrs()); err == nil {
				t.Fatal("client without SASL accepted")
			} else {
				t.Logf("no SASL: %v", err)
			}
		})
	}
}

func TestSecureMutualTLS(t *testing.T) {
	certs, err := WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := certs.ServerTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	b := start(t, Config{TLS: srv})
	client := func(c Certs, withCert bool) *tls.Config {
		cfg, err := c.ClientTLS(withCert)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := listTopics(t, b.Addrs(), kgo.DialTLSConfig(client(certs, true))); err != nil {
		t.Fatalf("trusted CA and client certificate: %v", err)
	}
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"untrusted CA", []kgo.Opt{kgo.DialTLSConfig(client(other, true))}},
		{"no client certificate", []kgo.Opt{kgo.DialTLSConfig(client(certs, false))}},
		{"plaintext", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := listTopics(t, b.Addrs(), tc.opts...)
			if err == nil {
				t.Fatal("accepted")
			}
			t.Logf("refused: %v", err)
		})
	}
}

func TestStartRejectsBadUsers(t *testing.T) {
	for _, u := range []User{
		{"GSSAPI", "alice", "pw"},
		{Plain, "", "pw"},
		{ScramSHA256, "alice", ""},
	} {
		b, err := Start(Config{Users: []User{u}})
		if err == nil {
			b.Close()
			t.Errorf("Start with user %+v succeeded, want error", u)
			continue
		}
		if !strings.HasPrefix(err.Error(), "broker: ") || u.Password != "" && strings.Contains(err.Error(), u.Password) {
			t.Errorf("Start with user %+v: error %q lacks the prefix or shows the password", u, err)
		}
	}
}
