package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
)

// testToken must never appear in an error, a printed configuration or a
// formatted appConfig.
const testToken = "tok-9f8e7d6c-not-for-logs"

// TestHTTPSecurityConfig: the token comes from SLUICE_HTTP_TOKEN, the
// config file or http.token.file, never a flag; TLS and client CA files are
// read and checked at start, every mistake named with its key; the token
// never shows in the configuration as printed or formatted.
func TestHTTPSecurityConfig(t *testing.T) {
	certs := testCerts(t)
	other := testCerts(t)
	tokenFile := writeFile(t, "token", testToken+"\n")

	probe, _, _ := newRootCmd().Find([]string{"run"})
	if probe.Name() != "run" || probe.Flags().Lookup("http-token-file") == nil {
		t.Fatalf("found %q without --http-token-file", probe.Name())
	}
	if f := probe.Flags().Lookup("http-token"); f != nil {
		t.Errorf("a --http-token flag exists: the token would show in ps")
	}
	for _, c := range []struct {
		name  string
		env   map[string]string
		args  []string
		yaml  string
		token string
		tls   bool
		errs  []string // each in the error; none: no error
	}{
		{name: "environment", env: map[string]string{"SLUICE_HTTP_TOKEN": testToken}, token: testToken},
		{name: "token file, line end dropped", args: []string{"--http-token-file", tokenFile}, token: testToken},
		{name: "token file by environment", env: map[string]string{"SLUICE_HTTP_TOKEN_FILE": tokenFile}, token: testToken},
		{name: "config file, flat", yaml: "http.token: " + testToken + "\n", token: testToken},
		{name: "config file, nested with the file key", yaml: "http:\n  token:\n    file: " + tokenFile + "\n", token: testToken},
		{name: "token and file", env: map[string]string{"SLUICE_HTTP_TOKEN": testToken}, args: []string{"--http-token-file", tokenFile},
			errs: []string{"http.token (from environment SLUICE_HTTP_TOKEN) and http.token.file (from flag --http-token-file) are both set"}},
		{name: "empty token file", args: []string{"--http-token-file", writeFile(t, "empty", "\n")}, errs: []string{"invalid http.token.file", "the file is empty"}},
		{name: "missing token file", args: []string{"--http-token-file", "/nonexistent/token"}, errs: []string{"invalid http.token.file /nonexistent/token"}},
		{name: "TLS", args: []string{"--http-tls-cert", certs.ServerCert, "--http-tls-key", certs.ServerKey}, tls: true},
		{name: "TLS and client CA", env: map[string]string{"SLUICE_HTTP_TLS_CERT": certs.PeerCert, "SLUICE_HTTP_TLS_KEY": certs.PeerKey, "SLUICE_HTTP_CLIENT_CA": certs.CA}, tls: true},
		{name: "cert without key", args: []string{"--http-tls-cert", certs.ServerCert}, errs: []string{"http.tls.cert and http.tls.key go together"}},
		{name: "key without cert", yaml: "http.tls.key: " + certs.ServerKey + "\n", errs: []string{"http.tls.cert and http.tls.key go together"}},
		{name: "client CA without TLS", args: []string{"--http-client-ca", certs.CA},
			errs: []string{"http.client.ca is set (from flag --http-client-ca) but http.tls.cert is not"}},
		{name: "peer CA without TLS", args: []string{"--http-tls-ca", certs.CA}, errs: []string{"http.tls.ca is set (from flag --http-tls-ca)"}},
		{name: "key of another certificate", args: []string{"--http-tls-cert", certs.ServerCert, "--http-tls-key", other.ServerKey},
			errs: []string{"invalid http.tls.cert", "private key does not match public key"}},
		{name: "client CA not PEM", args: []string{"--http-tls-cert", certs.PeerCert, "--http-tls-key", certs.PeerKey, "--http-client-ca", tokenFile},
			errs: []string{"invalid http.client.ca", "no PEM certificate"}},
		{name: "a server-only certificate cannot be presented to the others", args: []string{"--http-tls-cert", certs.ServerCert, "--http-tls-key", certs.ServerKey, "--http-client-ca", certs.CA},
			errs: []string{"invalid http.tls.cert", "client authentication", "incompatible key usage"}},
		{name: "a certificate the client CA did not sign", args: []string{"--http-tls-cert", other.PeerCert, "--http-tls-key", other.PeerKey, "--http-client-ca", certs.CA},
			errs: []string{"invalid http.tls.cert", "does not verify against http.client.ca"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := loadVia(t, "app", caseArgs(t, c.env, c.args, c.yaml)...)
			if len(c.errs) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", c.errs)
				}
				for _, e := range c.errs {
					if !strings.Contains(err.Error(), e) {
						t.Errorf("error %q lacks %q", err, e)
					}
				}
				if strings.Contains(err.Error(), testToken) {
					t.Errorf("the token leaks: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.HTTP.Token.reveal() != c.token || cfg.HTTP.tls() != c.tls {
				t.Errorf("token %q tls %v, want %q %v", cfg.HTTP.Token.reveal(), cfg.HTTP.tls(), c.token, c.tls)
			}
			for _, s := range []string{fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)} {
				if strings.Contains(s, testToken) {
					t.Errorf("the token leaks: %s", s)
				}
			}
		})
	}

	// sluice config shows where the token came from, not the token.
	clearEnv(t)
	t.Setenv("SLUICE_HTTP_TOKEN", testToken)
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"config", "--http-tls-cert", certs.ServerCert, "--http-tls-key", certs.ServerKey})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`http.token: "********"  # from environment SLUICE_HTTP_TOKEN`, `http.tls.cert: "` + certs.ServerCert + `"  # from flag --http-tls-cert`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sluice config lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), testToken) {
		t.Errorf("sluice config shows the token:\n%s", out.String())
	}
}

