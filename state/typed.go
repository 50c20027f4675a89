package state

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
)

// KeyValue is one entry of a key-value store, decoded.
type KeyValue[K, V any] struct {
	Task      string
	Partition int32
	Key       K
	Value     V
}

// Window is one window of a window or session store, decoded: the window
// [Start, End) of Key holds the aggregate Value.
type Window[K, V any] struct {
	Task       string
	Partition  int32
	Key        K
	Start, End int64
	Value      V
}

// checkLayout refuses a store whose known layout is not want; an unknown
// layout (no topology) is the caller's to know.
func checkLayout(r *Reader, name string, want ...string) error {
	got, err := r.Layout(name)
	if err != nil {
		return err
	}
	if got == LayoutUnknown {
		return nil
	}
	for _, w := range want {
		if got == w {
			return nil
		}
	}
	return fmt.Errorf("%w: store %q is a %s store, not %v", ErrLayout, name, got, want)
}

// KeyValues calls fn for every entry of the key-value store called name,
// decoded with ks and vs (the store's serdes: layout.KindKV keeps their
// encodings as they are). A decoding error names the task and the key.
func KeyValues[K, V any](r *Reader, name string, ks serde.Serde[K], vs serde.Serde[V], fn func(KeyValue[K, V]) error) error {
	if err := checkLayout(r, name, string(layout.KindKV), LayoutGlobal); err != nil {
		return err
	}
	return r.Records(name, func(rec Record) error {
		k, err := ks.Decode(rec.Key)
		if err != nil {
			return fmt.Errorf("state: store %q task %s: key %x: %w", name, rec.Task, rec.Key, err)
		}
		v, err := vs.Decode(rec.Value)
		if err != nil {
			return fmt.Errorf("state: store %q task %s: value of key %x: %w", name, rec.Task, rec.Key, err)
		}
		return fn(KeyValue[K, V]{Task: rec.Task, Partition: rec.Partition, Key: k, Value: v})
	})
}

// Lookup returns the value of key in the key-value store called name;
// ErrNotFound if no partition holds it.
func Lookup[K, V any](r *Reader, name string, ks serde.Serde[K], vs serde.Serde[V], key K) (V, error) {
	var zero V
	if err := checkLayout(r, name, string(layout.KindKV), LayoutGlobal); err != nil {
		return zero, err
	}
	kb, err := ks.Encode(key)
	if err != nil {
		return zero, fmt.Errorf("state: encode key: %w", err)
	}
	recs, err := r.Get(name, kb)
	if err != nil {
		return zero, err
	}
	v, err := vs.Decode(recs[0].Value)
	if err != nil {
		return zero, fmt.Errorf("state: store %q task %s: value of key %x: %w", name, recs[0].Task, kb, err)
	}
	return v, nil
}

// Windows calls fn for every window kept in the window or session store
// called name (layout.KindWindow's data entries: the index entries and the
// time state are skipped, and so are purged windows, which hold nothing),
// task by task, in the store's order (by key bytes then start; in a store
// laid out by start, that of fixed-size windows, by start then key bytes),
// decoded with ks and the aggregate's serde vs.
func Windows[K, V any](r *Reader, name string, ks serde.Serde[K], vs serde.Serde[V], fn func(Window[K, V]) error) error {
	if err := checkLayout(r, name, string(layout.KindWindow)); err != nil {
		return err
	}
	ss, err := r.match(name)
	if err != nil {
		return err
	}
	for _, s := range ss {
		err := r.rangeWindows(s, func(key, val []byte) error {
			kb, start, err := layout.ParseWindowKey(key)
			if err != nil {
				return fmt.Errorf("%w: store %q task %s (%s): %w", ErrCorrupt, name, s.info.Task, s.info.Dir, err)
			}
			st, ab, err := layout.ParseWindowValue(val)
			if err != nil {
				return fmt.Errorf("%w: store %q task %s (%s): key %x: %w", ErrCorrupt, name, s.info.Task, s.info.Dir, kb, err)
			}
			if !st.Records {
				return nil
			}
			k, err := ks.Decode(kb)
			if err != nil {
				return fmt.Errorf("state: store %q task %s: key %x: %w", name, s.info.Task, kb, err)
			}
			v, err := vs.Decode(ab)
			if err != nil {
				return fmt.Errorf("state: store %q task %s: window [%d, %d) of key %x: %w", name, s.info.Task, start, st.End, kb, err)
			}
			return fn(Window[K, V]{Task: s.info.Task, Partition: s.info.Partition, Key: k, Start: start, End: st.End, Value: v})
		})
		if err != nil {
			return err
		}
	}
	return nil
}
