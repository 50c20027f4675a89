package topology

import (
	"errors"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// Keyed state: Flink's value, list, map, reducing and aggregating state, for
// the Processor API. Each state is a store like any other (its own Pebble
// or in-memory engine, staged writes, a changelog topic
// <application.id>-<name>-changelog it restores from), declared by a
// function below and passed to Process; the processor opens it in Init.
// The handles are thin: the runtime behind them (the clock, expiry, the
// entry format) is internal/ops's, and the bytes it writes are laid out as
// internal/layout's state.go draws. A list is one value, so lists should
// stay short (a map keyed by a sequence number holds long ones).

// Sentinel errors of keyed state.
var (
	// ErrInvalidTTL is wrapped by Build's error for a StateTTL that is
	// negative or shorter than a millisecond.
	ErrInvalidTTL = errors.New("topology: invalid ttl")
	// ErrStateNoTime is returned by a write to a state with a TTL that has
	// no time to stamp it with: the task has processed no record yet and
	// the state has no stored clock, as in a punctuation or a timer that
	// fires before the first record (see StateTTL).
	ErrStateNoTime = errors.New("topology: state has no time yet: written before the task processed any record")
	// ErrCorruptState is wrapped by the error of a read that finds bytes the
	// state's layout cannot have produced.
	ErrCorruptState = errors.New("topology: corrupt state")
)

// StateOption configures a keyed state: StateTTL, or a StoreOption
// (InMemory, WithoutCache), which applies to the state's store.
type StateOption interface {
	applyState(*stateSpec)
}

type stateOptionFunc func(*stateSpec)

func (f stateOptionFunc) applyState(s *stateSpec) { f(s) }

func (o storeOpt) applyState(s *stateSpec) { o(s.store) }

// StateTTL expires each entry of a keyed state d after its last write:
// Flink's StateTtlConfig with update type OnCreateAndWrite (a read does not
// extend an entry's life) and visibility NeverReturnExpired (a read, or an
// Add, at or after write time + d finds the entry absent). Lists expire per
// element and maps per map entry. The default is no TTL; StateTTL(0) says
// so explicitly. d must be at least a millisecond, and counts in whole
// milliseconds, like record timestamps.
//
// Time is event time, never the wall clock, so that results are
// deterministic under replay (invariant 5 of ARCHITECTURE.md). The state's
// clock is the later of the task's stream time (ProcessorContext.StreamTime),
// which includes the record being processed, and the clock the state last
// stored; so a record's writes are stamped with its own timestamp, or with
// the stream time if the record is late, and the clock never runs
// backwards: an entry once expired stays expired, and an out-of-order
// record cannot revive it. Only a write made before the task has processed
// any record, from a punctuation or a timer, finds no time to stamp it with
// (ErrStateNoTime).
//
// The clock is kept in the state's own store, so it commits, rolls back and
// restores with the entries it judges, also where the task does not persist
// its stream time (it does only for sub-topologies with a windowed store):
// after a restart the task's stream time starts again from nothing, and the
// stored clock keeps expiry from going back on decisions already committed.
// So reads may write: each access that finds the stream time past the
// clock moves the clock (one changelog record per commit with the cache
// on).
//
// Expired entries are removed lazily: a read that finds one deletes it,
// which is a write that reaches the changelog, and an Add to a list drops
// its expired elements. Entries of keys never read again stay in the store.
// Entries written while the state had no TTL never expire until rewritten;
// removing the TTL makes every entry live again.
func StateTTL(d time.Duration) StateOption {
	return stateOptionFunc(func(s *stateSpec) { s.ttl = d })
}

// stateSpec is what every keyed state declares: its store, and its TTL.
type stateSpec struct {
	store *exec.Store
	ttl   time.Duration
}

func newStateSpec(name string, opts []StateOption) *stateSpec {
	s := &stateSpec{store: &exec.Store{Name: name, Cache: true}}
	for _, o := range opts {
		o.applyState(s)
	}
	return s
}

func (s *stateSpec) name() string {
	if s == nil {
		return ""
	}
	return s.store.Name
}

// identify records the state's serde identities and layout in its store,
// for savepoints (a map state's value identity names its user key's and
// user value's serdes).
func (s *stateSpec) identify(key, value string) {
	if s == nil || s.store == nil {
		return
	}
	s.store.KeySerde, s.store.ValueSerde, s.store.Layout = key, value, layout.KindState
}

// register adds the state's store to t, reporting what is missing:
// serdes and functions say whether the state's serdes and functions are
// all non-nil.
func (s *stateSpec) register(t *Topology, kind string, serdes, functions bool) bool {
	if s.name() == "" {
		t.errorf(ErrMissingName, "a state must be named")
		return false
	}
	ok := true
	if !serdes {
		t.errorf(ErrMissingSerde, "%s state %q needs its serdes", kind, s.store.Name)
		ok = false
	}
	if !functions {
		t.errorf(ErrNilFunction, "%s state %q needs its functions", kind, s.store.Name)
		ok = false
	}
	if s.ttl < 0 || (s.ttl > 0 && s.ttl < time.Millisecond) {
		t.errorf(ErrInvalidTTL, "state %q: ttl %v is not zero or at least a millisecond", s.store.Name, s.ttl)
		ok = false
	}
	if !ok {
		return false
	}
	if t.registered(s.store) {
		return true // the same state handed to two processors of one sub-topology
	}
	t.addStore(s.store)
	return true
}

// stateErrors are the sentinels the keyed state runtime wraps.
var stateErrors = ops.StateErrors{Corrupt: ErrCorruptState, NoTime: ErrStateNoTime, Undeclared: ErrUnknownStore}

// open opens a handle's core on st; clock is nil for a View.
func (s *stateSpec) open(st *store.Staged, clock ops.StreamClock) *ops.Keyed {
	return ops.NewKeyed(ops.StateConfig{Name: s.store.Name, TTL: s.ttl.Milliseconds(), Errors: stateErrors}, st, clock)
}

func (s *stateSpec) openIn(ctx StateContext) *ops.Keyed {
	c := ctx.processContext().Exec()
	return s.open(c.Store(s.store.Name), c)
}

// ---- value state ----------------------------------------------------------

// ValueSpec declares a value state: one value per key. Pass it to Process
// and open it in the processor's Init.
type ValueSpec[K, V any] struct {
	st *stateSpec
	ks serde.Serde[K]
	vs serde.Serde[V]
}

// ValueState declares a value state named name (which names its changelog
// topic <application.id>-<name>-changelog and its directory), Pebble-backed
// with the write cache on unless options say otherwise.
func ValueState[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], opts ...StateOption) ValueSpec[K, V] {
	return ValueSpec[K, V]{st: newStateSpec(name, opts), ks: ks, vs: vs}
}

