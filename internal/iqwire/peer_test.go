package iqwire

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPeer: a Peer with TLS asks over https with its config and sends the
// token and the forwarded mark; the client it was made from keeps its own
// transport. Without TLS it speaks plain HTTP, which a TLS server refuses
// (the negative control: the scheme really comes from the Peer).
func TestPeer(t *testing.T) {
	var got http.Header
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Write([]byte(r.URL.RequestURI()))
	}))
	defer srv.Close()
	endpoint := strings.TrimPrefix(srv.URL, "https://")
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	base := &http.Client{Timeout: 10 * time.Second}
	ctx := context.Background()

	p := NewPeer(base, &tls.Config{RootCAs: roots}, "tok en")
	code, _, body, err := p.Get(ctx, endpoint, "/stores/s/keys/k?x=1", "me:1")
	if err != nil || code != 200 || string(body) != "/stores/s/keys/k?x=1" {
		t.Fatalf("https: %d %q %v", code, body, err)
	}
	if got.Get("Authorization") != "Bearer tok en" || got.Get(HeaderForwarded) != "me:1" {
		t.Errorf("headers: %v", got)
	}
	if base.Transport != nil {
		t.Errorf("the base client's transport was changed")
	}
	// No token, no header.
	if _, _, _, err := NewPeer(base, &tls.Config{RootCAs: roots}, "").Get(ctx, endpoint, "/", "me"); err != nil || got.Get("Authorization") != "" {
		t.Errorf("without a token: %v, Authorization %q", err, got.Get("Authorization"))
	}
	// A RoundTripper of the caller's own is used as it is (here: one that
	// trusts the server), over https.
	own := &http.Client{Transport: roundTripper{srv.Client().Transport}}
	if code, _, _, err := NewPeer(own, &tls.Config{}, "").Get(ctx, endpoint, "/", "me"); err != nil || code != 200 {
		t.Errorf("own transport: %d %v", code, err)
	}
	// Negative control: plain HTTP to the TLS server.
	if code, _, _, err := NewPeer(base, nil, "").Get(ctx, endpoint, "/", "me"); err == nil && code == 200 {
		t.Errorf("plain HTTP to a TLS server answered 200")
	}
}

type roundTripper struct{ http.RoundTripper }
