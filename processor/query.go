package processor

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/keyhash"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

// Interactive queries (Kafka Streams' interactive queries): read a store's
// committed state from outside the topology, on the instance that owns the
// key's task. These calls only read this instance's tasks; the instance that
// owns a key is found with Locate, from the routing map every member gets
// with its assignment (see AdvertisedEndpoint). cmd/sluice serves them over
// HTTP and forwards a query to the owner.
//
// Reads go to the engine beneath the task's stage (store.Staged.Engine), so
// they see only committed state (invariant 2): never the writes of the open
// transaction.

var (
	// ErrUnknownStore: the topology has no store of that name in a task
	// (global tables are not queried here).
	ErrUnknownStore = errors.New("processor: no such store")
	// ErrNotQueryable: the store's layout is private (timers, keyed state,
	// join buffers), or the query does not fit the store's kind.
	ErrNotQueryable = errors.New("processor: store cannot be queried that way")
	// ErrNotReady: the task is restoring (unless the caller accepts stale
	// reads), or closed while it was read, or the instance has not started
	// yet. Retry later (HTTP: 503 with Retry-After).
	ErrNotReady = errors.New("processor: store not ready")
	// ErrNotLocal: the key's task is not open on this instance; Locate
	// says where it is.
	ErrNotLocal = errors.New("processor: task not open on this instance")
)

// AdvertisedEndpoint sets application.server: the host:port where this
// instance answers interactive queries (its HTTP server). Each member puts
// it in its group join metadata and the leader hands every member the map
// task → endpoint with its assignment, so any instance can tell which one
// owns a key (Locate) and forward the query there. Default: none; the
// instance still answers for its own tasks, but others cannot route to it.
func AdvertisedEndpoint(hostport string) Opt {
	return opt(func(c *config) { c.endpoint = hostport })
}

func validateEndpoint(ep string) error {
	if ep == "" {
		return nil
	}
	if host, port, err := net.SplitHostPort(ep); err != nil || host == "" || port == "" {
		return fmt.Errorf("processor: application.server must be host:port, got %q", ep)
	}
	return nil
}

// Endpoint is the instance's advertised endpoint (application.server), ""
// if none.
func (a *App) Endpoint() string { return a.cfg.endpoint }

// queries is the instance's state that interactive queries read from other
// goroutines (HTTP handlers). The loop writes the open tasks, the group's
// sync writes the routing map.
//
// Lock order: queries.mu is a leaf, held only to copy an engine reference or
// a map entry; it is never held while an engine is read. An engine is read
// under its own lock (store.Pebble.mu / store.Memory.mu, shared), which its
// Close takes exclusively: the loop unregisters a task (queries.mu) before
// closing its engines, so a read either finished before Close or gets
// store.ErrClosed, reported as ErrNotReady.
type queries struct {
	mu struct {
		sync.Mutex
		// width of each sub-topology, once Run resolved it; nil before.
		width map[int]int32
		// open tasks of this instance and their engines.
		open map[task.ID]*queryTask
		// routing is task → owner's endpoint, from the latest assignment.
		routing map[task.ID]string
	}
}

type queryTask struct {
	restoring bool
	engines   map[string]store.Engine
}

func (q *queries) setWidths(w map[int]int32) {
	c := make(map[int]int32, len(w))
	for s, n := range w {
		c[s] = n
	}
	q.mu.Lock()
	q.mu.width = c
	q.mu.Unlock()
}

// opened registers a task that is about to restore (loop only).
func (q *queries) opened(t *task.Task) {
	qt := &queryTask{restoring: true, engines: map[string]store.Engine{}}
	for _, name := range t.Stores() {
		qt.engines[name] = t.Engine(name)
	}
	q.mu.Lock()
	if q.mu.open == nil {
		q.mu.open = map[task.ID]*queryTask{}
	}
	q.mu.open[t.ID()] = qt
	q.mu.Unlock()
}

// restored marks a task's stores restored (loop only).
func (q *queries) restored(id task.ID) {
	q.mu.Lock()
	if qt := q.mu.open[id]; qt != nil {
		qt.restoring = false
	}
	q.mu.Unlock()
}

// closed unregisters a task; call it before closing its engines.
func (q *queries) closed(id task.ID) {
	q.mu.Lock()
	delete(q.mu.open, id)
	q.mu.Unlock()
}

// setRouting takes the routing map of a new assignment (group goroutine).
func (q *queries) setRouting(m map[task.ID]string) {
	q.mu.Lock()
	q.mu.routing = m
	q.mu.Unlock()
}

// KeyPartition is the partition a key goes to among n: Kafka's default
// partitioner (murmur2), the one sluice's producer writes keyed records
// with (internal/keyhash), so a store key is found on the partition its
// records were written to.
func KeyPartition(key []byte, n int32) int32 { return keyhash.Partition(key, n) }

