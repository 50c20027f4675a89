package iqwire

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

const (
	// HeaderServedBy names the instances that served an answer.
	HeaderServedBy = "X-Sluice-Served-By"
	// HeaderForwarded marks a forwarded request, which is never forwarded
	// again, so that routing maps out of date on two instances cannot
	// bounce a query between them.
	HeaderForwarded = "X-Sluice-Forwarded-By"
)

// Entry is one key and its value. Key and Value are the JSON of the
// values the store's serdes decode; RawKey is the key as stored
// (base64url), which is also the paging cursor; RawValue the value as
// stored (standard base64), given when it does not decode or has no JSON
// form, or when the request asked for raw values (raw=true).
type Entry struct {
	Key      json.RawMessage `json:"key"`
	RawKey   string          `json:"raw_key"`
	Value    json.RawMessage `json:"value,omitempty"`
	RawValue string          `json:"raw_value,omitempty"`
}

// KeyResponse answers /stores/{store}/keys/{key}.
type KeyResponse struct {
	Store     string `json:"store"`
	Partition int32  `json:"partition"`
	Task      string `json:"task"`
	Entry
	Windows []Window `json:"windows,omitempty"`
}

// Window is one window of a key in a KeyResponse.
type Window struct {
	Start int64           `json:"start"` // ms since the epoch, inclusive
	End   int64           `json:"end"`   // exclusive
	Value json.RawMessage `json:"value"`
}

// Page answers /stores/{store}/keys.
type Page struct {
	Store   string  `json:"store"`
	Entries []Entry `json:"entries"`
	// Next is the cursor of the next page (pass it as after=), absent on
	// the last page.
	Next string `json:"next,omitempty"`
}

// B64 encodes raw keys and cursors.
var B64 = base64.RawURLEncoding

// DecodeB64 accepts standard and URL-safe base64, padded or not.
func DecodeB64(s string) ([]byte, error) {
	s = strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(s), "=")
	return B64.DecodeString(s)
}

// PathKey is a stored key as a path segment of /stores/{store}/keys/{key}
// with key_encoding=base64. A path segment cannot be empty, so the empty
// key is "=": its padded base64, which DecodeB64 reads as empty.
func PathKey(key []byte) string {
	if len(key) == 0 {
		return "="
	}
	return B64.EncodeToString(key)
}

// maxBody bounds an answer read from another instance.
const maxBody = 64 << 20

// Peer is how one instance reaches the others' endpoints: over https when
// they serve TLS (the client's transport then holds the TLS config: the CAs
// that sign their certificates and the client certificate to present), and
// with the bearer token they require, if any.
type Peer struct {
	Client *http.Client
	TLS    bool
	Token  string
}

// NewPeer returns the Peer that reaches the others with client, over https
// with tlsCfg when it is not nil (set on a clone of the client's transport
// when that is an *http.Transport, the default; another RoundTripper is
// used as it is), presenting token when it is not empty.
func NewPeer(client *http.Client, tlsCfg *tls.Config, token string) Peer {
	p := Peer{Client: client, Token: token}
	if tlsCfg == nil {
		return p
	}
	p.TLS = true
	var tr *http.Transport
	switch rt := client.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = rt.Clone()
	default:
		return p
	}
	tr.TLSClientConfig = tlsCfg
	cl := *client
	cl.Transport = tr
	p.Client = &cl
	return p
}

// Get sends a query to the instance at endpoint (host:port) for uri (path
// and query), with p's scheme and credentials, marked as forwarded by self,
// and reads its answer.
func (p Peer) Get(ctx context.Context, endpoint, uri, self string) (code int, hdr http.Header, body []byte, err error) {
	scheme := "http://"
	if p.TLS {
		scheme = "https://"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+endpoint+uri, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set(HeaderForwarded, self)
	if p.Token != "" {
		req.Header.Set("Authorization", "Bearer "+p.Token)
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, body, nil
}
