package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// Keyed state: Flink's value, list, map, reducing and aggregating state, for
// the Processor API. Each state is a store like any other (its own Pebble
// or in-memory engine, staged writes, a changelog topic
// <application.id>-<name>-changelog it restores from), declared by a
// function below and passed to Process; the processor opens it in Init.
// The typed handles encode keys and values with the state's serdes and lay
// them out in the store as follows, the first byte naming the kind of key:
//
//	c                                → 1, clock (8 bytes)         the state's clock (TTL only)
//	v key                            → entry                       value, reducing and aggregating state
//	l key                            → 1, (uvarint len, entry)...  list state: the whole list in one value
//	m uvarint(len(key)) key userkey  → entry                       map state: one store entry per map entry
//
// where an entry is a format byte (entryPlain or entryTimed), the write
// time when timed, then the value's bytes. The format byte lets the layout
// evolve (a state may gain or lose a TTL between deployments); the kind
// byte keeps a state whose kind was changed under the same name from
// misreading its old entries, which it simply no longer sees.
//
// Map entries are length-prefixed by the key so that one key's entries are
// one contiguous range, which no other key's entries can fall in even when
// one key's bytes begin with another's. A list is one value, as in Flink's
// RocksDB backend: reading it is one point lookup, whereas one entry per
// element would need a range scan, which in a Staged store costs a pass
// over every write staged since the commit; the price is that an Add
// rewrites the list, so lists should stay short (a map keyed by a sequence
// number holds long ones).

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

// Key kinds (the first byte of every key of a state's store).
const (
	kindClock = 'c'
	kindValue = 'v'
	kindList  = 'l'
	kindMap   = 'm'
)

// Value formats.
const (
	entryPlain  byte = 1 // the value's bytes follow
	entryTimed  byte = 2 // the write time (8 bytes, big-endian), then the value's bytes
	listFormat  byte = 1 // (uvarint len, entry) per element follows
	clockFormat byte = 1 // the clock (8 bytes, big-endian) follows
)

// noTime is the clock of a state that has seen no time, like the task's
// stream time before its first record.
const noTime = -1

var clockKey = []byte{kindClock}

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
	if existing, dup := t.stores[s.store.Name]; dup && existing == s.store {
		return true // the same state handed to two processors of one sub-topology
	}
	t.addStore(s.store)
	return true
}

// keyed is the untyped core of every keyed state handle in one task: the
// clock, the entry format, expiry and the guard against writes during a
// Range.
type keyed struct {
	name string
	s    *store.Staged // nil: the processor did not declare the state
	ttl  int64         // milliseconds; 0: entries never expire
	// ctx is the task's context when opened in a task; nil for a View,
	// which neither follows a stream time nor deletes on read, since it
	// may be reading a store that its task owns.
	ctx exec.Context
	// ranging counts the Ranges in progress: the stage must not change
	// under one (store.Staged.Range).
	ranging int
}

func (s *stateSpec) open(st *store.Staged, ctx exec.Context) keyed {
	return keyed{name: s.store.Name, s: st, ttl: s.ttl.Milliseconds(), ctx: ctx}
}

func (s *stateSpec) openIn(ctx interface{ execContext() exec.Context }) keyed {
	c := ctx.execContext()
	return s.open(c.Store(s.store.Name), c)
}

func (c *keyed) errorf(format string, args ...any) error {
	return fmt.Errorf("store %s: "+format, append([]any{c.name}, args...)...)
}

func (c *keyed) ready() error {
	if c.s == nil {
		return c.errorf("%w: the processor did not pass the state to Process", ErrUnknownStore)
	}
	return nil
}

func (c *keyed) read(key []byte) ([]byte, bool, error) {
	if err := c.ready(); err != nil {
		return nil, false, err
	}
	b, ok, err := c.s.Get(key)
	if err != nil {
		return nil, false, c.errorf("%w", err)
	}
	return b, ok, nil
}

func (c *keyed) write(key, value []byte) error {
	if err := c.ready(); err != nil {
		return err
	}
	if c.ranging > 0 {
		return c.errorf("write during Range")
	}
	return c.s.Put(key, value)
}