// Location says where a partition of a store is.
type Location struct {
	Store     string `json:"store"`
	Partition int32  `json:"partition"`
	Task      string `json:"task"` // "sub_partition"
	// Endpoint is the owner's advertised endpoint in the latest
	// assignment, "" if unknown (before the first assignment, or the
	// owner advertises none).
	Endpoint string `json:"endpoint,omitempty"`
	// Local: the task is open on this instance; Restoring: and its stores
	// are not restored yet.
	Local     bool `json:"local"`
	Restoring bool `json:"restoring,omitempty"`
}

// StoreInfo describes a queryable store.
type StoreInfo struct {
	Name     string
	Windowed bool // query its windows (Windows), not values (Get, Range)
	// Partitions is the store's width, 0 before Run resolved it.
	Partitions int32
}

func (a *App) queryStore(name string) (*exec.Store, int, error) {
	spec, ok := a.plan.Stores[name]
	sub, inTask := a.plan.StoreSub[name]
	if !ok || !inTask {
		return nil, 0, fmt.Errorf("%w: %q", ErrUnknownStore, name)
	}
	if spec.Query == nil {
		return nil, 0, fmt.Errorf("%w: %q keeps a private layout", ErrNotQueryable, name)
	}
	return spec, sub, nil
}

// Queryable describes a store for queries.
func (a *App) Queryable(name string) (StoreInfo, error) {
	spec, sub, err := a.queryStore(name)
	if err != nil {
		return StoreInfo{}, err
	}
	a.queries.mu.Lock()
	n := a.queries.mu.width[sub]
	a.queries.mu.Unlock()
	return StoreInfo{Name: name, Windowed: spec.Query.Windows != nil, Partitions: n}, nil
}

// StoreKey encodes a key given as text with the store's key serde: the text
// itself for string (and []byte) keys, the key's JSON for other types.
func (a *App) StoreKey(storeName, text string) ([]byte, error) {
	spec, _, err := a.queryStore(storeName)
	if err != nil {
		return nil, err
	}
	return spec.Query.KeyFromText(text)
}

// DecodeKey decodes a key as stored with the store's key serde.
func (a *App) DecodeKey(storeName string, key []byte) (any, error) {
	spec, _, err := a.queryStore(storeName)
	if err != nil {
		return nil, err
	}
	return spec.Query.Key(key)
}

// Locate says which partition of the store holds key (encoded, as stored)
// and where that partition's task is. ErrNotReady before Run resolved the
// store's width.
func (a *App) Locate(storeName string, key []byte) (Location, error) {
	_, sub, err := a.queryStore(storeName)
	if err != nil {
		return Location{}, err
	}
	a.queries.mu.Lock()
	defer a.queries.mu.Unlock()
	n := a.queries.mu.width[sub]
	if n <= 0 {
		return Location{}, fmt.Errorf("%w: instance not started", ErrNotReady)
	}
	return a.locationLocked(storeName, task.ID{Sub: sub, Partition: KeyPartition(key, n)}), nil
}

// Locations says where each partition of the store is, in partition order.
func (a *App) Locations(storeName string) ([]Location, error) {
	_, sub, err := a.queryStore(storeName)
	if err != nil {
		return nil, err
	}
	a.queries.mu.Lock()
	defer a.queries.mu.Unlock()
	n := a.queries.mu.width[sub]
	if n <= 0 {
		return nil, fmt.Errorf("%w: instance not started", ErrNotReady)
	}
	out := make([]Location, n)
	for p := range n {
		out[p] = a.locationLocked(storeName, task.ID{Sub: sub, Partition: p})
	}
	return out, nil
}

func (a *App) locationLocked(storeName string, id task.ID) Location {
	l := Location{Store: storeName, Partition: id.Partition, Task: id.String(), Endpoint: a.queries.mu.routing[id]}
	if qt := a.queries.mu.open[id]; qt != nil {
		l.Local, l.Restoring = true, qt.restoring
	}
	return l
}

// engine returns the engine of the store in the local task of partition p.
func (a *App) engine(storeName string, sub int, p int32, stale bool) (store.Engine, error) {
	a.queries.mu.Lock()
	defer a.queries.mu.Unlock()
	id := task.ID{Sub: sub, Partition: p}
	qt := a.queries.mu.open[id]
	if qt == nil {
		return nil, fmt.Errorf("%w: task %s of store %q", ErrNotLocal, id, storeName)
	}
	if qt.restoring && !stale {
		return nil, fmt.Errorf("%w: task %s is restoring", ErrNotReady, id)
	}
	return qt.engines[storeName], nil
}

// readErr reports a read that lost the race with the task's close as
// ErrNotReady: the task moved, the caller should locate it again.
func readErr(err error) error {
	if errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("%w: task closed during the read", ErrNotReady)
	}
	return err
}

// Entry is a key and its value as stored, and decoded by the store's serdes
// (nil if they do not decode).
type Entry struct {
	Key, Value               []byte
	DecodedKey, DecodedValue any
}

func decodeEntry(q *exec.StoreQuery, k, v []byte) Entry {
	e := Entry{Key: bytes.Clone(k), Value: bytes.Clone(v)}
	if dk, err := q.Key(e.Key); err == nil {
		e.DecodedKey = dk
	}
	if q.Value != nil {
		if dv, err := q.Value(e.Value); err == nil {
			e.DecodedValue = dv
		}
	}
	return e
}

