package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-streams/sluice/internal/iqwire"
	"github.com/sluice-streams/sluice/processor"
)

// Interactive queries over HTTP (see README "Interactive queries").
//
// A key owned by another instance is forwarded to that instance's advertised
// endpoint, once: the forwarded request carries iqwire.HeaderForwarded and is
// never forwarded again. Every answer names the instances that served it in
// iqwire.HeaderServedBy.
const (
	headerServedBy  = iqwire.HeaderServedBy
	headerForwarded = iqwire.HeaderForwarded
	// retryAfter is the Retry-After of a 503: restores and rebalances are
	// usually over within seconds.
	retryAfter   = "1"
	defaultLimit = 100
	maxLimit     = 1000
)

type queryHandler struct {
	app  *processor.App
	log  *slog.Logger
	peer iqwire.Peer // how forwarded queries reach the owners
	self string      // this instance in headerServedBy
}

func newQueryHandler(app *processor.App, c config) *queryHandler {
	self := app.Endpoint()
	if self == "" {
		self = "local"
	}
	return &queryHandler{app: app, log: c.log, self: self, peer: c.peer()}
}

func (h *queryHandler) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /stores/{store}/keys/{key}", h.key)
	mux.HandleFunc("GET /stores/{store}/keys", h.keys)
}

// jsonOr returns the JSON of v, or nil if v is nil or has none.
func jsonOr(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// toEntry is e as JSON: its key, and with withValue its value, raw (as
// stored) where it has no JSON, or always with raw: the typed client
// (processor.Query) decodes the stored bytes with the store's serde, as a
// local read does, rather than a JSON round trip.
func toEntry(e processor.Entry, withValue, raw bool) iqwire.Entry {
	out := iqwire.Entry{Key: jsonOr(e.DecodedKey), RawKey: iqwire.B64.EncodeToString(e.Key)}
	if out.Key == nil {
		out.Key = json.RawMessage("null")
	}
	if withValue {
		if out.Value = jsonOr(e.DecodedValue); out.Value == nil || raw {
			out.RawValue = base64.StdEncoding.EncodeToString(e.Value)
		}
	}
	return out
}

// keyBytes encodes a key given in a URL: its text form (the text for string
// keys, JSON for others) or, with key_encoding=base64, its stored bytes.
func (h *queryHandler) keyBytes(store, text, encoding string) ([]byte, error) {
	switch encoding {
	case "", "text":
		return h.app.StoreKey(store, text)
	case "base64":
		return iqwire.DecodeB64(text)
	}
	return nil, fmt.Errorf("key_encoding must be text or base64, got %q", encoding)
}

// parseTime reads a window bound: milliseconds since the epoch or RFC 3339.
func parseTime(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("time %q: want milliseconds since the epoch or RFC 3339", s)
	}
	return t.UnixMilli(), nil
}

func badRequest(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
}

func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", retryAfter)
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": msg})
}

// fail answers an error of the processor's query API.
func (h *queryHandler) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, processor.ErrUnknownStore):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case errors.Is(err, processor.ErrNotQueryable):
		badRequest(w, err)
	case errors.Is(err, processor.ErrNotReady), errors.Is(err, processor.ErrNotLocal):
		unavailable(w, err.Error())
	default:
		h.log.Warn("query failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
}

// boolParam reads the flag param (stale, raw) of q; absent is false.
func boolParam(q url.Values, param string) (bool, error) {
	s := q.Get(param)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%s: want true or false, got %q", param, s)
	}
	return b, nil
}

