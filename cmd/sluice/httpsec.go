package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/pflag"

	"github.com/sluice-streams/sluice/processor/serve"
)

// Keys of the HTTP server's security (README "Securing the HTTP port").
const (
	keyHTTPTLSCert   = "http.tls.cert"
	keyHTTPTLSKey    = "http.tls.key"
	keyHTTPTLSCA     = "http.tls.ca"
	keyHTTPClientCA  = "http.client.ca"
	keyHTTPToken     = "http.token"
	keyHTTPTokenFile = "http.token.file"
)

// addHTTPSecurityFlags adds the flags of the HTTP security keys. The token
// has none, as sasl.password has none: a command line is visible to every
// local user and stays in shell history.
func addHTTPSecurityFlags(f *pflag.FlagSet) {
	f.String("http-tls-cert", "", "http.tls.cert: serve --http over TLS with this PEM certificate `file` (with --http-tls-key); with --http-client-ca it is also the client certificate presented to the other instances")
	f.String("http-tls-key", "", "http.tls.key: PEM `file` of the private key of --http-tls-cert")
	f.String("http-tls-ca", "", "http.tls.ca: PEM `file` of the CAs that sign the other instances' certificates, for forwarded queries (default: the system's, plus --http-client-ca)")
	f.String("http-client-ca", "", "http.client.ca: require, on every endpoint but /healthz and /readyz, a client certificate signed by a CA of this PEM `file` (needs --http-tls-cert)")
	f.String("http-token-file", "", "http.token.file: require the bearer token read from this `file` on every endpoint but /healthz and /readyz (or set SLUICE_HTTP_TOKEN)")
}

// httpSecurity is how --http is served: over TLS or not, and behind which
// credentials.
type httpSecurity struct {
	Cert, Key string // http.tls.cert and http.tls.key
	CA        string // http.tls.ca
	ClientCA  string // http.client.ca
	Token     secret // from http.token or http.token.file
	TokenFile string

	server    *tls.Config // nil: plain HTTP
	peer      *tls.Config // for forwarded queries; nil: plain HTTP
	clientCAs *x509.CertPool
}

// loadHTTPSecurity resolves the HTTP security keys, reading and checking
// the files at start, so that a bad certificate fails the start and not
// the first request.
func (r *resolver) loadHTTPSecurity() httpSecurity {
	h := httpSecurity{
		Cert:      r.str(keyHTTPTLSCert),
		Key:       r.str(keyHTTPTLSKey),
		CA:        r.str(keyHTTPTLSCA),
		ClientCA:  r.str(keyHTTPClientCA),
		TokenFile: r.str(keyHTTPTokenFile),
	}
	token := r.secretValue(keyHTTPToken)
	switch {
	case token != "" && h.TokenFile != "":
		r.conflict(keyHTTPToken, keyHTTPTokenFile)
	case h.TokenFile != "":
		token = r.readSecretFile(keyHTTPTokenFile, h.TokenFile)
	}
	h.Token = secret(token)
	failed := len(r.errs)
	switch {
	case h.Cert != "" && h.Key == "", h.Key != "" && h.Cert == "":
		r.bad = append(r.bad, keyHTTPTLSCert, keyHTTPTLSKey)
		r.errs = append(r.errs, fmt.Errorf("%s and %s go together (from %s and %s): TLS needs the certificate and its key",
			keyHTTPTLSCert, keyHTTPTLSKey, r.source(keyHTTPTLSCert), r.source(keyHTTPTLSKey)))
	case h.Cert == "":
		// Client certificates and the peers' CAs only mean something
		// over TLS; ignored, they would leave the port open.
		for _, k := range []struct{ key, val string }{{keyHTTPClientCA, h.ClientCA}, {keyHTTPTLSCA, h.CA}} {
			if k.val != "" {
				r.bad = append(r.bad, k.key)
				r.errs = append(r.errs, fmt.Errorf("%s is set (from %s) but %s is not: it needs TLS (%s and %s)",
					k.key, r.source(k.key), keyHTTPTLSCert, keyHTTPTLSCert, keyHTTPTLSKey))
			}
		}
	}
	if len(r.errs) > failed || h.Cert == "" {
		return h
	}

	cert, err := tls.LoadX509KeyPair(h.Cert, h.Key)
	if err != nil {
		r.bad = append(r.bad, keyHTTPTLSCert, keyHTTPTLSKey)
		r.errs = append(r.errs, fmt.Errorf("invalid %s %s with %s %s: %w", keyHTTPTLSCert, h.Cert, keyHTTPTLSKey, h.Key, err))
		return h
	}
	h.server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	h.peer = &tls.Config{MinVersion: tls.VersionTLS12}
	if h.CA != "" {
		h.peer.RootCAs = r.readPool(keyHTTPTLSCA, h.CA, nil)
	}
	if h.ClientCA != "" {
		h.clientCAs = r.readPool(keyHTTPClientCA, h.ClientCA, nil)
		// A probe without a certificate must still reach /healthz: the
		// certificate is checked by the guard, and one of another CA
		// fails the handshake.
		h.server.ClientAuth, h.server.ClientCAs = tls.VerifyClientCertIfGiven, h.clientCAs
		// The instance presents its own certificate to the others,
		// which check it against the same CA: a certificate that
		// cannot be a client certificate fails here, not at the first
		// forwarded query.
		h.peer.Certificates = []tls.Certificate{cert}
		if h.CA == "" {
			sys, err := x509.SystemCertPool()
			if err != nil {
				sys = x509.NewCertPool()
			}
			h.peer.RootCAs = r.readPool(keyHTTPClientCA, h.ClientCA, sys)
		}
		if h.clientCAs != nil {
			r.checkClientCert(h.Cert, cert, h.clientCAs)
		}
	}
	return h
}

