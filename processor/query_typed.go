package processor

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-streams/sluice/internal/iqwire"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// Typed interactive queries: Query and QueryWindows read a store with the
// types and serdes of its materialization, from any instance. A key whose
// task this instance runs is read here (committed state, as Get); any
// other is asked of its owner, found with Locate, over the HTTP endpoints
// of package processor/serve at the owner's AdvertisedEndpoint, once (the
// request is marked forwarded, so the owner answers itself or not at all).
// Values cross as the bytes stored, and are decoded here with the
// materialization's serde, so a remote read answers as a local one.

// ErrOwnerUnreachable: the instance that owns the key's task did not
// answer (stopped, or its endpoint cannot be reached from here). Retry:
// once the group notices, the task moves to a live instance.
var ErrOwnerUnreachable = errors.New("processor: owner unreachable")

// QueryOpt configures a typed query.
type QueryOpt interface{ applyQuery(*queryConfig) }

type queryOpt func(*queryConfig)

func (o queryOpt) applyQuery(c *queryConfig) { o(c) }

type queryConfig struct {
	stale   bool
	client  *http.Client
	peerTLS *tls.Config // see QueryPeerTLS
	token   string      // see QueryBearerToken
}

// StaleReads lets a task that is still restoring answer from its local
// state, which may lag the committed state, instead of ErrNotReady (the
// HTTP endpoints' stale=true). Default: off.
func StaleReads() QueryOpt { return queryOpt(func(c *queryConfig) { c.stale = true }) }

// QueryClient takes the HTTP client that asks the owner of a key whose
// task is not open here. Default: a client with a 10 s timeout.
func QueryClient(cl *http.Client) QueryOpt { return queryOpt(func(c *queryConfig) { c.client = cl }) }

var defaultQueryClient = &http.Client{Timeout: 10 * time.Second}

// pageLimit is the page a range reads at once, here and from each owner:
// the HTTP endpoints' largest.
const pageLimit = 1000

// storeQuery is what the typed queries share: the store and its serdes.
type storeQuery[K, V any] struct {
	app  *App
	name string
	ks   serde.Serde[K]
	vs   serde.Serde[V]
	cfg  queryConfig
	peer iqwire.Peer // how owners are asked: built once, to reuse connections
}

func newStoreQuery[K, V any](a *App, m topology.Materialization[K, V], opts []QueryOpt) storeQuery[K, V] {
	q := storeQuery[K, V]{app: a, name: m.Name(), ks: m.KeySerde(), vs: m.ValueSerde(), cfg: queryConfig{client: defaultQueryClient}}
	for _, o := range opts {
		if o != nil {
			o.applyQuery(&q.cfg)
		}
	}
	q.peer = iqwire.NewPeer(q.cfg.client, q.cfg.peerTLS, q.cfg.token)
	return q
}

// KeyValueQuery reads a key-value store (Materialized, KeyValueStore) of
// the App's topology: make it with Query. It is safe for concurrent use.
type KeyValueQuery[K, V any] struct{ q storeQuery[K, V] }

// Query reads the key-value store that m materializes, from this instance
// and, for keys whose tasks run elsewhere, from their owners. m is the
// materialization given to the topology (its name finds the store, its
// serdes encode keys and decode what is read). Errors of the store's name
// or kind come with the first read.
func Query[K, V any](a *App, m topology.Materialization[K, V], opts ...QueryOpt) *KeyValueQuery[K, V] {
	return &KeyValueQuery[K, V]{newStoreQuery(a, m, opts)}
}

// WindowQuery reads a window or session store (the materialization of a
// windowed aggregation): make it with QueryWindows. It is safe for
// concurrent use.
type WindowQuery[K, V any] struct{ q storeQuery[K, V] }

// QueryWindows reads the window or session store that m materializes, as
// Query does a key-value store. Windows held by another instance cross as
// the JSON of their values (a window's aggregate has no stored bytes of its
// own), so V must survive encoding/json there: numbers, strings, structs of
// exported fields.
func QueryWindows[K, V any](a *App, m topology.Materialization[K, V], opts ...QueryOpt) *WindowQuery[K, V] {
	return &WindowQuery[K, V]{newStoreQuery(a, m, opts)}
}