// Name is the state's store name.
func (s ValueSpec[K, V]) Name() string { return s.st.name() }

func (s ValueSpec[K, V]) register(t *Topology) bool {
	s.st.identify(serde.ID(s.ks), serde.ID(s.vs))
	return s.st.register(t, "value", s.ks != nil && s.vs != nil, true)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s ValueSpec[K, V]) Open(ctx StateContext) *KeyedValue[K, V] {
	return &KeyedValue[K, V]{v: ops.NewValueState(s.st.openIn(ctx), s.ks, s.vs)}
}

// View types a staged store with the state's layout and serdes, for drivers
// that reach a task's stores from outside. A view has no stream time: it
// judges expiry by the clock stored with the state, which the task moves to
// its stream time as it reads and stamps entries and which a view never
// moves. A view's reads never write: it does not delete the expired
// entries it finds.
func (s ValueSpec[K, V]) View(st *store.Staged) *KeyedValue[K, V] {
	return &KeyedValue[K, V]{v: ops.NewValueState(s.st.open(st, nil), s.ks, s.vs)}
}

// KeyedValue is a value state inside a task: one value per key. Writes are
// staged until the task's transaction commits; reads see them at once.
type KeyedValue[K, V any] struct {
	v *ops.ValueState[K, V]
}

// Get returns the value of k; ok is false if it has none or it expired.
func (v *KeyedValue[K, V]) Get(k K) (val V, ok bool, err error) { return v.v.Get(k) }

// Set sets the value of k, stamped with the state's clock under a TTL.
func (v *KeyedValue[K, V]) Set(k K, val V) error { return v.v.Set(k, val) }

// Clear removes the value of k.
func (v *KeyedValue[K, V]) Clear(k K) error { return v.v.Clear(k) }

// ---- reducing state -------------------------------------------------------

// ReducingSpec declares a reducing state: per key, the reduction of the
// values added.
type ReducingSpec[K, V any] struct {
	v      ValueSpec[K, V]
	reduce func(V, V) V
}

// ReducingState declares a reducing state named name: Add folds a value
// into the key's current one with reduce(current, added).
func ReducingState[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], reduce func(V, V) V, opts ...StateOption) ReducingSpec[K, V] {
	return ReducingSpec[K, V]{v: ValueState(name, ks, vs, opts...), reduce: reduce}
}

// Name is the state's store name.
func (s ReducingSpec[K, V]) Name() string { return s.v.Name() }

func (s ReducingSpec[K, V]) register(t *Topology) bool {
	s.v.st.identify(serde.ID(s.v.ks), serde.ID(s.v.vs))
	return s.v.st.register(t, "reducing", s.v.ks != nil && s.v.vs != nil, s.reduce != nil)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s ReducingSpec[K, V]) Open(ctx StateContext) *KeyedReducing[K, V] {
	return &KeyedReducing[K, V]{r: ops.NewReducingState(s.v.Open(ctx).v, s.reduce)}
}