// readPool adds the PEM certificates of path to pool (a new pool if nil).
func (r *resolver) readPool(key, path string, pool *x509.CertPool) *x509.CertPool {
	data, err := os.ReadFile(path)
	if err != nil {
		r.fail(key, path, err)
		return nil
	}
	if pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		r.fail(key, path, errors.New("no PEM certificate in the file"))
		return nil
	}
	return pool
}

// checkClientCert reports the instance's certificate if the other
// instances would refuse it as a client certificate.
func (r *resolver) checkClientCert(path string, cert tls.Certificate, pool *x509.CertPool) {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		r.fail(keyHTTPTLSCert, path, err)
		return
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		r.fail(keyHTTPTLSCert, path, fmt.Errorf(
			"with %s, this certificate is the instance's client certificate towards the others, and it does not verify against %s for client authentication (it needs extended key usage clientAuth too): %w",
			keyHTTPClientCA, keyHTTPClientCA, err))
	}
}

// tls reports whether the HTTP port serves TLS.
func (h httpSecurity) tls() bool { return h.server != nil }

// guarded reports whether the endpoints need credentials.
func (h httpSecurity) guarded() bool { return h.Token != "" || h.clientCAs != nil }

// serveOpts are the endpoints' options for h: the credentials they require,
// which forwarded queries present too, and TLS towards the other
// instances.
func (h httpSecurity) serveOpts() []serve.Opt {
	var opts []serve.Opt
	if h.Token != "" {
		opts = append(opts, serve.BearerToken(h.Token.reveal()))
	}
	if h.clientCAs != nil {
		opts = append(opts, serve.ClientCAs(h.clientCAs))
	}
	if h.peer != nil {
		opts = append(opts, serve.PeerTLS(h.peer))
	}
	return opts
}

// listener wraps ln in TLS when h serves it.
func (h httpSecurity) listener(ln net.Listener) net.Listener {
	if h.server == nil {
		return ln
	}
	return tls.NewListener(ln, h.server)
}

// warnExposed logs what an operator should know about serving on addr: a
// port that other hosts reach, open to anyone, or with a token that
// travels in clear. Allowed (a private network may be trusted), but said.
func (h httpSecurity) warnExposed(addr net.Addr, log *slog.Logger) {
	if h.tls() || h.guarded() {
		log.Info("http secured", "tls", h.tls(), "token", h.Token != "", "client_ca", h.ClientCA)
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return
	}
	switch {
	case !h.guarded():
		log.Warn("http: serving a non-loopback address without credentials: whoever reaches it reads the stores, the dead letters and the metrics; set SLUICE_HTTP_TOKEN or http.token.file, or --http-client-ca with --http-tls-cert",
			"addr", addr.String())
	case !h.tls():
		log.Warn("http: serving a non-loopback address without TLS: the token travels in clear; set --http-tls-cert and --http-tls-key",
			"addr", addr.String())
	}
}

// tokenValue is what http.token itself holds (masked when printed):
// nothing when the token came from http.token.file.
func tokenValue(h httpSecurity) string {
	if h.TokenFile != "" {
		return ""
	}
	return h.Token.reveal()
}
