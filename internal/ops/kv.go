package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// KVStore names a key-value store (layout/kv.go) and gives its serdes:
// what a runtime needs to open the store in its task.
type KVStore[K, V any] struct {
	Name  string
	Key   serde.Serde[K]
	Value serde.Serde[V]
}

// Open returns the store in the task that ctx belongs to; the node must
// have declared it.
func (s KVStore[K, V]) Open(ctx exec.Context) *KV[K, V] { return s.View(ctx.Store(s.Name)) }

// View types the staged store st with s's serdes.
func (s KVStore[K, V]) View(st *store.Staged) *KV[K, V] {
	return &KV[K, V]{s: st, ks: s.Key, vs: s.Value}
}

// KV is a typed key-value store inside a task. Writes are staged until the
// task's transaction commits; reads see them at once. Keys and values are
// their serdes' encodings (layout/kv.go).
type KV[K, V any] struct {
	s  *store.Staged
	ks serde.Serde[K]
	vs serde.Serde[V]
	// scratch holds the encoded key (and value) of a Get, Put or Delete:
	// the stage copies what it keeps, so one buffer serves every call.
	scratch []byte
	// updating says that scratch starts with the key the last
	// GetForUpdate encoded, updateN bytes, for WriteUpdate.
	updating bool
	updateN  int
}

// encode encodes k, and v unless it is nil, into the scratch buffer.
func (kv *KV[K, V]) encode(k K, v *V) (kb, vb []byte, err error) {
	kv.updating = false
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

// Get returns the value of k.
func (kv *KV[K, V]) Get(k K) (v V, ok bool, err error) { return kv.get(k, readLatest) }

// GetForUpdate is Get for a key written next (store.Staged.GetForUpdate).
func (kv *KV[K, V]) GetForUpdate(k K) (v V, ok bool, err error) { return kv.get(k, readForUpdate) }

// Forwarded reads k's value as its table last forwarded it
// (store.Staged.Forwarded): with folding, the value before its held update.
func (kv *KV[K, V]) Forwarded(k K) (v V, ok bool, err error) { return kv.get(k, readForwarded) }

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
		kv.updating, kv.updateN = true, len(kb)
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

// WriteUpdate writes the key the last GetForUpdate read, without encoding
// it again: v, or a delete (!has), held back until the flush if hold
// (store.Staged.PutHeld, with the record context; the headers travel in
// the entry's meta, which holds nothing without any). No other call on kv
// may come between the two.
func (kv *KV[K, V]) WriteUpdate(v V, has, hold bool, ts int64, hs []exec.Header) error {
	if !kv.updating {
		return fmt.Errorf("store %s: a write of no key read for update", kv.s.Name())
	}
	kv.updating = false
	n := kv.updateN
	kb, vb := kv.scratch[:n:n], []byte(nil)
	if has {
		b, err := serde.AppendEncode(kv.vs, kv.scratch[:n], v)
		if err != nil {
			return fmt.Errorf("store %s: value: %w", kv.s.Name(), err)
		}
		kv.scratch, kb, vb = b, b[:n:n], b[n:]
	}
	switch {
	case hold:
		var meta any
		if len(hs) > 0 {
			meta = hs
		}
		return kv.s.PutHeld(kb, vb, ts, meta)
	case has:
		return kv.s.Put(kb, vb)
	default:
		return kv.s.Delete(kb)
	}
}

// Delete removes k.
func (kv *KV[K, V]) Delete(k K) error {
	kb, _, err := kv.encode(k, nil)
	if err != nil {
		return err
	}
	return kv.s.Delete(kb)
}

// DecodeChange decodes a held update (store.Held) of the store.
func (kv *KV[K, V]) DecodeChange(h store.Held) (k K, ch exec.ChangeOf[V], err error) {
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