// key answers GET /stores/{store}/keys/{key}.
func (h *queryHandler) key(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("store")
	info, err := h.app.Queryable(name)
	if err != nil {
		h.fail(w, err)
		return
	}
	q := r.URL.Query()
	key, err := h.keyBytes(name, r.PathValue("key"), q.Get("key_encoding"))
	if err != nil {
		badRequest(w, err)
		return
	}
	stale, err := boolParam(q, "stale")
	if err != nil {
		badRequest(w, err)
		return
	}
	raw, err := boolParam(q, "raw")
	if err != nil {
		badRequest(w, err)
		return
	}
	from, err1 := parseTime(q.Get("from"), math.MinInt64)
	to, err2 := parseTime(q.Get("to"), math.MaxInt64)
	if err := errors.Join(err1, err2); err != nil {
		badRequest(w, err)
		return
	}
	if !info.Windowed && (q.Has("from") || q.Has("to")) {
		badRequest(w, fmt.Errorf("store %q is not a window store: from and to bound window times", name))
		return
	}
	loc, err := h.app.Locate(name, key)
	if err != nil {
		h.fail(w, err)
		return
	}
	if !loc.Local {
		h.forward(w, r, loc.Endpoint)
		return
	}
	w.Header().Set(headerServedBy, h.self)
	resp := iqwire.KeyResponse{Store: name, Partition: loc.Partition, Task: loc.Task}
	if info.Windowed {
		ws, err := h.app.Windows(name, key, from, to, stale)
		if err != nil {
			h.fail(w, err)
			return
		}
		if len(ws) == 0 {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no windows of this key in the time range"})
			return
		}
		dk, _ := h.app.DecodeKey(name, key)
		resp.Entry = toEntry(processor.Entry{Key: key, DecodedKey: dk}, false, false)
		for _, win := range ws {
			v := jsonOr(win.Value)
			if v == nil {
				v = json.RawMessage("null")
			}
			resp.Windows = append(resp.Windows, iqwire.Window{Start: win.Start, End: win.End, Value: v})
		}
		writeJSON(w, http.StatusOK, resp)
		return
	}
	e, ok, err := h.app.Get(name, key, stale)
	if err != nil {
		h.fail(w, err)
		return
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such key"})
		return
	}
	resp.Entry = toEntry(e, true, raw)
	writeJSON(w, http.StatusOK, resp)
}