func (c *keyed) delete(key []byte) error {
	if err := c.ready(); err != nil {
		return err
	}
	if c.ranging > 0 {
		return c.errorf("write during Range")
	}
	return c.s.Delete(key)
}

// cleans says whether the handle removes the expired entries it reads:
// only inside a task, and not under a Range.
func (c *keyed) cleans() bool { return c.ctx != nil && c.ranging == 0 }

// drop deletes an entry found expired, if the handle cleans.
func (c *keyed) drop(key []byte) error {
	if !c.cleans() {
		return nil
	}
	return c.s.Delete(key)
}

func (c *keyed) storedClock() (int64, error) {
	b, ok, err := c.read(clockKey)
	if err != nil || !ok {
		return noTime, err
	}
	if len(b) != 9 || b[0] != clockFormat {
		return 0, c.errorf("clock of %d bytes: %w", len(b), ErrCorruptState)
	}
	return int64(binary.BigEndian.Uint64(b[1:])), nil
}

// now is the clock that expiry is judged by and writes are stamped with:
// the later of the stored clock and the task's stream time (a view has
// only the stored clock); noTime without a TTL, or before any time. The
// clock is written to the store whenever it moves, so that after a restart
// it is never behind a time a committed decision was made at.
func (c *keyed) now() (int64, error) {
	if c.ttl == 0 {
		return noTime, nil
	}
	cur, err := c.storedClock()
	if err != nil || c.ctx == nil {
		return cur, err
	}
	ts := c.ctx.StreamTime()
	if ts <= cur {
		return cur, nil
	}
	b := binary.BigEndian.AppendUint64([]byte{clockFormat}, uint64(ts))
	return ts, c.write(clockKey, b)
}

// stamp is the write time of an entry written now.
func (c *keyed) stamp() (int64, error) {
	now, err := c.now()
	if err != nil || c.ttl == 0 {
		return now, err
	}
	if now < 0 {
		return 0, c.errorf("%w", ErrStateNoTime)
	}
	return now, nil
}

func (c *keyed) appendEntry(dst []byte, at int64, vb []byte) []byte {
	if c.ttl == 0 {
		return append(append(dst, entryPlain), vb...)
	}
	dst = binary.BigEndian.AppendUint64(append(dst, entryTimed), uint64(at))
	return append(dst, vb...)
}

// entry is a decoded entry: its value's bytes, and its write time if timed.
type entry struct {
	payload []byte
	at      int64
	timed   bool
}

func parseEntry(b []byte) (entry, error) {
	if len(b) == 0 {
		return entry{}, fmt.Errorf("%w: empty entry", ErrCorruptState)
	}
	switch b[0] {
	case entryPlain:
		return entry{payload: b[1:]}, nil
	case entryTimed:
		if len(b) < 9 {
			return entry{}, fmt.Errorf("%w: timed entry of %d bytes", ErrCorruptState, len(b))
		}
		at := int64(binary.BigEndian.Uint64(b[1:9]))
		if at < 0 {
			return entry{}, fmt.Errorf("%w: write time %d", ErrCorruptState, at)
		}
		return entry{payload: b[9:], at: at, timed: true}, nil
	}
	return entry{}, fmt.Errorf("%w: entry format %d", ErrCorruptState, b[0])
}

// expired says whether e is expired at now. Entries written without a TTL
// never are, and neither is anything once the TTL is removed.
func (c *keyed) expired(e entry, now int64) bool {
	return c.ttl > 0 && e.timed && now-e.at >= c.ttl
}

// get returns the value bytes of the entry under key; an expired entry is
// absent, and deleted. The bytes are the store's: the caller must not
// modify them.
func (c *keyed) get(key []byte) ([]byte, bool, error) {
	b, ok, err := c.read(key)
	if err != nil || !ok {
		return nil, false, err
	}
	e, err := parseEntry(b)
	if err != nil {
		return nil, false, c.errorf("%w", err)
	}
	if e.timed && c.ttl > 0 {
		now, err := c.now()
		if err != nil {
			return nil, false, err
		}
		if c.expired(e, now) {
			return nil, false, c.drop(key)
		}
	}
	return e.payload, true, nil
}

