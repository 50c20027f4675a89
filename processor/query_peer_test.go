package processor_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/processor/serve"
)

// TestQueryTypedBehindCredentials: two instances serving TLS behind a
// client CA and a token. The typed query given the same credentials reads
// every key, those of the other instance included; without them (no
// token; no client certificate) the keys of the other instance fail with
// an error that says the owner refused the credentials, not that the key
// is absent. The locally owned keys need nothing (negative control: the
// failures come from the owner's guard, not from the query itself).
func TestQueryTypedBehindCredentials(t *testing.T) {
	certs, err := broker.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, peerTLS, pool, err := certs.PeerTLS()
	if err != nil {
		t.Fatal(err)
	}
	const token = "typed-token"
	opts := []serve.Opt{serve.BearerToken(token), serve.ClientCAs(pool), serve.PeerTLS(peerTLS)}

	brokers := testBrokers(t)
	in := uniq(t, "typed-sec-in")
	cl := setup(t, brokers, 4, in)
	appID := uniq(t, "typed-sec")
	insts := []*typedInstance{
		startTypedInstanceWith(t, brokers, appID, in, serverTLS, opts...),
		startTypedInstanceWith(t, brokers, appID, in, serverTLS, opts...),
	}
	waitShared(t, insts)
	keys := testkeys.UUIDs(24)
	ctx := context.Background()
	for i, k := range keys {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	front := insts[0]
	good := processor.Query(front.app, latestStore, processor.QueryPeerTLS(peerTLS), processor.QueryBearerToken(token))
	noToken := processor.Query(front.app, latestStore, processor.QueryPeerTLS(peerTLS))
	noCert := processor.Query(front.app, latestStore, processor.QueryPeerTLS(&tls.Config{RootCAs: pool}), processor.QueryBearerToken(token))
	remote := 0
	for i, k := range keys {
		waitUntil(t, "key "+k, func() bool {
			v, ok, err := good.Get(ctx, k)
			if err != nil && !errors.Is(err, processor.ErrNotReady) {
				t.Fatalf("Get %q: %v", k, err)
			}
			return err == nil && ok && v == fmt.Sprintf("v%d", i)
		})
		loc, err := front.app.Locate("latest", []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		for name, q := range map[string]*processor.KeyValueQuery[string, string]{"no token": noToken, "no certificate": noCert} {
			v, ok, err := q.Get(ctx, k)
			switch {
			case loc.Local && (err != nil || !ok):
				t.Errorf("%s, local key %q: %q %v %v", name, k, v, ok, err)
			case !loc.Local && (err == nil || !strings.Contains(err.Error(), "refused the credentials")):
				t.Errorf("%s, key %q of the other instance: %q %v %v, want the owner's refusal", name, k, v, ok, err)
			}
		}
		if !loc.Local {
			remote++
		}
	}
	if remote == 0 || remote == len(keys) {
		t.Fatalf("%d of %d keys owned by the other instance: want some, not all", remote, len(keys))
	}
	if all, err := good.All(ctx); err != nil || len(all) != len(keys) {
		t.Errorf("All with the credentials: %d entries, %v", len(all), err)
	}
	if _, err := noToken.All(ctx); err == nil || !strings.Contains(err.Error(), "refused the credentials (401") {
		t.Errorf("All without the token: %v", err)
	}
}