// errorf names the store in err.
func (q *storeQuery[K, V]) errorf(format string, args ...any) error {
	return fmt.Errorf("processor: query of store %q: "+format, append([]any{q.name}, args...)...)
}

// check that the store is queryable as a window store or not.
func (q *storeQuery[K, V]) check(windowed bool) error {
	info, err := q.app.Queryable(q.name)
	if err != nil {
		return q.errorf("%w", err)
	}
	if q.ks == nil || q.vs == nil {
		return q.errorf("%w: the materialization has no serdes", ErrNotQueryable)
	}
	switch {
	case windowed && !info.Windowed:
		return q.errorf("%w: a key-value store: use Query", ErrNotQueryable)
	case !windowed && info.Windowed:
		return q.errorf("%w: a window store: use QueryWindows", ErrNotQueryable)
	}
	return nil
}

// self names this instance to an owner it asks, as the HTTP endpoints do.
func (q *storeQuery[K, V]) self() string {
	if ep := q.app.Endpoint(); ep != "" {
		return ep
	}
	return "local"
}

// ask sends a query to the owner of a task not open here, at endpoint, and
// returns the body of a 200 or 404 answer; any other answer is an error
// that wraps the processor's sentinel for it.
func (q *storeQuery[K, V]) ask(ctx context.Context, endpoint, path string, params url.Values) (code int, body []byte, err error) {
	switch endpoint {
	case "":
		return 0, nil, q.errorf("%w: the owner is not known yet (rebalancing, or it advertises no endpoint)", ErrNotReady)
	case q.app.Endpoint():
		return 0, nil, q.errorf("%w: the routing map names this instance, whose task is not open: ownership is moving", ErrNotReady)
	}
	if q.cfg.stale {
		params.Set("stale", "true")
	}
	code, _, body, err = q.peer.Get(ctx, endpoint, path+"?"+params.Encode(), q.self())
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, q.errorf("owner %s: %w", endpoint, ctx.Err())
		}
		return 0, nil, q.errorf("%w: %s: %w", ErrOwnerUnreachable, endpoint, err)
	}
	var msg struct {
		Error string `json:"error"`
	}
	if code != http.StatusOK {
		_ = json.Unmarshal(body, &msg)
	}
	switch {
	case code == http.StatusOK:
		return code, body, nil
	case code == http.StatusNotFound && msg.Error == "":
		// Not an answer of the query endpoints: a server that does not
		// mount them (serve.Register) must not read as an absent key.
		return 0, nil, q.errorf("owner %s does not serve the query endpoints: %d %s", endpoint, code, bytes.TrimSpace(body))
	case code == http.StatusNotFound && strings.Contains(msg.Error, ErrUnknownStore.Error()):
		return 0, nil, q.errorf("%w at %s", ErrUnknownStore, endpoint)
	case code == http.StatusNotFound:
		return code, nil, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return 0, nil, q.errorf("owner %s refused the credentials (%d %s): see QueryBearerToken and QueryPeerTLS: %s",
			endpoint, code, http.StatusText(code), msg.Error)
	case code == http.StatusServiceUnavailable:
		return 0, nil, q.errorf("%w: owner %s: %s", ErrNotReady, endpoint, msg.Error)
	case code == http.StatusBadRequest && strings.Contains(msg.Error, ErrNotQueryable.Error()):
		return 0, nil, q.errorf("%w: owner %s: %s", ErrNotQueryable, endpoint, msg.Error)
	}
	return 0, nil, q.errorf("owner %s answered %d: %s", endpoint, code, bytes.TrimSpace(body))
}

func (q *storeQuery[K, V]) keysPath() string { return "/stores/" + url.PathEscape(q.name) + "/keys" }

// encodeKey encodes k and locates it.
func (q *storeQuery[K, V]) encodeKey(k K) ([]byte, Location, error) {
	kb, err := q.ks.Encode(k)
	if err != nil {
		return nil, Location{}, q.errorf("key: %w", err)
	}
	loc, err := q.app.Locate(q.name, kb)
	if err != nil {
		return nil, Location{}, q.errorf("%w", err)
	}
	return kb, loc, nil
}