func (c *keyed) put(key, vb []byte) error {
	at, err := c.stamp()
	if err != nil {
		return err
	}
	return c.write(key, c.appendEntry(nil, at, vb))
}

func valueKey(kb []byte) []byte { return append([]byte{kindValue}, kb...) }

func listKey(kb []byte) []byte { return append([]byte{kindList}, kb...) }

// mapPrefix is the prefix of all of kb's map entries.
func mapPrefix(kb []byte) []byte {
	return append(binary.AppendUvarint([]byte{kindMap}, uint64(len(kb))), kb...)
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
	return s.st.register(t, "value", s.ks != nil && s.vs != nil, true)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s ValueSpec[K, V]) Open(ctx interface{ execContext() exec.Context }) *KeyedValue[K, V] {
	return &KeyedValue[K, V]{c: s.st.openIn(ctx), ks: s.ks, vs: s.vs}
}

// View types a staged store with the state's layout and serdes, for drivers
// that reach a task's stores from outside. A view has no stream time: it
// judges expiry by the clock stored with the state, which the task moves to
// its stream time as it reads and stamps entries and which a view never
// moves. A view's reads never write: it does not delete the expired
// entries it finds.
func (s ValueSpec[K, V]) View(st *store.Staged) *KeyedValue[K, V] {
	return &KeyedValue[K, V]{c: s.st.open(st, nil), ks: s.ks, vs: s.vs}
}

// KeyedValue is a value state inside a task: one value per key. Writes are
// staged until the task's transaction commits; reads see them at once.
type KeyedValue[K, V any] struct {
	c  keyed
	ks serde.Serde[K]
	vs serde.Serde[V]
}

func (v *KeyedValue[K, V]) key(k K) ([]byte, error) {
	kb, err := v.ks.Encode(k)
	if err != nil {
		return nil, v.c.errorf("key: %w", err)
	}
	return valueKey(kb), nil
}

// Get returns the value of k; ok is false if it has none or it expired.
func (v *KeyedValue[K, V]) Get(k K) (val V, ok bool, err error) {
	key, err := v.key(k)
	if err != nil {
		return val, false, err
	}
	b, ok, err := v.c.get(key)
	if err != nil || !ok {
		return val, false, err
	}
	if val, err = v.vs.Decode(b); err != nil {
		return val, false, v.c.errorf("value: %w", err)
	}
	return val, true, nil
}

// Set sets the value of k, stamped with the state's clock under a TTL.
func (v *KeyedValue[K, V]) Set(k K, val V) error {
	key, err := v.key(k)
	if err != nil {
		return err
	}
	vb, err := v.vs.Encode(val)
	if err != nil {
		return v.c.errorf("value: %w", err)
	}
	return v.c.put(key, vb)
}

// Clear removes the value of k.
func (v *KeyedValue[K, V]) Clear(k K) error {
	key, err := v.key(k)
	if err != nil {
		return err
	}
	return v.c.delete(key)
}

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
	return s.v.st.register(t, "reducing", s.v.ks != nil && s.v.vs != nil, s.reduce != nil)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s ReducingSpec[K, V]) Open(ctx interface{ execContext() exec.Context }) *KeyedReducing[K, V] {
	return &KeyedReducing[K, V]{v: s.v.Open(ctx), reduce: s.reduce}
}

// View types a staged store like ValueSpec.View.
func (s ReducingSpec[K, V]) View(st *store.Staged) *KeyedReducing[K, V] {
	return &KeyedReducing[K, V]{v: s.v.View(st), reduce: s.reduce}
}

// KeyedReducing is a reducing state inside a task. It is a value state
// underneath (the same layout), so a value state may become a reducing
// state under the same name and keep its values.
type KeyedReducing[K, V any] struct {
	v      *KeyedValue[K, V]
	reduce func(V, V) V
}

// Add folds val into k's value: the value becomes val if k has none (or
// it expired), else reduce(value, val).
func (r *KeyedReducing[K, V]) Add(k K, val V) error {
	cur, ok, err := r.v.Get(k)
	if err != nil {
		return err
	}
	if ok {
		val = r.reduce(cur, val)
	}
	return r.v.Set(k, val)
}