// View types a staged store like ValueSpec.View.
func (s ReducingSpec[K, V]) View(st *store.Staged) *KeyedReducing[K, V] {
	return &KeyedReducing[K, V]{r: ops.NewReducingState(s.v.View(st).v, s.reduce)}
}

// KeyedReducing is a reducing state inside a task. It is a value state
// underneath (the same layout), so a value state may become a reducing
// state under the same name and keep its values.
type KeyedReducing[K, V any] struct {
	r *ops.ReducingState[K, V]
}

// Add folds val into k's value: the value becomes val if k has none (or
// it expired), else reduce(value, val).
func (r *KeyedReducing[K, V]) Add(k K, val V) error { return r.r.Add(k, val) }

// Get returns the reduction of k's values.
func (r *KeyedReducing[K, V]) Get(k K) (V, bool, error) { return r.r.Get(k) }

// Clear removes k's value.
func (r *KeyedReducing[K, V]) Clear(k K) error { return r.r.Clear(k) }

// ---- aggregating state ----------------------------------------------------

// AggregatingSpec declares an aggregating state: per key, an accumulator
// of the inputs added, read out through a result function.
type AggregatingSpec[K, IN, ACC, OUT any] struct {
	acc    ValueSpec[K, ACC]
	init   func() ACC
	add    func(IN, ACC) ACC
	result func(ACC) OUT
}

// AggregatingState declares an aggregating state named name (Flink's
// AggregateFunction without merge): a key's accumulator starts as init(),
// each Add makes it add(in, acc), and Get returns result(acc). Only the
// accumulator is stored, with accs.
func AggregatingState[K, IN, ACC, OUT any](name string, ks serde.Serde[K], accs serde.Serde[ACC], init func() ACC, add func(IN, ACC) ACC, result func(ACC) OUT, opts ...StateOption) AggregatingSpec[K, IN, ACC, OUT] {
	return AggregatingSpec[K, IN, ACC, OUT]{acc: ValueState(name, ks, accs, opts...), init: init, add: add, result: result}
}

// Name is the state's store name.
func (s AggregatingSpec[K, IN, ACC, OUT]) Name() string { return s.acc.Name() }

func (s AggregatingSpec[K, IN, ACC, OUT]) register(t *Topology) bool {
	s.acc.st.identify(serde.ID(s.acc.ks), serde.ID(s.acc.vs))
	return s.acc.st.register(t, "aggregating", s.acc.ks != nil && s.acc.vs != nil, s.init != nil && s.add != nil && s.result != nil)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s AggregatingSpec[K, IN, ACC, OUT]) Open(ctx StateContext) *KeyedAggregating[K, IN, ACC, OUT] {
	return s.typed(s.acc.Open(ctx))
}

// View types a staged store like ValueSpec.View.
func (s AggregatingSpec[K, IN, ACC, OUT]) View(st *store.Staged) *KeyedAggregating[K, IN, ACC, OUT] {
	return s.typed(s.acc.View(st))
}

func (s AggregatingSpec[K, IN, ACC, OUT]) typed(acc *KeyedValue[K, ACC]) *KeyedAggregating[K, IN, ACC, OUT] {
	return &KeyedAggregating[K, IN, ACC, OUT]{a: ops.NewAggregatingState(acc.v, s.init, s.add, s.result)}
}

// KeyedAggregating is an aggregating state inside a task.
type KeyedAggregating[K, IN, ACC, OUT any] struct {
	a *ops.AggregatingState[K, IN, ACC, OUT]
}

// Add adds in to k's accumulator, which starts as init() if k has none (or
// it expired).
func (a *KeyedAggregating[K, IN, ACC, OUT]) Add(k K, in IN) error { return a.a.Add(k, in) }

// Get returns the result of k's accumulator; ok is false if k has none.
func (a *KeyedAggregating[K, IN, ACC, OUT]) Get(k K) (out OUT, ok bool, err error) {
	return a.a.Get(k)
}

// Clear removes k's accumulator.
func (a *KeyedAggregating[K, IN, ACC, OUT]) Clear(k K) error { return a.a.Clear(k) }

// ---- list state -----------------------------------------------------------

// ListSpec declares a list state: a list of values per key.
type ListSpec[K, V any] struct {
	st *stateSpec
	ks serde.Serde[K]
	vs serde.Serde[V]
}

// ListState declares a list state named name. Under a TTL each element
// expires on its own, counted from the Add or Update that wrote it.
func ListState[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], opts ...StateOption) ListSpec[K, V] {
	return ListSpec[K, V]{st: newStateSpec(name, opts), ks: ks, vs: vs}
}

