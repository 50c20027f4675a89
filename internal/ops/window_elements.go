package ops

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

// Element is one record kept in a window (topology.Element, which
// topology converts to and from).
type Element[V any] struct {
	Value     V
	Timestamp int64
}

// WindowElements is a window runtime's element mode: each window's records
// are kept as element entries in its store (layout/elements.go), and a
// firing hands them to Fire.
type WindowElements[K, V any] struct {
	// Values encodes one element's value.
	Values serde.Serde[V]
	// Before and After, when set, evict elements before and after Fire
	// sees them: they return the elements to keep, in order.
	Before, After func(window.Bounds, []Element[V]) []Element[V]
	// Fire makes a firing's results from the window's elements.
	Fire func(K, window.Bounds, []Element[V]) []any
	// Table: the results are a table's (aggregations over count windows),
	// forwarded as changes; else a stream's (ProcessWindows).
	Table bool
}

// addElement appends a record to window w (stored under key).
func (p *Window[K, V, A]) addElement(key []byte, w *WindowState[A], v V, ts int64) error {
	vb, err := p.elements.Values.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: value: %w", p.s.name, err)
	}
	w.Seq++
	w.HasAgg = true
	return p.s.st.Put(layout.ElementKey(key, w.Seq-1), layout.AppendElement(make([]byte, 0, 8+len(vb)), ts, vb))
}

// trimElements drops window w's oldest element once it holds more than
// trim (sliding count windows with a trigger given): the count evictor
// would drop it at the next firing anyway, and the trigger may fire
// rarely, or never. Elements are numbered consecutively up to Seq-1 and
// this runs on every addition, so at most one is over.
func (p *Window[K, V, A]) trimElements(key []byte, w *WindowState[A]) error {
	if p.trim <= 0 {
		return nil
	}
	pre := layout.ElementPrefix(key)
	k, _, ok, err := p.s.st.First(pre, layout.PrefixEnd(pre))
	if err != nil || !ok {
		return err
	}
	oldest, ok := layout.ElementSeq(k)
	if ok && w.Seq-oldest > p.trim {
		return p.s.st.Delete(layout.ElementKey(key, oldest))
	}
	return nil
}

// loadElements reads a window's elements with their store keys.
func (p *Window[K, V, A]) loadElements(key []byte) ([]Element[V], [][]byte, error) {
	var elems []Element[V]
	var keys [][]byte
	pre := layout.ElementPrefix(key)
	err := p.s.st.Range(pre, layout.PrefixEnd(pre), func(k, val []byte) error {
		ts, vb, err := layout.ParseElement(val)
		if err != nil {
			return fmt.Errorf("store %s: %w", p.s.name, err)
		}
		v, err := p.elements.Values.Decode(vb)
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.s.name, err)
		}
		elems = append(elems, Element[V]{Value: v, Timestamp: ts})
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	return elems, keys, err
}

// evict runs e; if it removed elements, the window's element entries are
// rewritten to what it kept.
func (p *Window[K, V, A]) evict(key []byte, w *WindowState[A], e func(window.Bounds, []Element[V]) []Element[V], elems []Element[V], keys [][]byte) ([]Element[V], [][]byte, error) {
	if e == nil || len(elems) == 0 {
		return elems, keys, nil
	}
	kept := e(w.Bounds, slices.Clone(elems))
	if len(kept) == len(elems) {
		return elems, keys, nil
	}
	for _, k := range keys {
		if err := p.s.st.Delete(k); err != nil {
			return nil, nil, err
		}
	}
	keys = keys[:0]
	w.HasAgg = false
	for _, el := range kept {
		if err := p.addElement(key, w, el.Value, el.Timestamp); err != nil {
			return nil, nil, err
		}
		keys = append(keys, layout.ElementKey(key, w.Seq-1))
	}
	return kept, keys, nil
}

// fireElements evicts, calls the function on the window's elements and
// forwards its results, then evicts again.
func (p *Window[K, V, A]) fireElements(k K, key []byte, w *WindowState[A]) error {
	elems, keys, err := p.loadElements(key)
	if err != nil {
		return err
	}
	if elems, keys, err = p.evict(key, w, p.elements.Before, elems, keys); err != nil {
		return err
	}
	if len(elems) > 0 {
		for _, out := range p.elements.Fire(k, w.Bounds, slices.Clone(elems)) {
			if p.elements.Table {
				out = exec.Change{New: out}
			}
			if err := p.s.ForwardValue(k, w.Bounds, out); err != nil {
				return err
			}
		}
	}
	_, _, err = p.evict(key, w, p.elements.After, elems, keys)
	return err
}

// clearElements deletes a window's elements.
func (p *Window[K, V, A]) clearElements(key []byte) error {
	_, keys, err := p.loadKeys(key)
	for _, k := range keys {
		err = errors.Join(err, p.s.st.Delete(k))
	}
	return err
}

func (p *Window[K, V, A]) loadKeys(key []byte) ([][]byte, [][]byte, error) {
	var keys, vals [][]byte
	pre := layout.ElementPrefix(key)
	err := p.s.st.Range(pre, layout.PrefixEnd(pre), func(k, v []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		vals = append(vals, append([]byte(nil), v...))
		return nil
	})
	return vals, keys, err
}

// moveElements re-files an absorbed session's elements under the merged
// session w (stored under to), after its own.
func (p *Window[K, V, A]) moveElements(from, to []byte, w *WindowState[A]) error {
	vals, keys, err := p.loadKeys(from)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if err := p.s.st.Delete(k); err != nil {
			return err
		}
		w.Seq++
		w.HasAgg = true
		if err := p.s.st.Put(layout.ElementKey(to, w.Seq-1), vals[i]); err != nil {
			return err
		}
	}
	return nil
}