// Get returns the reduction of k's values.
func (r *KeyedReducing[K, V]) Get(k K) (V, bool, error) { return r.v.Get(k) }

// Clear removes k's value.
func (r *KeyedReducing[K, V]) Clear(k K) error { return r.v.Clear(k) }

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
	return s.acc.st.register(t, "aggregating", s.acc.ks != nil && s.acc.vs != nil, s.init != nil && s.add != nil && s.result != nil)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s AggregatingSpec[K, IN, ACC, OUT]) Open(ctx interface{ execContext() exec.Context }) *KeyedAggregating[K, IN, ACC, OUT] {
	return &KeyedAggregating[K, IN, ACC, OUT]{acc: s.acc.Open(ctx), spec: s}
}

// View types a staged store like ValueSpec.View.
func (s AggregatingSpec[K, IN, ACC, OUT]) View(st *store.Staged) *KeyedAggregating[K, IN, ACC, OUT] {
	return &KeyedAggregating[K, IN, ACC, OUT]{acc: s.acc.View(st), spec: s}
}

// KeyedAggregating is an aggregating state inside a task.
type KeyedAggregating[K, IN, ACC, OUT any] struct {
	acc  *KeyedValue[K, ACC]
	spec AggregatingSpec[K, IN, ACC, OUT]
}

// Add adds in to k's accumulator, which starts as init() if k has none (or
// it expired).
func (a *KeyedAggregating[K, IN, ACC, OUT]) Add(k K, in IN) error {
	acc, ok, err := a.acc.Get(k)
	if err != nil {
		return err
	}
	if !ok {
		acc = a.spec.init()
	}
	return a.acc.Set(k, a.spec.add(in, acc))
}

// Get returns the result of k's accumulator; ok is false if k has none.
func (a *KeyedAggregating[K, IN, ACC, OUT]) Get(k K) (out OUT, ok bool, err error) {
	acc, ok, err := a.acc.Get(k)
	if err != nil || !ok {
		return out, false, err
	}
	return a.spec.result(acc), true, nil
}

// Clear removes k's accumulator.
func (a *KeyedAggregating[K, IN, ACC, OUT]) Clear(k K) error { return a.acc.Clear(k) }

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
	return s.st.register(t, "list", s.ks != nil && s.vs != nil, true)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s ListSpec[K, V]) Open(ctx interface{ execContext() exec.Context }) *KeyedList[K, V] {
	return &KeyedList[K, V]{c: s.st.openIn(ctx), ks: s.ks, vs: s.vs}
}

// View types a staged store like ValueSpec.View.
func (s ListSpec[K, V]) View(st *store.Staged) *KeyedList[K, V] {
	return &KeyedList[K, V]{c: s.st.open(st, nil), ks: s.ks, vs: s.vs}
}

// KeyedList is a list state inside a task. A key's list is stored as one
// value (see the layout at the top of state.go), so an Add costs a read and
// a rewrite of the whole list.
type KeyedList[K, V any] struct {
	c  keyed
	ks serde.Serde[K]
	vs serde.Serde[V]
}

func (l *KeyedList[K, V]) key(k K) ([]byte, error) {
	kb, err := l.ks.Encode(k)
	if err != nil {
		return nil, l.c.errorf("key: %w", err)
	}
	return listKey(kb), nil
}

// live calls fn with the raw bytes of each element of the list stored as b
// (nil: none) that is live at now, and says whether any was expired.
func (l *KeyedList[K, V]) live(b []byte, now int64, fn func(raw []byte, e entry) error) (expired bool, err error) {
	if b == nil {
		return false, nil
	}
	if len(b) == 0 || b[0] != listFormat {
		return false, l.c.errorf("%w: list of %d bytes", ErrCorruptState, len(b))
	}
	for rest := b[1:]; len(rest) > 0; {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return false, l.c.errorf("%w: list element length", ErrCorruptState)
		}
		raw := rest[w : w+int(n)]
		rest = rest[w+int(n):]
		e, err := parseEntry(raw)
		if err != nil {
			return false, l.c.errorf("list element: %w", err)
		}
		if l.c.expired(e, now) {
			expired = true
			continue
		}
		if err := fn(raw, e); err != nil {
			return false, err
		}
	}
	return expired, nil
}

