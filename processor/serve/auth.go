package serve

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluice-streams/sluice/internal/iqwire"
)

// The endpoints serve store contents, dead-letter metadata and metrics, so
// an operator can put them behind credentials: a bearer token, a client
// certificate, or both (then both are required). /healthz and /readyz stay
// open, because the probes of an orchestrator carry neither; /login is the
// page where a browser trades the token for a cookie, because a page
// navigation cannot carry an Authorization header.

const (
	// cookieName holds the session of the console. Cookies do not tell
	// ports apart, so instances on one host share it: it is accepted by
	// every instance that has the same token.
	cookieName = "sluice_session"
	loginPath  = "/login"
	// maxLoginForm bounds a POST /login body.
	maxLoginForm = 64 << 10
)

// auth holds the credentials the endpoints require and the ones forwarded
// queries present to the other instances.
type auth struct {
	tokenSet bool
	token    string
	// tokenSum and cookie are what requests are compared against, in
	// constant time.
	tokenSum [sha256.Size]byte
	cookie   string
	casSet   bool           // ClientCAs given: a client certificate is required
	cas      *x509.CertPool // nil with casSet: none verifies (fail closed)
	verified *certCache     // chains that verified against cas lately
	peerTLS  *tls.Config    // nil: peers are reached over plain HTTP
}

// on reports whether any credential is required.
func (a *auth) on() bool { return a.tokenSet || a.casSet }

// BearerToken requires token on every endpoint except /healthz, /readyz and
// /login: as the header `Authorization: Bearer <token>`, or as the cookie
// that POST /login sets for a browser (HttpOnly, SameSite=Strict, Secure
// over TLS; its value is derived from the token, not the token itself).
// Queries forwarded to other instances carry the token, so every instance
// of an application needs the same one. An empty token matches nothing:
// every protected request is refused. Spaces at either end are not part
// of the token (HTTP drops them from a header). Default: no token.
func BearerToken(token string) Opt {
	token = strings.TrimSpace(token)
	return opt(func(c *config) {
		c.auth.tokenSet, c.auth.token = true, token
		c.auth.tokenSum = sha256.Sum256([]byte(token))
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write([]byte("sluice console session v1"))
		c.auth.cookie = hex.EncodeToString(mac.Sum(nil))
	})
}

// ClientCAs requires, on every endpoint except /healthz and /readyz, a
// client certificate that verifies against pool for client
// authentication. The server's TLS config must ask for one: ClientAuth
// tls.VerifyClientCertIfGiven with ClientCAs pool, so that a probe without
// a certificate still reaches /healthz while a certificate of another CA
// fails the handshake. The guard verifies the chain again itself, so a
// server that only requests certificates (tls.RequestClientCert) is safe
// too. A nil pool verifies nothing: every protected request is refused
// (x509 would read nil as the system's roots). Default: no client
// certificate required.
func ClientCAs(pool *x509.CertPool) Opt {
	return opt(func(c *config) { c.auth.casSet, c.auth.cas, c.auth.verified = true, pool, &certCache{} })
}

// PeerTLS makes queries forwarded to other instances go over https with
// cfg: its RootCAs verify their server certificates, its Certificates are
// the client certificate presented to them (needed when they require
// ClientCAs). Every instance of an application must then serve TLS. The
// config is set on a clone of Client's transport when that is an
// *http.Transport (the default); another RoundTripper is used as it is.
// Default: plain HTTP.
func PeerTLS(cfg *tls.Config) Opt { return opt(func(c *config) { c.auth.peerTLS = cfg }) }

// peer is how forwarded queries reach the other instances.
func (c config) peer() iqwire.Peer { return iqwire.NewPeer(c.client, c.auth.peerTLS, c.auth.token) }

// Guard wraps h so that every request except /healthz and /readyz needs
// the credentials of opts (BearerToken, ClientCAs), and serves /login when
// a token is required. Without either it returns h itself. Register guards
// the endpoints it mounts when given credentials; Guard is for a program
// that wants its own endpoints on the same server behind them as well.
func Guard(h http.Handler, opts ...Opt) http.Handler {
	c := newConfig(opts)
	if !c.auth.on() {
		return h
	}
	return &guard{a: c.auth, next: h}
}

type guard struct {
	a    auth
	next http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		g.next.ServeHTTP(w, r)
		return
	}
	if g.a.casSet && !g.a.certOK(r) {
		// No login can fix this: the certificate comes with the
		// connection.
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "serve: a client certificate signed by the configured CA is required"})
		return
	}
	if r.URL.Path == loginPath && g.a.tokenSet {
		g.login(w, r)
		return
	}
	if g.a.tokenSet && !g.a.tokenOK(r) {
		if navigation(r) {
			http.Redirect(w, r, loginPath+"?next="+url.QueryEscape(localPath(r.URL.RequestURI())), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "serve: a bearer token is required (Authorization: Bearer <token>, or sign in at /login)"})
		return
	}
	g.next.ServeHTTP(w, r)
}

// tokenOK reports whether r carries the token, in its Authorization header
// or in the session cookie. Both compare in constant time: the header as
// hashes (so that its length does not leak), the cookie as the HMAC it is.
func (a *auth) tokenOK(r *http.Request) bool {
	if a.token == "" {
		return false
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
			if subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1 {
				return true
			}
		}
	}
	// Several cookies of the name may come (a path or domain of another
	// app): any one that matches is enough.
	for _, ck := range r.CookiesNamed(cookieName) {
		if subtle.ConstantTimeCompare([]byte(ck.Value), []byte(a.cookie)) == 1 {
			return true
		}
	}
	return false
}