// TestServeOnSecured: serveOn serves what the configuration says. Over TLS
// with a client CA and a token: no certificate 403, a certificate without
// the token 401, both 200, /healthz open; the instance's own peer
// configuration (what its forwarded queries use) passes another instance's
// guard. With a token alone over HTTP: 401 and 200. Negative control: the
// same requests without the security get 200.
func TestServeOnSecured(t *testing.T) {
	certs := testCerts(t)
	app, err := processor.New(examples.WordCount("lines", "counts", "lines-dlq"),
		processor.ApplicationID("sec-test"), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	clearEnv(t)
	t.Setenv("SLUICE_HTTP_TOKEN", testToken)
	cfg, err := loadVia(t, "app", "--http-tls-cert", certs.PeerCert, "--http-tls-key", certs.PeerKey, "--http-client-ca", certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(sec httpSecurity) string {
		ln, err := listenHTTP("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(serveOn(ln, app, nil, slog.New(slog.DiscardHandler), sec))
		return ln.Addr().String()
	}
	get := func(cl *http.Client, url string, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tlsClient := func(withCert bool) *http.Client {
		c, err := certs.ClientTLS(withCert)
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}
	}
	noCert, withCert := tlsClient(false), tlsClient(true)

	secured := "https://" + serve(cfg.HTTP)
	for _, c := range []struct {
		name, path, token string
		cl                *http.Client
		code              int
	}{
		{"no certificate", "/tasks", testToken, noCert, 403},
		{"no certificate, metrics", "/metrics", "", noCert, 403},
		{"certificate, no token", "/tasks", "", withCert, 401},
		{"certificate, wrong token", "/metrics", testToken + "x", withCert, 401},
		{"both", "/tasks", testToken, withCert, 200},
		{"both, metrics", "/metrics", testToken, withCert, 200},
		{"healthz, neither", "/healthz", "", noCert, 200},
		{"readyz, neither", "/readyz", "", noCert, 503}, // not running: open, but not ready
	} {
		if code, body := get(c.cl, secured+c.path, c.token); code != c.code || (code == 401 || code == 403) && strings.Contains(body, "sluice_") {
			t.Errorf("%s: %s %d %.100s, want %d", c.name, c.path, code, body, c.code)
		}
	}
	// What this instance's forwarded queries present (its own certificate
	// and the token, trusting the client CA) passes another instance's
	// guard configured alike.
	peer := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg.HTTP.peer}}
	if code, body := get(peer, secured+"/tasks", cfg.HTTP.Token.reveal()); code != 200 {
		t.Errorf("as a peer: %d %s", code, body)
	}
	// The healthcheck command reaches it with --ca, and not without.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := healthcheck(ctx, secured+"/healthz", certs.CA); err != nil {
		t.Errorf("healthcheck --ca: %v", err)
	}
	if err := healthcheck(ctx, secured+"/healthz", ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("healthcheck without --ca: %v, want a certificate error", err)
	}

	// A token alone, over plain HTTP.
	tokenOnly := "http://" + serve(httpSecurity{Token: testToken})
	if code, _ := get(http.DefaultClient, tokenOnly+"/metrics", ""); code != 401 {
		t.Errorf("token only, none given: %d", code)
	}
	if code, body := get(http.DefaultClient, tokenOnly+"/metrics", testToken); code != 200 || !strings.Contains(body, "sluice_") {
		t.Errorf("token only, given: %d", code)
	}
	// Negative control: without security the same requests are served.
	open := "http://" + serve(httpSecurity{})
	for _, p := range []string{"/tasks", "/metrics"} {
		if code, _ := get(http.DefaultClient, open+p, ""); code != 200 {
			t.Errorf("unsecured %s: %d", p, code)
		}
	}
}