func appendElement(dst, raw []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(raw))), raw...)
}

// Get returns k's list in the order of its elements' writes; nil if it has
// none. Expired elements are left out, and deleted.
func (l *KeyedList[K, V]) Get(k K) ([]V, error) {
	key, err := l.key(k)
	if err != nil {
		return nil, err
	}
	b, _, err := l.c.read(key)
	if err != nil {
		return nil, err
	}
	now, err := l.c.now()
	if err != nil {
		return nil, err
	}
	var vals []V
	var kept []byte
	expired, err := l.live(b, now, func(raw []byte, e entry) error {
		v, err := l.vs.Decode(e.payload)
		if err != nil {
			return l.c.errorf("value: %w", err)
		}
		vals = append(vals, v)
		kept = appendElement(kept, raw)
		return nil
	})
	if err != nil || !expired {
		return vals, err
	}
	if !l.c.cleans() {
		return vals, nil
	}
	if kept == nil {
		return vals, l.c.delete(key)
	}
	return vals, l.c.write(key, append([]byte{listFormat}, kept...))
}

// Add appends val to k's list, dropping the list's expired elements.
func (l *KeyedList[K, V]) Add(k K, val V) error {
	key, err := l.key(k)
	if err != nil {
		return err
	}
	vb, err := l.vs.Encode(val)
	if err != nil {
		return l.c.errorf("value: %w", err)
	}
	at, err := l.c.stamp()
	if err != nil {
		return err
	}
	b, _, err := l.c.read(key)
	if err != nil {
		return err
	}
	out := []byte{listFormat}
	// at is the clock when there is a TTL, so expiry is judged by it too.
	if _, err := l.live(b, at, func(raw []byte, _ entry) error {
		out = appendElement(out, raw)
		return nil
	}); err != nil {
		return err
	}
	return l.c.write(key, appendElement(out, l.c.appendEntry(nil, at, vb)))
}

// Update replaces k's list with vals, all stamped now; an empty vals
// clears it.
func (l *KeyedList[K, V]) Update(k K, vals []V) error {
	key, err := l.key(k)
	if err != nil {
		return err
	}
	if len(vals) == 0 {
		return l.c.delete(key)
	}
	at, err := l.c.stamp()
	if err != nil {
		return err
	}
	out := []byte{listFormat}
	var elem []byte
	for _, v := range vals {
		vb, err := l.vs.Encode(v)
		if err != nil {
			return l.c.errorf("value: %w", err)
		}
		elem = l.c.appendEntry(elem[:0], at, vb)
		out = appendElement(out, elem)
	}
	return l.c.write(key, out)
}

// Clear removes k's list.
func (l *KeyedList[K, V]) Clear(k K) error {
	key, err := l.key(k)
	if err != nil {
		return err
	}
	return l.c.delete(key)
}

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
	return s.st.register(t, "map", s.ks != nil && s.uks != nil && s.uvs != nil, true)
}

// Open returns the state in the task that ctx belongs to. Call it in Init.
func (s MapSpec[K, UK, UV]) Open(ctx interface{ execContext() exec.Context }) *KeyedMap[K, UK, UV] {
	return &KeyedMap[K, UK, UV]{c: s.st.openIn(ctx), ks: s.ks, uks: s.uks, uvs: s.uvs}
}

// View types a staged store like ValueSpec.View.
func (s MapSpec[K, UK, UV]) View(st *store.Staged) *KeyedMap[K, UK, UV] {
	return &KeyedMap[K, UK, UV]{c: s.st.open(st, nil), ks: s.ks, uks: s.uks, uvs: s.uvs}
}

// KeyedMap is a map state inside a task.
type KeyedMap[K, UK, UV any] struct {
	c   keyed
	ks  serde.Serde[K]
	uks serde.Serde[UK]
	uvs serde.Serde[UV]
}