func (q *storeQuery[K, V]) decodeValue(b []byte) (V, error) {
	v, err := q.vs.Decode(b)
	if err != nil {
		return v, q.errorf("value: %w", err)
	}
	return v, nil
}

// rawValue is the value as stored of an entry from another instance.
func rawValue(e iqwire.Entry) ([]byte, error) {
	return base64.StdEncoding.DecodeString(e.RawValue)
}

// Get returns the committed value of k, read here if this instance runs
// the key's task, else asked of its owner. ok is false if k has no value.
// Errors wrap ErrUnknownStore, ErrNotQueryable, ErrNotReady (restoring,
// rebalancing: retry), ErrNotLocal (the task closed during the read:
// retry) or ErrOwnerUnreachable.
func (kq *KeyValueQuery[K, V]) Get(ctx context.Context, k K) (v V, ok bool, err error) {
	q := &kq.q
	if err := q.check(false); err != nil {
		return v, false, err
	}
	kb, loc, err := q.encodeKey(k)
	if err != nil {
		return v, false, err
	}
	if loc.Local {
		e, ok, err := q.app.Get(q.name, kb, q.cfg.stale)
		if err != nil {
			return v, false, q.errorf("%w", err)
		}
		if !ok {
			return v, false, nil
		}
		v, err = q.decodeValue(e.Value)
		return v, err == nil, err
	}
	code, body, err := q.ask(ctx, loc.Endpoint, q.keysPath()+"/"+iqwire.PathKey(kb),
		url.Values{"key_encoding": {"base64"}, "raw": {"true"}})
	if err != nil || code == http.StatusNotFound {
		return v, false, err
	}
	var resp iqwire.KeyResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return v, false, q.errorf("answer of %s: %w", loc.Endpoint, err)
	}
	b, err := rawValue(resp.Entry)
	if err != nil {
		return v, false, q.errorf("answer of %s: value: %w", loc.Endpoint, err)
	}
	v, err = q.decodeValue(b)
	return v, err == nil, err
}

// Range returns the committed entries whose encoded keys are in
// [from, to), from every instance, in byte order of the encoded keys (for
// serde.String: of the strings). It holds them all: for a large store,
// bound the range. Errors as Get.
func (kq *KeyValueQuery[K, V]) Range(ctx context.Context, from, to K) ([]topology.KeyValue[K, V], error) {
	q := &kq.q
	if err := q.check(false); err != nil {
		return nil, err
	}
	fb, err := q.ks.Encode(from)
	if err != nil {
		return nil, q.errorf("from: %w", err)
	}
	tb, err := q.ks.Encode(to)
	if err != nil {
		return nil, q.errorf("to: %w", err)
	}
	if bytes.Compare(fb, tb) >= 0 {
		return nil, nil
	}
	return q.scan(ctx, fb, tb)
}

// All returns every committed entry of the store, from every instance, in
// byte order of the encoded keys. Errors as Get.
func (kq *KeyValueQuery[K, V]) All(ctx context.Context) ([]topology.KeyValue[K, V], error) {
	if err := kq.q.check(false); err != nil {
		return nil, err
	}
	return kq.q.scan(ctx, nil, nil)
}