// Get reads key (encoded) from the store's committed state on this
// instance. ok is false if the key has no value. ErrNotLocal if the key's
// task is not open here; ErrNotReady while it restores, unless stale.
func (a *App) Get(storeName string, key []byte, stale bool) (e Entry, ok bool, err error) {
	spec, sub, err := a.queryStore(storeName)
	if err != nil {
		return Entry{}, false, err
	}
	if spec.Query.Windows != nil {
		return Entry{}, false, fmt.Errorf("%w: %q is a window store: query its windows", ErrNotQueryable, storeName)
	}
	loc, err := a.Locate(storeName, key)
	if err != nil {
		return Entry{}, false, err
	}
	eng, err := a.engine(storeName, sub, loc.Partition, stale)
	if err != nil {
		return Entry{}, false, err
	}
	v, ok, err := eng.Get(key)
	if err != nil || !ok {
		return Entry{}, false, readErr(err)
	}
	return decodeEntry(spec.Query, key, v), true, nil
}

// RangeQuery selects entries of a key-value store in byte order of their
// encoded keys.
type RangeQuery struct {
	// Partitions to read, each of which must be open here (else
	// ErrNotLocal); nil: every partition of the store open here.
	Partitions []int32
	// From (inclusive) and To (exclusive) bound the keys; nil is open.
	From, To []byte
	// After, if set, starts past this key: the cursor of the previous page.
	After []byte
	// Limit caps the entries returned; 0 means 100.
	Limit int
	// Stale accepts tasks that are still restoring.
	Stale bool
}

// Range reads the entries q selects from the committed state of this
// instance's tasks, merged in key order. more reports that entries past the
// last one returned were left out (page on with After = the last key).
func (a *App) Range(storeName string, q RangeQuery) (entries []Entry, more bool, err error) {
	spec, sub, err := a.queryStore(storeName)
	if err != nil {
		return nil, false, err
	}
	if spec.Query.Windows != nil {
		return nil, false, fmt.Errorf("%w: %q is a window store: query a key's windows", ErrNotQueryable, storeName)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	parts := q.Partitions
	if parts == nil {
		a.queries.mu.Lock()
		for id := range a.queries.mu.open {
			if id.Sub == sub {
				parts = append(parts, id.Partition)
			}
		}
		a.queries.mu.Unlock()
	}
	lo := q.From
	if q.After != nil && (lo == nil || bytes.Compare(q.After, lo) >= 0) {
		lo = append(bytes.Clone(q.After), 0) // the least key above After
	}
	engines := make([]store.Engine, 0, len(parts))
	for _, p := range parts {
		eng, err := a.engine(storeName, sub, p, q.Stale)
		if err != nil {
			return nil, false, err
		}
		engines = append(engines, eng)
	}
	// Each task's first limit+1 keys; the first limit+1 of their union
	// are among them. Keys are hashed to partitions, so no key is in two.
	stop := errors.New("stop")
	for _, eng := range engines {
		n := 0
		err := eng.Range(lo, q.To, func(k, v []byte) error {
			if n > limit {
				return stop
			}
			n++
			entries = append(entries, decodeEntry(spec.Query, k, v))
			return nil
		})
		if err != nil && !errors.Is(err, stop) {
			return nil, false, readErr(err)
		}
	}
	sort.Slice(entries, func(i, j int) bool { return bytes.Compare(entries[i].Key, entries[j].Key) < 0 })
	if len(entries) > limit {
		return entries[:limit], true, nil
	}
	return entries, false, nil
}

// WindowEntry is one window of a key: [Start, End) in milliseconds since
// the epoch, and its value decoded by the store's value serde.
type WindowEntry struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	Value any   `json:"value"`
}

// Windows reads the windows of key (encoded) that overlap [from, to) from
// the committed state of a window or session store on this instance,
// oldest first. Errors as Get.
func (a *App) Windows(storeName string, key []byte, from, to int64, stale bool) ([]WindowEntry, error) {
	spec, sub, err := a.queryStore(storeName)
	if err != nil {
		return nil, err
	}
	if spec.Query.Windows == nil {
		return nil, fmt.Errorf("%w: %q is a key-value store, not a window store", ErrNotQueryable, storeName)
	}
	loc, err := a.Locate(storeName, key)
	if err != nil {
		return nil, err
	}
	eng, err := a.engine(storeName, sub, loc.Partition, stale)
	if err != nil {
		return nil, err
	}
	// A fresh Staged with nothing staged reads the engine alone: the
	// committed windows, through the store's own layout code.
	var out []WindowEntry
	err = spec.Query.Windows(store.NewStaged(storeName, eng), key, func(start, end int64, v any) error {
		if start < to && end > from {
			out = append(out, WindowEntry{Start: start, End: end, Value: v})
		}
		return nil
	})
	return out, readErr(err)
}
