package ops

import (
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
)

// ListState is a list state in a task. A key's list is stored as one value
// (layout.ListKey), so an Add costs a read and a rewrite of the whole
// list; under a TTL each element expires on its own.
type ListState[K, V any] struct {
	c  *Keyed
	ks serde.Serde[K]
	vs serde.Serde[V]
}

// NewListState types c with the state's serdes.
func NewListState[K, V any](c *Keyed, ks serde.Serde[K], vs serde.Serde[V]) *ListState[K, V] {
	return &ListState[K, V]{c: c, ks: ks, vs: vs}
}

func (l *ListState[K, V]) key(k K) ([]byte, error) {
	kb, err := l.ks.Encode(k)
	if err != nil {
		return nil, l.c.errorf("key: %w", err)
	}
	return layout.ListKey(kb), nil
}

// live calls fn with the raw bytes of each element of the list stored as b
// (nil: none) that is live at now, and says whether any was expired.
func (l *ListState[K, V]) live(b []byte, now int64, fn func(raw []byte, e layout.Entry) error) (expired bool, err error) {
	if b == nil {
		return false, nil
	}
	err = layout.ListElements(b, func(raw []byte) error {
		e, err := l.c.parse(raw)
		if err != nil {
			return l.c.errorf("list element: %w", err)
		}
		if l.c.expired(e, now) {
			expired = true
			return nil
		}
		return fn(raw, e)
	})
	if _, ok := err.(layout.StateCorruption); ok {
		// The list itself, not an element or fn: the layout's error
		// as it is, which no wrapping of ours has reached.
		return false, l.c.errorf("%w", l.c.corrupt(err))
	}
	if err != nil {
		return false, err
	}
	return expired, nil
}

// Get returns k's list in the order of its elements' writes; nil if it has
// none. Expired elements are left out, and deleted.
func (l *ListState[K, V]) Get(k K) ([]V, error) {
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
	expired, err := l.live(b, now, func(raw []byte, e layout.Entry) error {
		v, err := l.vs.Decode(e.Payload)
		if err != nil {
			return l.c.errorf("value: %w", err)
		}
		vals = append(vals, v)
		kept = layout.AppendListElement(kept, raw)
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
	return vals, l.c.write(key, append([]byte{layout.ListFormat}, kept...))
}

// Add appends val to k's list, dropping the list's expired elements.
func (l *ListState[K, V]) Add(k K, val V) error {
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
	out := []byte{layout.ListFormat}
	// at is the clock when there is a TTL, so expiry is judged by it too.
	if _, err := l.live(b, at, func(raw []byte, _ layout.Entry) error {
		out = layout.AppendListElement(out, raw)
		return nil
	}); err != nil {
		return err
	}
	return l.c.write(key, layout.AppendListElement(out, l.c.appendEntry(nil, at, vb)))
}

// Update replaces k's list with vals, all stamped now; an empty vals
// clears it.
func (l *ListState[K, V]) Update(k K, vals []V) error {
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
	out := []byte{layout.ListFormat}
	var elem []byte
	for _, v := range vals {
		vb, err := l.vs.Encode(v)
		if err != nil {
			return l.c.errorf("value: %w", err)
		}
		elem = l.c.appendEntry(elem[:0], at, vb)
		out = layout.AppendListElement(out, elem)
	}
	return l.c.write(key, out)
}

// Clear removes k's list.
func (l *ListState[K, V]) Clear(k K) error {
	key, err := l.key(k)
	if err != nil {
		return err
	}
	return l.c.delete(key)
}
