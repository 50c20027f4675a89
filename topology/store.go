package topology

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// StoreOption configures a store.
type StoreOption func(*exec.Store)

// InMemory keeps the store in memory instead of Pebble: it keeps no local
// checkpoint and restores from the whole changelog whenever its task opens.
func InMemory() StoreOption { return func(s *exec.Store) { s.InMemory = true } }

// WithoutCache turns off the write cache: every update of a key goes to the
// changelog, rather than only the last one of each commit.
func WithoutCache() StoreOption { return func(s *exec.Store) { s.Cache = false } }

// Materialization names and types the store behind an aggregation or a
// user's processor: KeyValueStore and Materialized make one.
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
func Materialized[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V], opts ...StoreOption) Materialization[K, V] {
	spec := &exec.Store{Name: name, Cache: true, Query: kvQuery(ks, vs)}
	for _, o := range opts {
		o(spec)
	}
	return Materialization[K, V]{spec: spec, ks: ks, vs: vs}
}

// KeyValueStore is Materialized, named for use with Process.
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
	if existing, ok := t.stores[m.spec.Name]; ok && existing == m.spec {
		return true // the same store handed to two processors of one sub-topology
	}
	t.addStore(m.spec)
	return true
}

// KV is a typed key-value store inside a task. Writes are staged until the
// task's transaction commits; reads see them at once.
type KV[K, V any] struct {
	s  *store.Staged
	ks serde.Serde[K]
	vs serde.Serde[V]
	// scratch holds the encoded key (and value) of a Get, Put or Delete:
	// the stage copies what it keeps, so one buffer serves every call.
	scratch []byte
}

// encode encodes k, and v unless it is nil, into the scratch buffer.
func (kv *KV[K, V]) encode(k K, v *V) (kb, vb []byte, err error) {
	if kv.scratch == nil {
		// Non-nil even when empty: a nil value would read as a delete.
		kv.scratch = make([]byte, 0, 64)
	}
	b, err := serde.AppendEncode(kv.ks, kv.scratch[:0], k)
	if err != nil {
		return nil, nil, fmt.Errorf("store %s: key: %w", kv.s.Name(), err)
	}
	n := len(b)
	if v != nil {
		if b, err = serde.AppendEncode(kv.vs, b, *v); err != nil {
			return nil, nil, fmt.Errorf("store %s: value: %w", kv.s.Name(), err)
		}
		vb = b[n:]
	}
	kv.scratch = b
	return b[:n:n], vb, nil
}

// folding marks n, a node that writes each key to the store right before it
// forwards the key's update, as one whose updates may fold until the commit
// when the store is cached, as in Kafka Streams (processor.FoldUpdates).
func (m Materialization[K, V]) folding(n *exec.Node) *exec.Node {
	if m.spec.Cache {
		n.FoldStore = m.Name()
	}
	return n
}

// tableWriter is what the nodes that keep a table in m and forward its
// changes share (aggregations, table sources): the typed store and, with
// folding (exec.Context.Folding), holding each change back in the store
// until the flush instead of forwarding it. It is the Processor's Init,
// Close and Unfold of such a node.
type tableWriter[K, V any] struct {
	m    Materialization[K, V]
	kv   *KV[K, V]
	ctx  exec.Context
	fold bool
	// out is the typed chain the node's output goes to, if the task
	// linked one (tableTyped), and frame the task's.
	out   func(K, exec.ChangeOf[V]) error
	frame *exec.Frame
}

// linkOut keeps the typed chain the node's output goes to.
func (w *tableWriter[K, V]) linkOut(f *exec.Frame, out func(K, exec.ChangeOf[V]) error) {
	w.frame, w.out = f, out
}

func (w *tableWriter[K, V]) Init(ctx exec.Context) error {
	w.ctx, w.kv, w.fold = ctx, w.m.open(ctx), ctx.Folding()
	return nil
}

func (w *tableWriter[K, V]) Close() error { return nil }

