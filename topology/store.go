package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// StoreOption configures a store: InMemory, WithoutCache. Each is also a
// StateOption, which configures a keyed state's store.
type StoreOption interface {
	StateOption
	applyStore(*exec.Store)
}

// storeOpt is a StoreOption.
type storeOpt func(*exec.Store)

func (o storeOpt) applyStore(s *exec.Store) { o(s) }

// InMemory keeps the store in memory instead of Pebble: it keeps no local
// checkpoint and restores from the whole changelog whenever its task opens.
func InMemory() StoreOption { return storeOpt(func(s *exec.Store) { s.InMemory = true }) }

// WithoutCache turns off the write cache: every update of a key goes to the
// changelog, rather than only the last one of each commit.
func WithoutCache() StoreOption { return storeOpt(func(s *exec.Store) { s.Cache = false }) }

// Materialization names and types the store behind an aggregation, a table
// or a user's processor: Materialized makes one.
type Materialization[K, V any] struct {
	spec *exec.Store
	ks   serde.Serde[K]
	vs   serde.Serde[V]
}

// Name is the store's name.
func (m Materialization[K, V]) Name() string {
	if m.spec == nil {
		return ""
	}
	return m.spec.Name
}

// Materialized describes a key-value store: its name (which names its
// changelog topic <application.id>-<name>-changelog and its directory) and
// serdes. Pebble-backed with the write cache on, unless options say otherwise.
// It is the store of an aggregation or a table (Kafka Streams'
// Materialized.as) and of a user's processor (their
// Stores.keyValueStoreBuilder): pass it to Process.
func Materialized[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], opts ...StoreOption) Materialization[K, V] {
	spec := &exec.Store{Name: name, Cache: true, Query: ops.KVQuery(ks, vs), KeySerde: serde.ID(ks), ValueSerde: serde.ID(vs), Layout: layout.KindKV}
	for _, o := range opts {
		o.applyStore(spec)
	}
	return Materialization[K, V]{spec: spec, ks: ks, vs: vs}
}

// KeyValueStore is Materialized, which serves Process too.
//
// Deprecated: use Materialized.
func KeyValueStore[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], opts ...StoreOption) Materialization[K, V] {
	return Materialized(name, ks, vs, opts...)
}

func (m Materialization[K, V]) register(t *Topology) bool {
	if m.spec == nil || m.spec.Name == "" {
		t.errorf(ErrMissingName, "a store must be named")
		return false
	}
	if m.ks == nil || m.vs == nil {
		t.errorf(ErrMissingSerde, "store %q needs a key and a value serde", m.spec.Name)
		return false
	}
	if t.registered(m.spec) {
		return true // the same store handed to two processors of one sub-topology
	}
	t.addStore(m.spec)
	return true
}

// KV is a typed key-value store inside a task. Writes are staged until the
// task's transaction commits; reads see them at once.
type KV[K, V any] struct{ kv *ops.KV[K, V] }

// folding marks n, a node that writes each key to the store right before it
// forwards the key's update, as one whose updates may fold until the commit
// when the store is cached, as in Kafka Streams (processor.FoldUpdates).
func (m Materialization[K, V]) folding(n *exec.Node) *exec.Node {
	if m.spec.Cache {
		n.FoldStore = m.Name()
	}
	return n
}

// Open returns the store in the task that ctx belongs to. Call it in Init.
func (m Materialization[K, V]) Open(ctx StateContext) *KV[K, V] {
	return m.open(ctx.processContext().Exec())
}

func (m Materialization[K, V]) open(c exec.Context) *KV[K, V] {
	return m.View(c.Store(m.spec.Name))
}

// View types a staged store with the materialization's serdes. It is for
// drivers that reach a task's stores from outside, like the test driver.
func (m Materialization[K, V]) View(s *store.Staged) *KV[K, V] {
	return &KV[K, V]{kv: m.kvStore().View(s)}
}

// kvStore is what a runtime needs of the store: its name and serdes.
func (m Materialization[K, V]) kvStore() ops.KVStore[K, V] {
	return ops.KVStore[K, V]{Name: m.Name(), Key: m.ks, Value: m.vs}
}

// Get returns the value of k.
func (kv *KV[K, V]) Get(k K) (v V, ok bool, err error) { return kv.kv.Get(k) }

// Put sets k to v.
func (kv *KV[K, V]) Put(k K, v V) error { return kv.kv.Put(k, v) }

// Delete removes k.
func (kv *KV[K, V]) Delete(k K) error { return kv.kv.Delete(k) }

// Range calls fn for each entry with an encoded key in [from, to) (nil: open),
// in byte order of the encoded keys.
func (kv *KV[K, V]) Range(from, to *K, fn func(K, V) error) error { return kv.kv.Range(from, to, fn) }