func (m *KeyedMap[K, UK, UV]) prefix(k K) ([]byte, error) {
	kb, err := m.ks.Encode(k)
	if err != nil {
		return nil, m.c.errorf("key: %w", err)
	}
	return mapPrefix(kb), nil
}

func (m *KeyedMap[K, UK, UV]) key(k K, uk UK) ([]byte, error) {
	p, err := m.prefix(k)
	if err != nil {
		return nil, err
	}
	ukb, err := m.uks.Encode(uk)
	if err != nil {
		return nil, m.c.errorf("map key: %w", err)
	}
	return append(p, ukb...), nil
}

// Get returns the value under uk in k's map.
func (m *KeyedMap[K, UK, UV]) Get(k K, uk UK) (uv UV, ok bool, err error) {
	key, err := m.key(k, uk)
	if err != nil {
		return uv, false, err
	}
	b, ok, err := m.c.get(key)
	if err != nil || !ok {
		return uv, false, err
	}
	if uv, err = m.uvs.Decode(b); err != nil {
		return uv, false, m.c.errorf("value: %w", err)
	}
	return uv, true, nil
}

// Put sets uk to uv in k's map.
func (m *KeyedMap[K, UK, UV]) Put(k K, uk UK, uv UV) error {
	key, err := m.key(k, uk)
	if err != nil {
		return err
	}
	vb, err := m.uvs.Encode(uv)
	if err != nil {
		return m.c.errorf("value: %w", err)
	}
	return m.c.put(key, vb)
}

// Remove removes uk from k's map.
func (m *KeyedMap[K, UK, UV]) Remove(k K, uk UK) error {
	key, err := m.key(k, uk)
	if err != nil {
		return err
	}
	return m.c.delete(key)
}

// Range calls fn for each live entry of k's map, in byte order of the
// encoded map keys, and deletes the expired entries it passes once done.
// An error from fn stops the iteration and is returned as is. fn may read
// this state but not write to it: a write returns an error.
func (m *KeyedMap[K, UK, UV]) Range(k K, fn func(UK, UV) error) error {
	p, err := m.prefix(k)
	if err != nil {
		return err
	}
	now, err := m.c.now()
	if err != nil {
		return err
	}
	var expired [][]byte
	err = m.each(p, func(key []byte, e entry) error {
		if m.c.expired(e, now) {
			expired = append(expired, append([]byte(nil), key...))
			return nil
		}
		uk, err := m.uks.Decode(key[len(p):])
		if err != nil {
			return m.c.errorf("map key: %w", err)
		}
		uv, err := m.uvs.Decode(e.payload)
		if err != nil {
			return m.c.errorf("value: %w", err)
		}
		return fn(uk, uv)
	})
	for _, key := range expired {
		if derr := m.c.drop(key); err == nil {
			err = derr
		}
	}
	return err
}

// each calls fn with every entry whose key begins with p, with writes
// barred meanwhile.
func (m *KeyedMap[K, UK, UV]) each(p []byte, fn func(key []byte, e entry) error) error {
	if err := m.c.ready(); err != nil {
		return err
	}
	m.c.ranging++
	defer func() { m.c.ranging-- }()
	return m.c.s.Range(p, layout.PrefixEnd(p), func(key, b []byte) error {
		e, err := parseEntry(b)
		if err != nil {
			return m.c.errorf("%w", err)
		}
		return fn(key, e)
	})
}

// Clear removes k's whole map.
func (m *KeyedMap[K, UK, UV]) Clear(k K) error {
	p, err := m.prefix(k)
	if err != nil {
		return err
	}
	var keys [][]byte
	if err := m.c.ready(); err != nil {
		return err
	}
	// Only the keys are collected: an entry that does not parse is
	// cleared all the same.
	m.c.ranging++
	err = m.c.s.Range(p, layout.PrefixEnd(p), func(key, _ []byte) error {
		keys = append(keys, append([]byte(nil), key...))
		return nil
	})
	m.c.ranging--
	if err != nil {
		return m.c.errorf("%w", err)
	}
	for _, key := range keys {
		if err := m.c.delete(key); err != nil {
			return err
		}
	}
	return nil
}