// get reads k's value for an update.
func (w *tableWriter[K, V]) get(k K) (V, bool, error) { return w.kv.getForUpdate(k) }

// write stores k's new value, or deletes k (!ch.HasNew). With folding it
// holds ch back until the flush, with its record context, and reports held.
func (w *tableWriter[K, V]) write(k K, ch exec.ChangeOf[V], ts int64, hs []exec.Header) (held bool, err error) {
	switch {
	case w.fold:
		return true, w.kv.putHeld(k, ch.New, ch.HasNew, ts, hs)
	case ch.HasNew:
		return false, w.kv.Put(k, ch.New)
	default:
		return false, w.kv.Delete(k)
	}
}

// change writes ch, the change of r's key k, and forwards it as r's value,
// unless it was held.
func (w *tableWriter[K, V]) change(r exec.Record, k K, ch exec.ChangeOf[V]) error {
	held, err := w.write(k, ch, r.Timestamp, r.Headers)
	if held || err != nil {
		return err
	}
	r.Value = ch.Erase()
	return w.ctx.Forward(r)
}

// Unfold forwards a held update (exec.Unfolder), through the typed chain
// if there is one; a key that was added and deleted since the last flush
// did not change.
func (w *tableWriter[K, V]) Unfold(h store.Held) error {
	k, ch, err := w.kv.decodeChange(h)
	if err != nil || !ch.HasOld && !ch.HasNew {
		return err
	}
	hs, _ := h.Meta.([]exec.Header)
	if w.out != nil {
		w.frame.Timestamp, w.frame.Headers = h.Timestamp, hs
		return w.out(k, ch)
	}
	return w.ctx.Forward(exec.Record{Key: k, Value: ch.Erase(), Timestamp: h.Timestamp, Headers: hs})
}

// tableTyped is the exec.Typed of a node that keeps a table of K and V
// (its Processor embeds a tableWriter): its output is a typed chain of
// changes, which the writer keeps for its held updates. input, if not
// nil, makes the node's own entry from its Processor and that output; nil:
// the node takes no typed input.
func tableTyped[K, V any](input func(p exec.Processor, f *exec.Frame, out func(K, exec.ChangeOf[V]) error) any) *exec.Typed {
	return &exec.Typed{
		Link: func(f *exec.Frame, p exec.Processor, next any) any {
			out, ok := next.(func(K, exec.ChangeOf[V]) error)
			if !ok {
				return nil
			}
			p.(interface {
				linkOut(*exec.Frame, func(K, exec.ChangeOf[V]) error)
			}).linkOut(f, out)
			if input == nil {
				return nil
			}
			return input(p, f, out)
		},
		Out: func(f *exec.Frame, receive func(exec.Record) error) any {
			return func(k K, ch exec.ChangeOf[V]) error {
				return receive(exec.Record{Key: k, Value: ch.Erase(), Timestamp: f.Timestamp, Headers: f.Headers})
			}
		},
		Fan: exec.ChainFan[K, exec.ChangeOf[V]],
	}
}

// Open returns the store in the task that ctx belongs to. Call it in Init.
func (m Materialization[K, V]) Open(ctx StateContext) *KV[K, V] {
	return &KV[K, V]{s: ctx.processContext().Exec().Store(m.spec.Name), ks: m.ks, vs: m.vs}
}

func (m Materialization[K, V]) open(c exec.Context) *KV[K, V] {
	return m.View(c.Store(m.spec.Name))
}

// View types a staged store with the materialization's serdes. It is for
// drivers that reach a task's stores from outside, like the test driver.
func (m Materialization[K, V]) View(s *store.Staged) *KV[K, V] {
	return &KV[K, V]{s: s, ks: m.ks, vs: m.vs}
}

// Get returns the value of k.
func (kv *KV[K, V]) Get(k K) (v V, ok bool, err error) { return kv.get(k, readLatest) }