// forward proxies a query to the instance that owns its key, once.
func (h *queryHandler) forward(w http.ResponseWriter, r *http.Request, endpoint string) {
	switch {
	case r.Header.Get(headerForwarded) != "":
		// The sender's routing map is newer or older than ours: let
		// the group settle instead of bouncing the query around.
		unavailable(w, "forwarded here, but the key's task is not open here: ownership is moving")
		return
	case endpoint == "" || endpoint == h.app.Endpoint():
		unavailable(w, "the key's owner is not known yet (rebalancing, or it advertises no endpoint)")
		return
	}
	code, hdr, body, err := h.get(r.Context(), endpoint, r.URL.RequestURI())
	if err != nil {
		unavailable(w, fmt.Sprintf("owner %s: %v", endpoint, err))
		return
	}
	if peerRefused(w, endpoint, code) {
		return
	}
	for _, k := range []string{"Content-Type", "Retry-After", headerServedBy} {
		if v := hdr.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// get sends a forwarded GET to another instance.
func (h *queryHandler) get(ctx context.Context, endpoint, uri string) (int, http.Header, []byte, error) {
	return h.peer.Get(ctx, endpoint, uri, h.self)
}

// keys answers GET /stores/{store}/keys: a page of the store's keys in byte
// order of their encoding, from every instance. A store's keys are spread
// over its partitions, so the page is merged from each owner's first limit
// keys past the cursor (Kafka Streams queries every instance too); with
// partitions=p,q (what a forwarding instance sends) only those partitions
// of this instance are read.
func (h *queryHandler) keys(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("store")
	info, err := h.app.Queryable(name)
	if err != nil {
		h.fail(w, err)
		return
	}
	if info.Windowed {
		badRequest(w, fmt.Errorf("store %q is a window store: query a key's windows at /stores/%s/keys/{key}", name, name))
		return
	}
	q := r.URL.Query()
	rq := processor.RangeQuery{Limit: defaultLimit}
	var errs []error
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > maxLimit {
			errs = append(errs, fmt.Errorf("limit: want 1..%d, got %q", maxLimit, s))
		}
		rq.Limit = n
	}
	enc := q.Get("key_encoding")
	if s := q.Get("from"); q.Has("from") {
		rq.From, err = h.keyBytes(name, s, enc)
		errs = append(errs, err)
	}
	if s := q.Get("to"); q.Has("to") {
		rq.To, err = h.keyBytes(name, s, enc)
		errs = append(errs, err)
	}
	if s := q.Get("after"); s != "" {
		rq.After, err = iqwire.DecodeB64(s)
		errs = append(errs, err)
	}
	rq.Stale, err = boolParam(q, "stale")
	errs = append(errs, err)
	raw, err := boolParam(q, "raw")
	errs = append(errs, err)
	if s := q.Get("partitions"); q.Has("partitions") {
		rq.Partitions = []int32{} // not nil: exactly these
		for _, f := range strings.Split(s, ",") {
			p, err := strconv.ParseInt(f, 10, 32)
			if err != nil || p < 0 {
				errs = append(errs, fmt.Errorf("partitions: %q", f))
			}
			rq.Partitions = append(rq.Partitions, int32(p))
		}
	}
	if err := errors.Join(errs...); err != nil {
		badRequest(w, err)
		return
	}
	if rq.Partitions != nil {
		entries, more, err := h.app.Range(name, rq)
		if err != nil {
			h.fail(w, err)
			return
		}
		w.Header().Set(headerServedBy, h.self)
		writeJSON(w, http.StatusOK, page(name, entries, more, raw))
		return
	}
	h.fanOut(w, r, name, rq, raw)
}

func page(name string, entries []processor.Entry, more, raw bool) iqwire.Page {
	p := iqwire.Page{Store: name, Entries: make([]iqwire.Entry, 0, len(entries))}
	for _, e := range entries {
		p.Entries = append(p.Entries, toEntry(e, true, raw))
	}
	if more && len(p.Entries) > 0 {
		p.Next = p.Entries[len(p.Entries)-1].RawKey
	}
	return p
}

// fanOut reads each partition of the store where its task is, here or at
// its owner, and merges the pages.
func (h *queryHandler) fanOut(w http.ResponseWriter, r *http.Request, name string, rq processor.RangeQuery, rawValues bool) {
	locs, err := h.app.Locations(name)
	if err != nil {
		h.fail(w, err)
		return
	}
	var local []int32
	remote := map[string][]string{}
	for _, l := range locs {
		switch {
		case l.Local:
			local = append(local, l.Partition)
		case l.Endpoint == "" || l.Endpoint == h.app.Endpoint() || r.Header.Get(headerForwarded) != "":
			unavailable(w, fmt.Sprintf("the owner of partition %d is not known yet (rebalancing, or it advertises no endpoint)", l.Partition))
			return
		default:
			remote[l.Endpoint] = append(remote[l.Endpoint], strconv.Itoa(int(l.Partition)))
		}
	}
	type result struct {
		from string
		code int
		hdr  http.Header
		body []byte
		page iqwire.Page
		err  error
	}
	results := make(chan result, len(remote))
	var wg sync.WaitGroup
	for ep, parts := range remote {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := r.URL.Query()
			q.Set("partitions", strings.Join(parts, ","))
			res := result{from: ep}
			res.code, res.hdr, res.body, res.err = h.get(r.Context(), ep, r.URL.Path+"?"+q.Encode())
			if res.err == nil && res.code == http.StatusOK {
				res.err = json.Unmarshal(res.body, &res.page)
			}
			results <- res
		}()
	}
	wg.Wait()
	close(results)

	var all []iqwire.Entry
	more := false
	served := []string{}
	if len(local) > 0 {
		rq.Partitions = local
		entries, m, err := h.app.Range(name, rq)
		if err != nil {
			h.fail(w, err)
			return
		}
		all = append(all, page(name, entries, false, rawValues).Entries...)
		more = more || m
		served = append(served, h.self)
	}
	for res := range results {
		if res.err != nil {
			unavailable(w, fmt.Sprintf("owner %s: %v", res.from, res.err))
			return
		}
		if peerRefused(w, res.from, res.code) {
			return
		}
		if res.code != http.StatusOK {
			// The owner's own answer (a 503 while it restores, most
			// likely) stands for the whole page.
			for _, k := range []string{"Content-Type", "Retry-After"} {
				if v := res.hdr.Get(k); v != "" {
					w.Header().Set(k, v)
				}
			}
			w.WriteHeader(res.code)
			_, _ = w.Write(res.body)
			return
		}
		all = append(all, res.page.Entries...)
		more = more || res.page.Next != ""
		served = append(served, res.from)
	}
	raw := make(map[string][]byte, len(all))
	for _, e := range all {
		b, err := iqwire.DecodeB64(e.RawKey)
		if err != nil {
			unavailable(w, fmt.Sprintf("bad key from an owner: %v", err))
			return
		}
		raw[e.RawKey] = b
	}
	sort.Slice(all, func(i, j int) bool { return bytes.Compare(raw[all[i].RawKey], raw[all[j].RawKey]) < 0 })
	limit := rq.Limit
	out := iqwire.Page{Store: name, Entries: all}
	if len(all) > limit {
		out.Entries, more = all[:limit], true
	}
	if more && len(out.Entries) > 0 {
		out.Next = out.Entries[len(out.Entries)-1].RawKey
	}
	if out.Entries == nil {
		out.Entries = []iqwire.Entry{}
	}
	slices.Sort(served)
	w.Header().Set(headerServedBy, strings.Join(served, ","))
	writeJSON(w, http.StatusOK, out)
}