// scan reads [from, to) (nil: open) of every partition where its task is,
// here or at its owner, page by page, and merges them.
func (q *storeQuery[K, V]) scan(ctx context.Context, from, to []byte) ([]topology.KeyValue[K, V], error) {
	locs, err := q.app.Locations(q.name)
	if err != nil {
		return nil, q.errorf("%w", err)
	}
	var local []int32
	remote := map[string][]string{}
	for _, l := range locs {
		if l.Local {
			local = append(local, l.Partition)
		} else {
			remote[l.Endpoint] = append(remote[l.Endpoint], strconv.Itoa(int(l.Partition)))
		}
	}
	type stored struct{ key, value []byte }
	var all []stored
	if len(local) > 0 {
		rq := RangeQuery{Partitions: local, From: from, To: to, Limit: pageLimit, Stale: q.cfg.stale}
		for {
			es, more, err := q.app.Range(q.name, rq)
			if err != nil {
				return nil, q.errorf("%w", err)
			}
			for _, e := range es {
				all = append(all, stored{e.Key, e.Value})
			}
			if !more {
				break
			}
			rq.After = es[len(es)-1].Key
		}
	}
	endpoints := make([]string, 0, len(remote))
	for ep := range remote {
		endpoints = append(endpoints, ep)
	}
	slices.Sort(endpoints)
	for _, ep := range endpoints {
		params := url.Values{"partitions": {strings.Join(remote[ep], ",")}, "key_encoding": {"base64"},
			"raw": {"true"}, "limit": {strconv.Itoa(pageLimit)}}
		if from != nil {
			params.Set("from", iqwire.B64.EncodeToString(from))
		}
		if to != nil {
			params.Set("to", iqwire.B64.EncodeToString(to))
		}
		for {
			code, body, err := q.ask(ctx, ep, q.keysPath(), params)
			if err != nil {
				return nil, err
			}
			if code != http.StatusOK {
				return nil, q.errorf("owner %s answered %d", ep, code)
			}
			var page iqwire.Page
			if err := json.Unmarshal(body, &page); err != nil {
				return nil, q.errorf("answer of %s: %w", ep, err)
			}
			for _, e := range page.Entries {
				k, err1 := iqwire.DecodeB64(e.RawKey)
				v, err2 := rawValue(e)
				if err := errors.Join(err1, err2); err != nil {
					return nil, q.errorf("answer of %s: %w", ep, err)
				}
				all = append(all, stored{k, v})
			}
			if page.Next == "" {
				break
			}
			params.Set("after", page.Next)
		}
	}
	// A key lives in one partition, so no key comes twice.
	slices.SortFunc(all, func(a, b stored) int { return bytes.Compare(a.key, b.key) })
	out := make([]topology.KeyValue[K, V], 0, len(all))
	for _, e := range all {
		k, err := q.ks.Decode(e.key)
		if err != nil {
			return nil, q.errorf("key %x: %w", e.key, err)
		}
		v, err := q.decodeValue(e.value)
		if err != nil {
			return nil, err
		}
		out = append(out, topology.KeyValue[K, V]{Key: k, Value: v})
	}
	return out, nil
}

// Fetch returns the committed windows of k that overlap [from, to)
// (milliseconds since the epoch; math.MinInt64 and math.MaxInt64 for all),
// oldest first, read here if this instance runs the key's task, else asked
// of its owner. Errors as KeyValueQuery.Get.
func (wq *WindowQuery[K, V]) Fetch(ctx context.Context, k K, from, to int64) ([]topology.KeyValue[topology.Windowed[K], V], error) {
	q := &wq.q
	if err := q.check(true); err != nil {
		return nil, err
	}
	kb, loc, err := q.encodeKey(k)
	if err != nil {
		return nil, err
	}
	var out []topology.KeyValue[topology.Windowed[K], V]
	add := func(start, end int64, v V) {
		out = append(out, topology.KeyValue[topology.Windowed[K], V]{
			Key: topology.Windowed[K]{Key: k, Window: window.Bounds{Start: start, End: end}}, Value: v})
	}
	if loc.Local {
		ws, err := q.app.Windows(q.name, kb, from, to, q.cfg.stale)
		if err != nil {
			return nil, q.errorf("%w", err)
		}
		for _, w := range ws {
			v, ok := w.Value.(V)
			if !ok {
				return nil, q.errorf("%w: a window holds a %T, not a %T: the materialization is not the store's", ErrNotQueryable, w.Value, v)
			}
			add(w.Start, w.End, v)
		}
		return out, nil
	}
	code, body, err := q.ask(ctx, loc.Endpoint, q.keysPath()+"/"+iqwire.PathKey(kb), url.Values{"key_encoding": {"base64"},
		"from": {strconv.FormatInt(from, 10)}, "to": {strconv.FormatInt(to, 10)}})
	if err != nil || code == http.StatusNotFound {
		return nil, err
	}
	var resp iqwire.KeyResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, q.errorf("answer of %s: %w", loc.Endpoint, err)
	}
	for _, w := range resp.Windows {
		var v V
		if err := json.Unmarshal(w.Value, &v); err != nil {
			return nil, q.errorf("answer of %s: window [%d, %d): %w", loc.Endpoint, w.Start, w.End, err)
		}
		add(w.Start, w.End, v)
	}
	return out, nil
}