// fakeAddr is a listener's address as it would be on another interface.
type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// TestWarnExposed: a non-loopback address without credentials, or with a
// token but no TLS, is allowed and warned about; loopback, or credentials
// over TLS, is not.
func TestWarnExposed(t *testing.T) {
	certs := testCerts(t)
	clearEnv(t)
	full, err := loadVia(t, "app", "--http-tls-cert", certs.PeerCert, "--http-tls-key", certs.PeerKey, "--http-client-ca", certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, addr string
		sec        httpSecurity
		want       string // "" no warning
	}{
		{"open, another interface", "192.0.2.10:9100", httpSecurity{}, "without credentials"},
		{"open, wildcard", "0.0.0.0:9100", httpSecurity{}, "without credentials"},
		{"open, IPv6 wildcard", "[::]:9100", httpSecurity{}, "without credentials"},
		{"token without TLS", "192.0.2.10:9100", httpSecurity{Token: testToken}, "travels in clear"},
		{"client CA and TLS", "192.0.2.10:9100", full.HTTP, ""},
		{"open, loopback", "127.0.0.1:9100", httpSecurity{}, ""},
		{"open, IPv6 loopback", "[::1]:9100", httpSecurity{}, ""},
	} {
		var log bytes.Buffer
		c.sec.warnExposed(fakeAddr(c.addr), slog.New(slog.NewTextHandler(&log, nil)))
		warned := strings.Contains(log.String(), "level=WARN")
		if warned != (c.want != "") || !strings.Contains(log.String(), c.want) {
			t.Errorf("%s: logged %q, want a warning with %q", c.name, log.String(), c.want)
		}
		if strings.Contains(log.String(), testToken) {
			t.Errorf("%s: the token is logged", c.name)
		}
	}
	// serveOn says it, for the address its listener reports.
	app, err := processor.New(examples.WordCount("lines", "counts", "lines-dlq"),
		processor.ApplicationID("warn-test"), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	for addr, warn := range map[string]bool{"192.0.2.10:9100": true, "": false} {
		ln, err := listenHTTP("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var l net.Listener = ln
		if addr != "" {
			l = elsewhere{ln, fakeAddr(addr)}
		}
		var log syncBuffer
		serveOn(l, app, nil, slog.New(slog.NewTextHandler(&log, nil)), httpSecurity{})()
		if got := strings.Contains(log.String(), "without credentials"); got != warn {
			t.Errorf("serveOn at %s: logged %q, want a warning %v", l.Addr(), log.String(), warn)
		}
	}
}

// elsewhere is a listener that reports another address.
type elsewhere struct {
	net.Listener
	addr net.Addr
}

func (e elsewhere) Addr() net.Addr { return e.addr }

// syncBuffer is an output written by another goroutine or process (a
// server's log, a background command of the tour) and read meanwhile.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freePort returns a loopback address that was free a moment ago: `sluice
// run` prints its bound address only to its log.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestRunBehindCredentials: two `sluice run wordcount` instances with TLS,
// a client CA and SLUICE_HTTP_TOKEN, as an operator starts them. Every word
// is answered by the first instance, those the second owns forwarded with
// the first's own certificate and the token (the answer names the second
// as its server); without the token 401, without a certificate 403, and
// neither shows a count; /readyz answers a probe with neither.
func TestRunBehindCredentials(t *testing.T) {
	addrs := testbroker.Addrs(t)
	in, appID := testbroker.Unique(t, "sec-lines-"), testbroker.Unique(t, "sec-run-")
	out := in + "-counts"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, tp := range []string{in, out} {
		if err := broker.CreateTopic(ctx, addrs, tp, 4, nil); err != nil {
			t.Fatal(err)
		}
	}
	certs := testCerts(t)
	clearEnv(t)
	t.Setenv("SLUICE_HTTP_TOKEN", testToken)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var endpoints []string
	var dones []chan error
	for range 2 {
		ep := freePort(t)
		endpoints = append(endpoints, ep)
		root := newRootCmd()
		root.SetArgs([]string{"run", "wordcount", "--app-id", appID, "--brokers", strings.Join(addrs, ","),
			"--state-dir", t.TempDir(), "--input", in, "--output", out, "--log-level", "error",
			"--http", ep, "--http-tls-cert", certs.PeerCert, "--http-tls-key", certs.PeerKey, "--http-client-ca", certs.CA})
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		done := make(chan error, 1)
		go func() { done <- root.ExecuteContext(runCtx) }()
		dones = append(dones, done)
	}
	defer func() {
		stop()
		for i, done := range dones {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("instance %d: %v", i, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("instance %d did not stop", i)
			}
		}
	}()

	client := func(cert bool) *http.Client {
		c, err := certs.ClientTLS(cert)
		if err != nil {
			t.Fatal(err)
		}
		if cert { // a certificate for client authentication only, as a person's is
			c.Certificates = []tls.Certificate{mustKeyPair(t, certs.ClientCert, certs.ClientKey)}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: c}}
	}
	noCert, withCert := client(false), client(true)
	get := func(cl *http.Client, url, token string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := cl.Do(req)
		if err != nil {
			return 0, err.Error(), ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("X-Sluice-Served-By")
	}
	// Both in the group with tasks, as a probe with no credentials sees it.
	deadline := time.Now().Add(time.Minute)
	for _, ep := range endpoints {
		for {
			code, body, _ := get(noCert, "https://"+ep+"/readyz", "")
			if code == 200 && strings.Contains(body, `"id"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never ready: %d %s", ep, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]int{}
	for i := range 40 {
		line := fmt.Sprintf("alpha w%d %s", i%9, testkeys.UUIDs(4)[i%4])
		for _, w := range examples.Words(line) {
			want[w]++
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(line)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	front := "https://" + endpoints[0]
	served := map[string]int{}
	for w, n := range want {
		var code int
		var body, by string
		for time.Now().Before(deadline.Add(time.Minute)) {
			code, body, by = get(withCert, front+"/stores/counts/keys/"+w, testToken)
			// A refusal between the instances does not heal.
			if code == 200 && strings.Contains(body, fmt.Sprintf(`"value": %d`, n)) || code == http.StatusBadGateway {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if code != 200 || !strings.Contains(body, fmt.Sprintf(`"value": %d`, n)) {
			t.Fatalf("%q: %d %s, want %d", w, code, body, n)
		}
		served[by]++
		for _, c := range []struct {
			cl    *http.Client
			token string
			code  int
		}{{withCert, "", 401}, {withCert, testToken + "x", 401}, {noCert, testToken, 403}} {
			if code, body, _ := get(c.cl, front+"/stores/counts/keys/"+w, c.token); code != c.code || strings.Contains(body, `"value"`) {
				t.Errorf("%q without the credentials: %d %s, want %d", w, code, body, c.code)
			}
		}
	}
	if served[endpoints[0]] == 0 || served[endpoints[1]] == 0 {
		t.Errorf("served by %v: want both instances (some keys forwarded to %s)", served, endpoints[1])
	}
}

func mustKeyPair(t *testing.T, cert, key string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