// getForUpdate is Get for a key written next (store.Staged.GetForUpdate).
func (kv *KV[K, V]) getForUpdate(k K) (v V, ok bool, err error) { return kv.get(k, readForUpdate) }

// forwarded reads k's value as its table last forwarded it
// (store.Staged.Forwarded): with folding, the value before its held update.
func (kv *KV[K, V]) forwarded(k K) (v V, ok bool, err error) { return kv.get(k, readForwarded) }

// readMode says which of the stage's reads get makes.
type readMode uint8

const (
	readLatest readMode = iota
	readForUpdate
	readForwarded
)

func (kv *KV[K, V]) get(k K, mode readMode) (v V, ok bool, err error) {
	kb, _, err := kv.encode(k, nil)
	if err != nil {
		return v, false, err
	}
	var b []byte
	switch mode {
	case readForUpdate:
		b, ok, err = kv.s.GetForUpdate(kb)
	case readForwarded:
		b, ok, err = kv.s.Forwarded(kb)
	default:
		b, ok, err = kv.s.Get(kb)
	}
	if err != nil || !ok {
		return v, ok, err
	}
	v, err = kv.vs.Decode(b)
	if err != nil {
		return v, false, fmt.Errorf("store %s: value: %w", kv.s.Name(), err)
	}
	return v, true, nil
}

// Put sets k to v.
func (kv *KV[K, V]) Put(k K, v V) error {
	kb, vb, err := kv.encode(k, &v)
	if err != nil {
		return err
	}
	return kv.s.Put(kb, vb)
}

// putHeld writes k's new value, or deletes k (!has), holding the update
// back until the flush (store.Staged.PutHeld) with its record context; the
// headers travel in the entry's meta, which holds nothing without any.
func (kv *KV[K, V]) putHeld(k K, v V, has bool, ts int64, hs []exec.Header) error {
	var vp *V
	if has {
		vp = &v
	}
	kb, vb, err := kv.encode(k, vp)
	if err != nil {
		return err
	}
	var meta any
	if len(hs) > 0 {
		meta = hs
	}
	return kv.s.PutHeld(kb, vb, ts, meta)
}

// Delete removes k.
func (kv *KV[K, V]) Delete(k K) error {
	kb, _, err := kv.encode(k, nil)
	if err != nil {
		return err
	}
	return kv.s.Delete(kb)
}

// decodeChange decodes a held update (store.Held) of the store.
func (kv *KV[K, V]) decodeChange(h store.Held) (k K, ch exec.ChangeOf[V], err error) {
	if k, err = kv.ks.Decode(h.Key); err != nil {
		return k, ch, fmt.Errorf("store %s: key: %w", kv.s.Name(), err)
	}
	if h.Prev != nil {
		if ch.Old, err = kv.vs.Decode(h.Prev); err != nil {
			return k, ch, fmt.Errorf("store %s: value: %w", kv.s.Name(), err)
		}
		ch.HasOld = true
	}
	if h.Value != nil {
		if ch.New, err = kv.vs.Decode(h.Value); err != nil {
			return k, ch, fmt.Errorf("store %s: value: %w", kv.s.Name(), err)
		}
		ch.HasNew = true
	}
	return k, ch, nil
}

// Range calls fn for each entry with an encoded key in [from, to) (nil: open),
// in byte order of the encoded keys.
func (kv *KV[K, V]) Range(from, to *K, fn func(K, V) error) error {
	var fb, tb []byte
	var err error
	if from != nil {
		if fb, err = kv.ks.Encode(*from); err != nil {
			return err
		}
	}
	if to != nil {
		if tb, err = kv.ks.Encode(*to); err != nil {
			return err
		}
	}
	return kv.s.Range(fb, tb, func(kb, vb []byte) error {
		k, err := kv.ks.Decode(kb)
		if err != nil {
			return err
		}
		v, err := kv.vs.Decode(vb)
		if err != nil {
			return err
		}
		return fn(k, v)
	})
}
