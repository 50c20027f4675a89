package state

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
)

// Entry is one entry of a store read through the topology's serdes
// (Entries): Key and Value decoded when the store's layout and serdes are
// known (key-value and window stores of a reader opened WithTopology),
// nil with Decoded false otherwise. Raw holds the stored bytes; for a
// window its Key is the window's key encoding and its Value is nil (the
// stored window state is not the aggregate alone).
type Entry struct {
	Raw     Record
	Decoded bool
	// DecodeErr is why an entry of a store with known serdes did not
	// decode (a key its key serde refuses, say): the entry is then raw,
	// so that one bad entry does not hide the others.
	DecodeErr error
	Key       any
	Value     any
	// Window is set for an entry of a window store.
	Window *Bounds
}

// Bounds is a window's [Start, End), epoch milliseconds.
type Bounds struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Entries calls fn for every entry of the store called name, decoded
// through the serdes the topology given to WithTopology declares for it:
// a key-value store's entries, a window store's windows (purged windows,
// index entries and the time state left out), and every raw entry of any
// other store.
func (r *Reader) Entries(name string, fn func(Entry) error) error {
	ss, err := r.match(name)
	if err != nil {
		return err
	}
	q := r.query(name)
	switch {
	case q != nil && q.Windows != nil:
		return r.windowEntries(ss, q.Windows, q.Key, fn)
	case q != nil && q.Value != nil:
		return r.Records(name, func(rec Record) error {
			return fn(decodeKV(name, rec, q.Key, q.Value))
		})
	}
	return r.Records(name, func(rec Record) error { return fn(Entry{Raw: rec}) })
}

// Lookup returns the entries of key (its encoding) in the store called
// name, decoded as Entries does: the value of a key-value store, the
// windows of a window store, the raw entry of any other. ErrNotFound if
// there are none.
func (r *Reader) Lookup(name string, key []byte) ([]Entry, error) {
	ss, err := r.match(name)
	if err != nil {
		return nil, err
	}
	q := r.query(name)
	var out []Entry
	if q != nil && q.Windows != nil {
		for _, s := range ss {
			if err := r.keyWindows(s, key, q.Windows, q.Key, func(e Entry) error { out = append(out, e); return nil }); err != nil {
				return nil, err
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: key %q has no window in store %q", ErrNotFound, key, name)
		}
		return out, nil
	}
	recs, err := r.Get(name, key)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		e := Entry{Raw: rec}
		if q != nil && q.Value != nil {
			e = decodeKV(name, rec, q.Key, q.Value)
		}
		out = append(out, e)
	}
	return out, nil
}

// KeyFromText encodes a key given as text for the store called name: the
// text itself for string and []byte keys, the JSON of any other key type,
// through the store's key serde; without a known serde, the text's bytes.
func (r *Reader) KeyFromText(name, text string) ([]byte, error) {
	if _, err := r.match(name); err != nil {
		return nil, err
	}
	if q := r.query(name); q != nil && q.KeyFromText != nil {
		return q.KeyFromText(text)
	}
	return []byte(text), nil
}

func decodeKV(name string, rec Record, dk, dv func([]byte) (any, error)) Entry {
	k, err := dk(rec.Key)
	if err != nil {
		return Entry{Raw: rec, DecodeErr: fmt.Errorf("state: store %q task %s: key %x: %w", name, rec.Task, rec.Key, err)}
	}
	v, err := dv(rec.Value)
	if err != nil {
		return Entry{Raw: rec, DecodeErr: fmt.Errorf("state: store %q task %s: value of key %x: %w", name, rec.Task, rec.Key, err)}
	}
	return Entry{Raw: rec, Decoded: true, Key: k, Value: v}
}

type windowsFunc = func(s *store.Staged, key []byte, fn func(start, end int64, value any) error) error

// windowEntries lists each copy's keys from its window data entries, then
// reads each key's windows through the store's own query hook, so that
// they are decoded exactly as interactive queries decode them. Keys go in
// byte order whatever the store's layout.
func (r *Reader) windowEntries(ss []*storeDir, windows windowsFunc, dk func([]byte) (any, error), fn func(Entry) error) error {
	for _, s := range ss {
		var keys [][]byte
		seen := map[string]bool{}
		err := r.rangeWindows(s, func(key, _ []byte) error {
			kb, _, err := layout.ParseWindowKey(key)
			if err != nil {
				return fmt.Errorf("%w: store %q task %s (%s): %w", ErrCorrupt, s.info.Store, s.info.Task, s.info.Dir, err)
			}
			if !seen[string(kb)] {
				seen[string(kb)] = true
				keys = append(keys, slices.Clone(kb))
			}
			return nil
		})
		if err != nil {
			return err
		}
		slices.SortFunc(keys, bytes.Compare)
		for _, kb := range keys {
			if err := r.keyWindows(s, kb, windows, dk, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Reader) keyWindows(s *storeDir, kb []byte, windows windowsFunc, dk func([]byte) (any, error), fn func(Entry) error) error {
	eng, err := r.engine(s)
	if err != nil {
		return err
	}
	raw := Record{Application: s.info.Application, Task: s.info.Task, Partition: s.info.Partition, Key: slices.Clone(kb)}
	k, err := dk(kb)
	if err != nil {
		// The key's windows cannot be shown decoded: one raw entry for
		// the key says so, and the others go on.
		return fn(Entry{Raw: raw, DecodeErr: fmt.Errorf("state: store %q task %s: key %x: %w", s.info.Store, s.info.Task, kb, err)})
	}
	// A stage over the read-only engine: the hook reads through it and
	// nothing is ever written to it.
	st := store.NewStaged(s.info.Store, eng)
	var fnErr error
	err = windows(st, kb, func(start, end int64, v any) error {
		fnErr = fn(Entry{Raw: raw, Decoded: true, Key: k, Value: v, Window: &Bounds{Start: start, End: end}})
		return fnErr
	})
	if err != nil && fnErr != nil {
		return fnErr // fn's own error, unchanged: it is the caller's to recognise
	}
	if err != nil {
		return r.storeErr(s, err)
	}
	return nil
}

// query is the store's read hooks from the topology, nil if unknown.
func (r *Reader) query(name string) *queryHooks {
	if r.plan == nil {
		return nil
	}
	spec, ok := r.plan.Stores[name]
	if !ok || spec.Query == nil {
		return nil
	}
	q := spec.Query
	return &queryHooks{KeyFromText: q.KeyFromText, Key: q.Key, Value: q.Value, Windows: q.Windows}
}

type queryHooks struct {
	KeyFromText func(string) ([]byte, error)
	Key, Value  func([]byte) (any, error)
	Windows     windowsFunc
}
