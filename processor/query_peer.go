package processor

import (
	"crypto/tls"
	"strings"
)

// The owners that typed queries ask may serve their endpoints behind
// credentials (serve.BearerToken, serve.ClientCAs, over TLS): these options
// give the typed queries the same credentials that the endpoints' own
// forwarding presents (serve.PeerTLS, serve.BearerToken).

// QueryPeerTLS asks the owners over https with cfg: its RootCAs verify their
// server certificates, its Certificates are the client certificate
// presented to them. The config is set on a clone of QueryClient's
// transport when that is an *http.Transport (the default). Default: plain
// HTTP.
func QueryPeerTLS(cfg *tls.Config) QueryOpt {
	return queryOpt(func(c *queryConfig) { c.peerTLS = cfg })
}

// QueryBearerToken sends token to the owners (Authorization: Bearer), as
// their endpoints require with serve.BearerToken. Default: none.
func QueryBearerToken(token string) QueryOpt {
	return queryOpt(func(c *queryConfig) { c.token = strings.TrimSpace(token) })
}
