package serve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testkeys"
)

// secretBody is what the guarded handler of the unit tests answers: it
// must never show in a refusal.
const secretBody = "state: the=3"

func secretHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, secretBody) })
}

var quiet = slog.New(slog.DiscardHandler)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func do(t *testing.T, cl *http.Client, method, url string, hdr map[string]string, form url.Values) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// headerSafe reports whether tok can travel in an HTTP header: no control
// characters (HTTP refuses them), no spaces at either end (HTTP drops them).
func headerSafe(tok string) bool {
	for _, b := range []byte(tok) {
		if b < 0x20 || b == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(tok) == tok
}

// TestGuardToken: behind BearerToken, only the exact token passes, as a
// header or as the cookie that /login sets; /healthz and /readyz pass
// without; a refusal shows nothing of what the handler serves; a browser is
// sent to /login and back. Tokens of every length and shape. Negative
// control: without credentials Guard is the handler itself, and the same
// requests get the state.
func TestGuardToken(t *testing.T) {
	tokens := append(testkeys.Lengths()[1:], testkeys.UUIDs(2)...)
	for i, tok := range tokens {
		srv := httptest.NewServer(Guard(secretHandler(), BearerToken(tok)))
		bearer := func(s string) map[string]string { return map[string]string{"Authorization": "Bearer " + s} }
		if headerSafe(tok) && strings.TrimSpace(tok) != "" {
			if resp, body := do(t, noRedirect, "GET", srv.URL+"/tasks", bearer(tok), nil); resp.StatusCode != 200 || body != secretBody {
				t.Errorf("token %d (%q): %d %q", i, tok, resp.StatusCode, body)
			}
			// A prefix or an extension of the token is not the token.
			for _, wrong := range []string{tok[:len(tok)-1], tok + "x", "x" + tok} {
				if !headerSafe(wrong) {
					continue
				}
				if resp, body := do(t, noRedirect, "GET", srv.URL+"/tasks", bearer(wrong), nil); resp.StatusCode != 401 || strings.Contains(body, "the=3") {
					t.Errorf("token %d, presented %q: %d %q", i, wrong, resp.StatusCode, body)
				}
			}
		}
		// Through the form, any token signs in, control characters and
		// all (what the form can carry, an environment variable can).
		resp, _ := do(t, noRedirect, "POST", srv.URL+"/login", nil, url.Values{"token": {tok}, "next": {"/tasks"}})
		want := 303
		if strings.TrimSpace(tok) == "" {
			want = 401 // an empty token matches nothing
		}
		if resp.StatusCode != want {
			t.Errorf("login with token %d (%q): %d, want %d", i, tok, resp.StatusCode, want)
		}
		srv.Close()
	}

	tok := "s3cr3t-" + testkeys.UUIDs(1)[0]
	srv := httptest.NewServer(Guard(secretHandler(), BearerToken(tok)))
	defer srv.Close()
	for _, c := range []struct {
		name string
		hdr  map[string]string
		code int
	}{
		{"no header", nil, 401},
		{"Bearer", map[string]string{"Authorization": "Bearer " + tok}, 200},
		{"bearer, lower case", map[string]string{"Authorization": "bearer " + tok}, 200},
		{"Basic", map[string]string{"Authorization": "Basic " + tok}, 401},
		{"token alone", map[string]string{"Authorization": tok}, 401},
		{"empty bearer", map[string]string{"Authorization": "Bearer "}, 401},
		{"another token", map[string]string{"Authorization": "Bearer " + tok[:len(tok)-1] + "0"}, 401},
		{"token as a cookie", map[string]string{"Cookie": cookieName + "=" + tok}, 401},
	} {
		resp, body := do(t, noRedirect, "GET", srv.URL+"/stores/counts/keys/the", c.hdr, nil)
		if resp.StatusCode != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, body, c.code)
		}
		if c.code == 401 {
			var e map[string]string
			if strings.Contains(body, "the=3") || json.Unmarshal([]byte(body), &e) != nil || e["error"] == "" ||
				!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: refusal %q (WWW-Authenticate %q): want a JSON error and nothing else", c.name, body, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if resp, body := do(t, noRedirect, "GET", srv.URL+p, nil, nil); resp.StatusCode != 200 || body != secretBody {
			t.Errorf("%s without a token: %d %q", p, resp.StatusCode, body)
		}
	}
	// Paths that only look like the open ones are guarded.
	for _, p := range []string{"/healthz/", "/readyz.json", "/healthzx", "/x/healthz"} {
		if resp, _ := do(t, noRedirect, "GET", srv.URL+p, nil, nil); resp.StatusCode != 401 {
			t.Errorf("%s without a token: %d, want 401", p, resp.StatusCode)
		}
	}

	// A browser: sent to /login with the page it wanted, signs in, is sent
	// back, and its cookie opens every page. A fetch gets the 401.
	nav := map[string]string{"Accept": "text/html,application/xhtml+xml", "Sec-Fetch-Mode": "navigate"}
	resp, _ := do(t, noRedirect, "GET", srv.URL+"/stores/counts/keys?from=a&to=b", nav, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || loc != "/login?next="+url.QueryEscape("/stores/counts/keys?from=a&to=b") {
		t.Errorf("navigation: %d to %q", resp.StatusCode, loc)
	}
	if resp, _ := do(t, noRedirect, "GET", srv.URL+"/", map[string]string{"Accept": "text/html", "Sec-Fetch-Mode": "cors"}, nil); resp.StatusCode != 401 {
		t.Errorf("fetch asking for HTML: %d, want 401", resp.StatusCode)
	}
	resp, page := do(t, noRedirect, "GET", srv.URL+"/login?next=/tasks", nil, nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `name="token"`) || !strings.Contains(page, `value="/tasks"`) || strings.Contains(page, "the=3") {
		t.Errorf("GET /login: %d %s", resp.StatusCode, page)
	}
	resp, page = do(t, noRedirect, "POST", srv.URL+"/login", nil, url.Values{"token": {tok + "x"}, "next": {"/tasks"}})
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 || !strings.Contains(page, "not the one") {
		t.Errorf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	for next, want := range map[string]string{"/tasks": "/tasks", "//evil.example/": "/", "https://evil.example/": "/", "/\\evil.example": "/", "/\t/evil.example": "/", "/x\n/y": "/", "/a/\\/b": "/", "/login": "/", "": "/", "/stores/a?b=c": "/stores/a?b=c"} {
		resp, _ = do(t, noRedirect, "POST", srv.URL+"/login", nil, url.Values{"token": {tok}, "next": {next}})
		if resp.StatusCode != 303 || resp.Header.Get("Location") != want {
			t.Errorf("login, next %q: %d to %q, want %q", next, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	cks := resp.Cookies()
	if len(cks) != 1 || cks[0].Name != cookieName || !cks[0].HttpOnly || cks[0].SameSite != http.SameSiteStrictMode || cks[0].Secure ||
		cks[0].Path != "/" || strings.Contains(cks[0].Value, tok) {
		t.Fatalf("session cookie: %+v", cks)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, body := do(t, browser, "POST", srv.URL+"/login", nav, url.Values{"token": {tok}, "next": {"/tasks"}})
	if resp.StatusCode != 200 || body != secretBody || resp.Request.URL.Path != "/tasks" {
		t.Errorf("login, then back to /tasks: %d %q at %s", resp.StatusCode, body, resp.Request.URL)
	}
	for _, p := range []string{"/", "/tasks", "/stores/counts/keys/the"} {
		if resp, body := do(t, browser, "GET", srv.URL+p, nav, nil); resp.StatusCode != 200 || body != secretBody {
			t.Errorf("%s with the cookie: %d %q", p, resp.StatusCode, body)
		}
	}
	// The cookie of another token (another deployment, or the token
	// rotated) does not open this one.
	other := httptest.NewServer(Guard(secretHandler(), BearerToken(tok+"-rotated")))
	defer other.Close()
	if resp, _ := do(t, noRedirect, "GET", other.URL+"/tasks", map[string]string{"Cookie": cks[0].Name + "=" + cks[0].Value}, nil); resp.StatusCode != 401 {
		t.Errorf("cookie of another token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := do(t, noRedirect, "DELETE", srv.URL+"/login", nil, nil); resp.StatusCode != 405 {
		t.Errorf("DELETE /login: %d", resp.StatusCode)
	}

	// An empty token refuses everything, the empty bearer included.
	empty := httptest.NewServer(Guard(secretHandler(), BearerToken("  ")))
	defer empty.Close()
	for _, h := range []map[string]string{nil, {"Authorization": "Bearer "}, {"Authorization": "Bearer"}} {
		if resp, _ := do(t, noRedirect, "GET", empty.URL+"/tasks", h, nil); resp.StatusCode != 401 {
			t.Errorf("empty token, %v: %d", h, resp.StatusCode)
		}
	}

	// Negative control: no credentials, no guard.
	open := httptest.NewServer(Guard(secretHandler()))
	defer open.Close()
	if resp, body := do(t, noRedirect, "GET", open.URL+"/stores/counts/keys/the", nil, nil); resp.StatusCode != 200 || body != secretBody {
		t.Errorf("unguarded: %d %q", resp.StatusCode, body)
	}
}

// TestGuardTokenAndCert: with both a token and a client CA, a request needs
// both; the cookie is Secure over TLS.
func TestGuardTokenAndCert(t *testing.T) {
	certs := writeCerts(t)
	pool, err := certs.Pool()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(Guard(secretHandler(), BearerToken("tok"), ClientCAs(pool)))
	srvTLS, err := certs.ServerTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	srvTLS.ClientAuth, srvTLS.ClientCAs = tls.VerifyClientCertIfGiven, pool
	srv.TLS = srvTLS
	srv.StartTLS()
	defer srv.Close()
	withCert, noCert := tlsClient(t, certs, true), tlsClient(t, certs, false)
	bearer := map[string]string{"Authorization": "Bearer tok"}
	for _, c := range []struct {
		name string
		cl   *http.Client
		hdr  map[string]string
		code int
	}{
		{"both", withCert, bearer, 200},
		{"certificate only", withCert, nil, 401},
		{"token only", noCert, bearer, 403},
		{"neither", noCert, nil, 403},
	} {
		resp, body := do(t, c.cl, "GET", srv.URL+"/tasks", c.hdr, nil)
		if resp.StatusCode != c.code || (c.code != 200) == (body == secretBody) {
			t.Errorf("%s: %d %q, want %d", c.name, resp.StatusCode, body, c.code)
		}
	}
	stay := *withCert
	stay.CheckRedirect = noRedirect.CheckRedirect
	resp, _ := do(t, &stay, "POST", srv.URL+"/login", nil, url.Values{"token": {"tok"}})
	if cks := resp.Cookies(); resp.StatusCode != 303 || len(cks) != 1 || !cks[0].Secure {
		t.Errorf("login over TLS: %d, cookies %+v", resp.StatusCode, cks)
	}
	// The login itself needs the certificate.
	if resp, _ := do(t, noCert, "POST", srv.URL+"/login", nil, url.Values{"token": {"tok"}}); resp.StatusCode != 403 {
		t.Errorf("login without the certificate: %d, want 403", resp.StatusCode)
	}
	if resp, _ := do(t, noCert, "GET", srv.URL+"/healthz", nil, nil); resp.StatusCode != 200 {
		t.Errorf("/healthz without certificate nor token: %d", resp.StatusCode)
	}
}

// tlsClient trusts the authority of certs and, with cert, presents its peer
// certificate (valid for client authentication).
func tlsClient(t *testing.T, certs broker.Certs, cert bool) *http.Client {
	t.Helper()
	pool, err := certs.Pool()
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert {
		c, err := tls.LoadX509KeyPair(certs.PeerCert, certs.PeerKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// twoInstances starts wordcount on two instances served as s, produces
// words and waits until every record is processed and both instances are
// ready. It returns the instances and the word counts.
func twoInstances(t *testing.T, appID string, s served, cl *http.Client, scheme string, hdr map[string]string) ([]*queryInstance, map[string]int64) {
	t.Helper()
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	in, out := appID+"-lines", appID+"-counts"
	for _, tp := range []string{in, out} {
		if err := broker.CreateTopic(context.Background(), b.Addrs(), tp, 4, nil); err != nil {
			t.Fatal(err)
		}
	}
	insts := []*queryInstance{
		startServedInstance(t, b.Addrs(), appID, t.TempDir(), in, out, s),
		startServedInstance(t, b.Addrs(), appID, t.TempDir(), in, out, s),
	}
	waitSpread(t, insts, 8)
	var lines []string
	for i := range 60 {
		lines = append(lines, fmt.Sprintf("the w%d %s", i%13, testkeys.UUIDs(3)[i%3]))
	}
	want, records := produceWords(t, b.Addrs(), in, lines)
	waitFor(t, "every record to be processed", time.Minute, func() bool {
		return insts[0].app.Stats().Processed.Load()+insts[1].app.Stats().Processed.Load() >= records
	})
	// Ready over HTTP too, as a probe sees it: without credentials.
	for _, qi := range insts {
		resp, err := request(cl, scheme+"://"+qi.addr+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := readReply(resp); r.code != 200 || !strings.Contains(r.body, `"ready": true`) {
			t.Fatalf("/readyz without credentials: %d %s", r.code, r.body)
		}
	}
	return insts, want
}

// remoteWord returns a word of want whose task the first instance does not
// run.
func remoteWord(t *testing.T, insts []*queryInstance, want map[string]int64) string {
	t.Helper()
	for w := range want {
		loc, err := insts[0].app.Locate("counts", []byte(w))
		if err != nil {
			t.Fatal(err)
		}
		if !loc.Local && loc.Endpoint == insts[1].addr {
			return w
		}
	}
	t.Fatal("every word is owned by the first instance")
	return ""
}

// checkProtected asks inst for the endpoints that serve state without
// credentials (cl, hdr): each must be refused with code and show nothing of
// the state (the words).
func checkProtected(t *testing.T, cl *http.Client, base string, hdr map[string]string, code int, words map[string]int64) {
	t.Helper()
	for _, p := range []string{"/tasks", "/topology", "/stores/counts/keys/the", "/stores/counts/keys", "/stores/nope/keys", "/", "/nothing-here"} {
		resp, err := request(cl, base+p, hdr)
		if err != nil {
			t.Fatal(err)
		}
		r := readReply(resp)
		if r.code != code || r.servedBy != "" {
			t.Errorf("%s: %d (served by %q) %s, want %d", p, r.code, r.servedBy, r.body, code)
		}
		for w := range words {
			// Short words ("the") are in any English message.
			if len(w) >= 8 && strings.Contains(r.body, w) {
				t.Errorf("%s refused, but its body shows the word %q: %s", p, w, r.body)
			}
		}
		if strings.Contains(r.body, "counts-repartition") || strings.Contains(r.body, `"state"`) {
			t.Errorf("%s refused, but its body shows the app: %s", p, r.body)
		}
	}
}

// checkServed asks inst, with credentials, for a key it owns, a key the
// other instance owns (forwarded with the credentials) and every key (fanned
// out).
func checkServed(t *testing.T, cl *http.Client, scheme string, hdr map[string]string, insts []*queryInstance, want map[string]int64) {
	t.Helper()
	base := scheme + "://" + insts[0].addr
	remote := remoteWord(t, insts, want)
	for _, w := range []string{"the", remote} {
		r := getSettledWith(t, cl, base+"/stores/counts/keys/"+url.PathEscape(w), hdr)
		var kr keyReply
		if r.code != 200 || json.Unmarshal([]byte(r.body), &kr) != nil || string(kr.Value) != fmt.Sprint(want[w]) {
			t.Errorf("%q: %d %s, want %d", w, r.code, r.body, want[w])
		}
		if w == remote && r.servedBy != insts[1].addr {
			t.Errorf("%q served by %q, want the owner %s", w, r.servedBy, insts[1].addr)
		}
	}
	r := getSettledWith(t, cl, base+"/stores/counts/keys?limit=1000", hdr)
	var p pageReply
	if r.code != 200 || json.Unmarshal([]byte(r.body), &p) != nil || len(p.Entries) != len(want) ||
		r.servedBy != strings.Join(sortedAddrs(insts), ",") {
		t.Errorf("all keys: %d (%d entries of %d, served by %q) %.200s", r.code, len(p.Entries), len(want), r.servedBy, r.body)
	}
	for _, path := range []string{"/tasks", "/topology"} {
		resp, err := request(cl, base+path, hdr)
		if err != nil {
			t.Fatal(err)
		}
		if r := readReply(resp); r.code != 200 {
			t.Errorf("%s: %d %s", path, r.code, r.body)
		}
	}
}

func sortedAddrs(insts []*queryInstance) []string {
	a, b := insts[0].addr, insts[1].addr
	if b < a {
		a, b = b, a
	}
	return []string{a, b}
}

// TestRegisterBehindToken: two instances behind one token. Without it, or
// with another, every endpoint but /healthz and /readyz is refused and
// shows nothing of the state; with it, keys are answered, those of the other
// instance forwarded with the token; a browser signs in and its cookie
// opens the pages. A front whose token the owner does not share gets a
// clear 502, not the owner's 401. Negative control: the same app served
// without credentials answers the same requests.
func TestRegisterBehindToken(t *testing.T) {
	const tok = "tok-1f0e"
	bearer := map[string]string{"Authorization": "Bearer " + tok}
	insts, want := twoInstances(t, "auth-tok", served{opts: []Opt{BearerToken(tok)}}, http.DefaultClient, "http", nil)
	base := "http://" + insts[0].addr
	checkProtected(t, http.DefaultClient, base, nil, 401, want)
	checkProtected(t, http.DefaultClient, base, map[string]string{"Authorization": "Bearer tok-1f0f"}, 401, want)
	checkServed(t, http.DefaultClient, "http", bearer, insts, want)

	// The console's way in: the login form, then the cookie.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	nav := map[string]string{"Accept": "text/html", "Sec-Fetch-Mode": "navigate"}
	resp, page := do(t, noRedirect, "GET", base+"/", nav, nil)
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/login?next=%2F" {
		t.Errorf("GET / unauthenticated: %d to %q %s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	resp, _ = do(t, browser, "POST", base+"/login", nil, url.Values{"token": {tok}, "next": {"/tasks"}})
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/tasks" {
		t.Fatalf("login: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	if resp, body := do(t, browser, "GET", base+"/tasks", nil, nil); resp.StatusCode != 200 || !strings.Contains(body, `"state": "running"`) {
		t.Errorf("/tasks with the cookie: %d %s", resp.StatusCode, body)
	}
	// The console is at /: with the cookie, the page and its modules,
	// never the login.
	cookie := map[string]string{"Cookie": jar.Cookies(resp.Request.URL)[0].String()}
	if resp, body := do(t, noRedirect, "GET", base+"/", cookie, nil); resp.StatusCode != 200 || !strings.Contains(body, "console/") {
		t.Errorf("/ with the cookie: %d %.200s", resp.StatusCode, body)
	}
	if resp, body := do(t, noRedirect, "GET", base+"/console/app.js", cookie, nil); resp.StatusCode != 200 {
		t.Errorf("/console/app.js with the cookie: %d %.200s", resp.StatusCode, body)
	}
	// Without it, the page is the login, and its module is refused.
	if resp, _ := do(t, noRedirect, "GET", base+"/console/app.js", nil, nil); resp.StatusCode != 401 {
		t.Errorf("/console/app.js without credentials: %d, want 401", resp.StatusCode)
	}
	if resp, body := do(t, browser, "GET", base+"/stores/counts/keys/"+remoteWord(t, insts, want), nil, nil); resp.StatusCode != 200 {
		t.Errorf("a forwarded key with the cookie: %d %s", resp.StatusCode, body)
	}

	// A front with another token: it lets its own token in, the owner
	// refuses what it forwards, and the answer says so.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer serveOn(t, ln, insts[0].app, quiet, BearerToken("tok-other"))()
	other := "http://" + ln.Addr().String()
	r := getSettledWith(t, http.DefaultClient, other+"/stores/counts/keys/"+url.PathEscape(remoteWord(t, insts, want)), map[string]string{"Authorization": "Bearer tok-other"})
	if r.code != http.StatusBadGateway || !strings.Contains(r.body, "refused this instance's credentials (401") || !strings.Contains(r.body, insts[1].addr) {
		t.Errorf("forwarded with a token the owner does not share: %d %s", r.code, r.body)
	}
	r = getSettledWith(t, http.DefaultClient, other+"/stores/counts/keys", map[string]string{"Authorization": "Bearer tok-other"})
	if r.code != http.StatusBadGateway || !strings.Contains(r.body, "refused this instance's credentials") {
		t.Errorf("fanned out with a token the owner does not share: %d %s", r.code, r.body)
	}

	// Negative control: the same app without a guard answers.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer serveOn(t, ln, insts[1].app, quiet)()
	if r := httpGet(t, ln.Addr().String(), "/tasks", nil); r.code != 200 || !strings.Contains(r.body, "running") {
		t.Errorf("unguarded: %d %s", r.code, r.body)
	}
}

// TestRegisterBehindClientCerts: two instances serving TLS that require a
// client certificate of their CA, and forward with their own. Without a
// certificate: 403 and nothing of the state; /healthz and /readyz open;
// with one: answers, forwarded ones included. A certificate of another CA,
// or one not made for client authentication, is refused at the handshake
// (or not even sent: 403). An instance that forwards without a certificate
// gets a clear 502. Negative control: the same app served over TLS without
// the guard answers a client without a certificate.
func TestRegisterBehindClientCerts(t *testing.T) {
	certs, rogue := writeCerts(t), writeCerts(t)
	serverTLS, peerTLS, pool, err := certs.PeerTLS()
	if err != nil {
		t.Fatal(err)
	}
	s := served{tls: serverTLS, opts: []Opt{ClientCAs(pool), PeerTLS(peerTLS)}}
	noCert, withCert := tlsClient(t, certs, false), tlsClient(t, certs, true)
	insts, want := twoInstances(t, "auth-mtls", s, noCert, "https", nil)
	base := "https://" + insts[0].addr
	checkProtected(t, noCert, base, nil, 403, want)
	checkServed(t, withCert, "https", nil, insts, want)
	if resp, err := request(noCert, base+"/healthz", nil); err != nil || readReply(resp).code != 200 {
		t.Errorf("/healthz without a certificate: %v", err)
	}

	// Plain HTTP to the TLS port: refused by the server, no state.
	if r := httpGet(t, insts[0].addr, "/tasks", nil); r.code != 400 || strings.Contains(r.body, "running") {
		t.Errorf("plain HTTP: %d %s", r.code, r.body)
	}
	// A certificate of another CA (of the same name, so the client sends
	// it), or of this CA but not for client authentication: the handshake
	// fails, nothing is served.
	rogueCert, err := tls.LoadX509KeyPair(rogue.PeerCert, rogue.PeerKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, cert := range map[string]tls.Certificate{"another CA": rogueCert, "server-only": mustPair(t, certs.ServerCert, certs.ServerKey)} {
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
		resp, err := request(cl, base+"/tasks", nil)
		if err == nil {
			r := readReply(resp)
			t.Errorf("certificate of %s: %d %s, want the handshake refused", name, r.code, r.body)
		} else if !strings.Contains(err.Error(), "tls") {
			t.Errorf("certificate of %s: %v, want a TLS error", name, err)
		}
	}

	// A front that forwards without a client certificate.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer serveOn(t, tls.NewListener(ln, serverTLS), insts[0].app, quiet, ClientCAs(pool), PeerTLS(&tls.Config{RootCAs: pool}))()
	r := getSettledWith(t, withCert, "https://"+ln.Addr().String()+"/stores/counts/keys/"+url.PathEscape(remoteWord(t, insts, want)), nil)
	if r.code != http.StatusBadGateway || !strings.Contains(r.body, "refused this instance's credentials (403") {
		t.Errorf("forwarded without a certificate: %d %s", r.code, r.body)
	}

	// Negative control: over TLS without the guard, no certificate needed.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer serveOn(t, tls.NewListener(ln, serverTLS), insts[1].app, quiet)()
	if r := getSettledWith(t, noCert, "https://"+ln.Addr().String()+"/tasks", nil); r.code != 200 || !strings.Contains(r.body, "running") {
		t.Errorf("unguarded over TLS: %d %s", r.code, r.body)
	}
}

// writeCerts writes a fresh authority and its certificates.
func writeCerts(t *testing.T) broker.Certs {
	t.Helper()
	c, err := broker.WriteCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustPair(t *testing.T, cert, key string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGuardVerifiesItself: a server that only requests certificates
// (tls.RequestClientCert, no verification) is still safe behind ClientCAs:
// the guard verifies the chain itself.
func TestGuardVerifiesItself(t *testing.T) {
	certs, rogue := writeCerts(t), writeCerts(t)
	pool, err := certs.Pool()
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := &tls.Config{Certificates: []tls.Certificate{mustPair(t, certs.ServerCert, certs.ServerKey)}, ClientAuth: tls.RequestClientCert}
	start := func(h http.Handler) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.TLS = srvTLS
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv
	}
	srv := start(Guard(secretHandler(), ClientCAs(pool)))
	// A nil pool verifies nothing (x509 would read it as the system's
	// roots; a guard that ignored it would let everything through).
	nilPool := start(Guard(secretHandler(), ClientCAs(nil)))
	for _, c := range []struct {
		name string
		cert tls.Certificate
		code int
	}{
		{"its CA", mustPair(t, certs.ClientCert, certs.ClientKey), 200},
		{"another CA", mustPair(t, rogue.ClientCert, rogue.ClientKey), 403},
		{"server-only", mustPair(t, certs.ServerCert, certs.ServerKey), 403},
		{"its CA again", mustPair(t, certs.ClientCert, certs.ClientKey), 200},
	} {
		cert := c.cert
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs:              pool,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil },
		}}}
		// Twice: the second time from the guard's cache of verified
		// chains, which must remember only what verified.
		for range 2 {
			if resp, body := do(t, cl, "GET", srv.URL+"/tasks", nil, nil); resp.StatusCode != c.code || (c.code == 200) != (body == secretBody) {
				t.Errorf("%s: %d %q, want %d", c.name, resp.StatusCode, body, c.code)
			}
		}
		if resp, _ := do(t, cl, "GET", nilPool.URL+"/tasks", nil, nil); resp.StatusCode != 403 {
			t.Errorf("%s, nil pool: %d, want 403", c.name, resp.StatusCode)
		}
	}
}

// BenchmarkGuard measures what the guard adds to a request: the token as a
// header or a cookie, and the client certificate's chain verified.
func BenchmarkGuard(b *testing.B) {
	certs, err := broker.WriteCerts(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	pool, err := certs.Pool()
	if err != nil {
		b.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		b.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		b.Fatal(err)
	}
	const tok = "a-token-of-some-length-0123456789"
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	var cookie string
	{
		rec := httptest.NewRecorder()
		login := httptest.NewRequest("POST", "/login", strings.NewReader("token="+tok))
		login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		Guard(ok, BearerToken(tok)).ServeHTTP(rec, login)
		cookie = rec.Result().Cookies()[0].String()
	}
	for _, c := range []struct {
		name string
		h    http.Handler
		set  func(*http.Request)
	}{
		{"none", ok, func(*http.Request) {}},
		{"bearer", Guard(ok, BearerToken(tok)), func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }},
		{"cookie", Guard(ok, BearerToken(tok)), func(r *http.Request) { r.Header.Set("Cookie", cookie) }},
		{"client-cert", Guard(ok, ClientCAs(pool)), func(r *http.Request) {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/stores/counts/keys/the", nil)
			c.set(r)
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.h.ServeHTTP(rec, r)
				if rec.Code != http.StatusNoContent {
					b.Fatalf("%d", rec.Code)
				}
			}
		})
	}
}

// TestCertCache: a chain is remembered until certTTL or its leaf's expiry,
// whichever is first, and only that chain; the cache stays bounded.
func TestCertCache(t *testing.T) {
	var c certCache
	now := time.Unix(1_700_000_000, 0)
	k1, k2 := [32]byte{1}, [32]byte{2}
	if c.ok(k1, now) {
		t.Fatal("hit in an empty cache")
	}
	c.add(k1, now, now.Add(time.Hour))
	c.add(k2, now, now.Add(10*time.Second)) // expires before the TTL
	for _, tc := range []struct {
		key  [32]byte
		at   time.Duration
		want bool
	}{
		{k1, 0, true}, {k1, certTTL - 1, true}, {k1, certTTL, false},
		{k2, 9 * time.Second, true}, {k2, 10 * time.Second, false},
		{[32]byte{3}, 0, false},
	} {
		if got := c.ok(tc.key, now.Add(tc.at)); got != tc.want {
			t.Errorf("key %x at +%v: %v, want %v", tc.key[0], tc.at, got, tc.want)
		}
	}
	for i := range certEntries + 1 {
		c.add([32]byte{byte(i), byte(i >> 8), 9}, now, now.Add(time.Hour))
	}
	if n := len(c.mu.until); n > certEntries {
		t.Errorf("%d entries, want at most %d", n, certEntries)
	}
}