// certOK reports whether the connection presented a client certificate
// that verifies against the pool for client authentication.
func (a *auth) certOK(r *http.Request) bool {
	if a.cas == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return false
	}
	certs := r.TLS.PeerCertificates
	h := sha256.New()
	for _, c := range certs {
		h.Write(c.Raw)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	now := time.Now()
	if a.verified.ok(key, now) {
		return true
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: a.cas, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return false
	}
	a.verified.add(key, now, certs[0].NotAfter)
	return true
}

// certCache remembers the chains that verified for a while: a verification
// costs about 150 µs (an ECDSA signature per link), against under 1 µs for
// the token, and a client sends the same chain with every request. The
// TLS handshake has already proved that the client holds the leaf's key;
// what is cached is only that the chain leads to the pool, which changes
// with time alone (expiry), so an entry ends at certTTL or at the leaf's
// NotAfter, whichever comes first.
type certCache struct {
	mu struct {
		sync.Mutex
		until map[[sha256.Size]byte]time.Time
	}
}

const (
	certTTL     = time.Minute
	certEntries = 1024 // past it the cache starts over: bounded memory whatever the clients
)

func (c *certCache) ok(key [sha256.Size]byte, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, hit := c.mu.until[key]
	return hit && now.Before(until)
}

func (c *certCache) add(key [sha256.Size]byte, now, notAfter time.Time) {
	until := now.Add(certTTL)
	if notAfter.Before(until) {
		until = notAfter
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.until == nil || len(c.mu.until) >= certEntries {
		c.mu.until = make(map[[sha256.Size]byte]time.Time)
	}
	c.mu.until[key] = until
}

// navigation reports whether r is a browser loading a page (which a
// redirect to /login helps) rather than a script or tool (which wants the
// 401).
func navigation(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if m := r.Header.Get("Sec-Fetch-Mode"); m != "" {
		return m == "navigate"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// localPath returns p if it is a path on this server, else "/": the page
// to go back to after signing in must not lead elsewhere (an open
// redirect). Browsers drop tabs and line breaks from a URL and read a backslash as a
// slash, so "/\t/evil" is "//evil": any of those is refused outright.
func localPath(p string) string {
	bad := strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' })
	if bad || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, loginPath) {
		return "/"
	}
	return p
}

// login serves the sign-in page (GET) and checks the token it posts
// (POST): right, it sets the session cookie and goes back to the page the
// browser came from; wrong, the page again with a 401.
func (g *guard) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		loginPage(w, http.StatusOK, localPath(r.URL.Query().Get("next")), "")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
		if err := r.ParseForm(); err != nil {
			loginPage(w, http.StatusBadRequest, "/", "The form could not be read.")
			return
		}
		next := localPath(r.PostForm.Get("next"))
		sum := sha256.Sum256([]byte(strings.TrimSpace(r.PostForm.Get("token"))))
		if g.a.token == "" || subtle.ConstantTimeCompare(sum[:], g.a.tokenSum[:]) != 1 {
			loginPage(w, http.StatusUnauthorized, next, "That token is not the one this instance was given.")
			return
		}
		http.SetCookie(w, &http.Cookie{
			Name: cookieName, Value: g.a.cookie, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "serve: /login takes GET or POST"})
	}
}

// loginTmpl is the sign-in page: self-contained (no script, no asset from
// elsewhere), light and dark, usable at any width.
var loginTmpl = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>sluice · sign in</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; min-height: 100vh; display: grid; place-items: center; }
form { width: min(22rem, 90vw); display: grid; gap: .75rem; }
input, button { font: inherit; padding: .5rem; }
.error { color: #c62828; }
@media (prefers-color-scheme: dark) { .error { color: #ef9a9a; } }
</style>
</head>
<body>
<main>
<form method="post" action="/login">
<h1>sluice</h1>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
<label for="token">Access token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit">Sign in</button>
</form>
</main>
</body>
</html>
`))

func loginPage(w http.ResponseWriter, code int, next, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page must not be framed (clickjacking) nor cached.
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = loginTmpl.Execute(w, struct{ Next, Error string }{next, msg})
}

// guarded returns the mux that Register mounts its endpoints on: mux
// itself without credentials; with them, a mux of its own that mux reaches
// through the guard, at the catch-all pattern "/". Every endpoint mounted
// there, today's and those added later, is then behind the credentials
// without each one having to remember it; the program's own patterns on
// mux stay its own (Guard covers them too if it wants).
func (c config) guarded(mux *http.ServeMux) *http.ServeMux {
	if !c.auth.on() {
		return mux
	}
	inner := http.NewServeMux()
	mux.Handle("/", &guard{a: c.auth, next: inner})
	return inner
}

// peerRefused answers 502 when the owner a query was forwarded to refused
// this instance's credentials, and reports whether it did. Passed on as it
// came, its 401 would tell the user that their own token is wrong, when it
// is the instances that disagree.
func peerRefused(w http.ResponseWriter, endpoint string, code int) bool {
	if code != http.StatusUnauthorized && code != http.StatusForbidden {
		return false
	}
	writeJSON(w, http.StatusBadGateway, map[string]string{"error": fmt.Sprintf(
		"serve: owner %s refused this instance's credentials (%d %s): every instance of the application needs the same token and a client certificate its CA signed",
		endpoint, code, http.StatusText(code))})
	return true
}