// Name is the state's store name.
func (s ListSpec[K, V]) Name() string { return s.st.name() }

func (s ListSpec[K, V]) register(t *Topology) bool {
	s.st.identify(serde.ID(s.ks), serde.ID(s.vs))
	return s.st.register(t, "list", s.ks != nil && s.vs != nil, true)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s ListSpec[K, V]) Open(ctx StateContext) *KeyedList[K, V] {
	return &KeyedList[K, V]{l: ops.NewListState(s.st.openIn(ctx), s.ks, s.vs)}
}

// View types a staged store like ValueSpec.View.
func (s ListSpec[K, V]) View(st *store.Staged) *KeyedList[K, V] {
	return &KeyedList[K, V]{l: ops.NewListState(s.st.open(st, nil), s.ks, s.vs)}
}

// KeyedList is a list state inside a task. A key's list is stored as one
// value, so an Add costs a read and a rewrite of the whole list.
type KeyedList[K, V any] struct {
	l *ops.ListState[K, V]
}

// Get returns k's list in the order of its elements' writes; nil if it has
// none. Expired elements are left out, and deleted.
func (l *KeyedList[K, V]) Get(k K) ([]V, error) { return l.l.Get(k) }

// Add appends val to k's list, dropping the list's expired elements.
func (l *KeyedList[K, V]) Add(k K, val V) error { return l.l.Add(k, val) }

// Update replaces k's list with vals, all stamped now; an empty vals
// clears it.
func (l *KeyedList[K, V]) Update(k K, vals []V) error { return l.l.Update(k, vals) }

// Clear removes k's list.
func (l *KeyedList[K, V]) Clear(k K) error { return l.l.Clear(k) }

// ---- map state ------------------------------------------------------------

// MapSpec declares a map state: a map from user keys UK to values UV per
// key K.
type MapSpec[K, UK, UV any] struct {
	st  *stateSpec
	ks  serde.Serde[K]
	uks serde.Serde[UK]
	uvs serde.Serde[UV]
}

// MapState declares a map state named name. Each map entry is one store
// entry, so a Put or Get costs one point write or read whatever the map's
// size; under a TTL each map entry expires on its own.
func MapState[K, UK, UV any](name string, ks serde.Serde[K], uks serde.Serde[UK], uvs serde.Serde[UV], opts ...StateOption) MapSpec[K, UK, UV] {
	return MapSpec[K, UK, UV]{st: newStateSpec(name, opts), ks: ks, uks: uks, uvs: uvs}
}

// Name is the state's store name.
func (s MapSpec[K, UK, UV]) Name() string { return s.st.name() }

func (s MapSpec[K, UK, UV]) register(t *Topology) bool {
	s.st.identify(serde.ID(s.ks), serde.ID(s.uks)+"->"+serde.ID(s.uvs))
	return s.st.register(t, "map", s.ks != nil && s.uks != nil && s.uvs != nil, true)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s MapSpec[K, UK, UV]) Open(ctx StateContext) *KeyedMap[K, UK, UV] {
	return &KeyedMap[K, UK, UV]{m: ops.NewMapState(s.st.openIn(ctx), s.ks, s.uks, s.uvs)}
}

// View types a staged store like ValueSpec.View.
func (s MapSpec[K, UK, UV]) View(st *store.Staged) *KeyedMap[K, UK, UV] {
	return &KeyedMap[K, UK, UV]{m: ops.NewMapState(s.st.open(st, nil), s.ks, s.uks, s.uvs)}
}

// KeyedMap is a map state inside a task.
type KeyedMap[K, UK, UV any] struct {
	m *ops.MapState[K, UK, UV]
}

// Get returns the value under uk in k's map.
func (m *KeyedMap[K, UK, UV]) Get(k K, uk UK) (uv UV, ok bool, err error) { return m.m.Get(k, uk) }

// Put sets uk to uv in k's map.
func (m *KeyedMap[K, UK, UV]) Put(k K, uk UK, uv UV) error { return m.m.Put(k, uk, uv) }

// Remove removes uk from k's map.
func (m *KeyedMap[K, UK, UV]) Remove(k K, uk UK) error { return m.m.Remove(k, uk) }

// Range calls fn for each live entry of k's map, in byte order of the
// encoded map keys, and deletes the expired entries it passes once done.
// An error from fn stops the iteration and is returned as is. fn may read
// this state but not write to it: a write returns an error.
func (m *KeyedMap[K, UK, UV]) Range(k K, fn func(UK, UV) error) error { return m.m.Range(k, fn) }

// Clear removes k's whole map.
func (m *KeyedMap[K, UK, UV]) Clear(k K) error { return m.m.Clear(k) }
