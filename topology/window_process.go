package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

// Element is one record kept in a window, for full-window functions and
// evictors.
type Element[V any] struct {
	Value     V
	Timestamp int64
}

// Evictor removes records from a window's contents (Flink's Evictor): it
// returns the elements to keep, in order. Evicted elements are gone from
// the window's state.
type Evictor[V any] func(w window.Bounds, elems []Element[V]) []Element[V]

// CountEvictor keeps the last n elements.
func CountEvictor[V any](n int) Evictor[V] {
	return func(_ window.Bounds, elems []Element[V]) []Element[V] {
		if len(elems) > n {
			return elems[len(elems)-n:]
		}
		return elems
	}
}

// TimeEvictor keeps the elements less than d older than the newest one
// (Flink's TimeEvictor).
func TimeEvictor[V any](d time.Duration) Evictor[V] {
	return func(_ window.Bounds, elems []Element[V]) []Element[V] {
		if len(elems) == 0 {
			return elems
		}
		newest := elems[0].Timestamp
		for _, e := range elems {
			newest = max(newest, e.Timestamp)
		}
		return slices.DeleteFunc(elems, func(e Element[V]) bool { return e.Timestamp <= newest-d.Milliseconds() })
	}
}

// ProcessWindowOption configures ProcessWindows: EvictBefore, EvictAfter.
type ProcessWindowOption[V any] interface {
	applyElements(*elementConfig[V])
}

// elementOpt is a ProcessWindowOption.
type elementOpt[V any] func(*elementConfig[V])

func (o elementOpt[V]) applyElements(c *elementConfig[V]) { o(c) }

type elementConfig[V any] struct {
	before, after Evictor[V]
}

// EvictBefore runs e on a window's elements before the function sees them.
func EvictBefore[V any](e Evictor[V]) ProcessWindowOption[V] {
	return elementOpt[V](func(c *elementConfig[V]) { c.before = e })
}

// EvictAfter runs e on a window's elements after the function saw them.
func EvictAfter[V any](e Evictor[V]) ProcessWindowOption[V] {
	return elementOpt[V](func(c *elementConfig[V]) { c.after = e })
}

// ProcessWindows calls fn with every element of a window each time the
// window fires (Flink's ProcessWindowFunction): the key, the window and its
// elements in arrival order. Each value fn returns is forwarded, keyed by
// the window. The elements are kept in the window store m (its value serde
// encodes one element), with the window's trigger state; evictors remove
// elements before or after fn runs. Works with time, session, global and
// count windows.
func ProcessWindows[K, V, Out any](ws WindowedStream[K, V], fn func(key K, w window.Bounds, elems []Element[V]) []Out, m Materialization[K, V], opts ...ProcessWindowOption[V]) Stream[Windowed[K], Out] {
	var cfg elementConfig[V]
	for _, o := range opts {
		o.applyElements(&cfg)
	}
	if fn == nil {
		ws.g.s.t.errorf(ErrNilFunction, "ProcessWindows needs a function")
	}
	tb := windowedElements[K, V, Out](ws, "process", m, cfg, false, func(k K, b window.Bounds, elems []Element[V]) []any {
		outs := fn(k, b, elems)
		res := make([]any, len(outs))
		for i, o := range outs {
			res[i] = o
		}
		return res
	})
	return Stream[Windowed[K], Out]{t: tb.t, n: tb.n, ks: tb.ks}
}

// windowedElements is the windowed node in element mode.
func windowedElements[K, V, A any](ws WindowedStream[K, V], kind string, m Materialization[K, V], cfg elementConfig[V], table bool, fire func(K, window.Bounds, []Element[V]) []any) Table[Windowed[K], A] {
	if ws.evictCount > 0 {
		cfg.before = chainEvictors(CountEvictor[V](int(ws.evictCount)), cfg.before)
	}
	em := &elementMode[K, V]{vs: m.vs, cfg: cfg, fire: fire, table: table}
	tb := windowedNode(ws, kind, m, nil, nil, em)
	return Table[Windowed[K], A]{t: tb.t, n: tb.n, ks: tb.ks}
}

func chainEvictors[V any](a, b Evictor[V]) Evictor[V] {
	if b == nil {
		return a
	}
	return func(w window.Bounds, elems []Element[V]) []Element[V] { return b(w, a(w, elems)) }
}

// elementMode keeps a window's records as element entries in its store:
//
//	e <d-suffix> seq → timestamp int64, value
//
// (seq 8 bytes big-endian, numbering the window's elements in arrival order).
type elementMode[K, V any] struct {
	vs   serde.Serde[V]
	cfg  elementConfig[V]
	fire func(K, window.Bounds, []Element[V]) []any
	// table: the results are a table's (aggregations over count windows),
	// forwarded as changes; else a stream's (ProcessWindows).
	table bool
}

const prefixElement = 'e'

func elementPrefix(key []byte) []byte { return append([]byte{prefixElement}, key[1:]...) }

func elementKey(key []byte, seq int64) []byte {
	return binary.BigEndian.AppendUint64(elementPrefix(key), uint64(seq))
}

// addElement appends a record to window w (stored under key).
func (p *windowProc[K, V, A]) addElement(key []byte, w *stored[A], v V, ts int64) error {
	vb, err := p.elements.vs.Encode(v)
	if err != nil {
		return fmt.Errorf("store %s: value: %w", p.m.Name(), err)
	}
	val := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(vb)), uint64(ts))
	w.seq++
	w.hasAgg = true
	return p.st.Put(elementKey(key, w.seq-1), append(val, vb...))
}

// trimElements drops window w's oldest element once it holds more than
// cfg.trim (sliding count windows with a trigger given): the count evictor
// would drop it at the next firing anyway, and the trigger may fire
// rarely, or never. Elements are numbered consecutively up to seq-1 and
// this runs on every addition, so at most one is over.
func (p *windowProc[K, V, A]) trimElements(key []byte, w *stored[A]) error {
	if p.cfg.trim <= 0 {
		return nil
	}
	pre := elementPrefix(key)
	k, _, ok, err := p.st.First(pre, layout.PrefixEnd(pre))
	if err != nil || !ok || len(k) < 8 {
		return err
	}
	if oldest := int64(binary.BigEndian.Uint64(k[len(k)-8:])); w.seq-oldest > p.cfg.trim {
		return p.st.Delete(elementKey(key, oldest))
	}
	return nil
}

// loadElements reads a window's elements with their store keys.
func (p *windowProc[K, V, A]) loadElements(key []byte) ([]Element[V], [][]byte, error) {
	var elems []Element[V]
	var keys [][]byte
	pre := elementPrefix(key)
	err := p.st.Range(pre, layout.PrefixEnd(pre), func(k, val []byte) error {
		if len(val) < 8 {
			return fmt.Errorf("store %s: %w: element of %d bytes", p.m.Name(), window.ErrCorrupt, len(val))
		}
		v, err := p.elements.vs.Decode(val[8:])
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.m.Name(), err)
		}
		elems = append(elems, Element[V]{Value: v, Timestamp: int64(binary.BigEndian.Uint64(val))})
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	return elems, keys, err
}

// evict runs e; if it removed elements, the window's element entries are
// rewritten to what it kept.
func (p *windowProc[K, V, A]) evict(key []byte, w *stored[A], e Evictor[V], elems []Element[V], keys [][]byte) ([]Element[V], [][]byte, error) {
	if e == nil || len(elems) == 0 {
		return elems, keys, nil
	}
	kept := e(w.b, slices.Clone(elems))
	if len(kept) == len(elems) {
		return elems, keys, nil
	}
	for _, k := range keys {
		if err := p.st.Delete(k); err != nil {
			return nil, nil, err
		}
	}
	keys = keys[:0]
	w.hasAgg = false
	for _, el := range kept {
		if err := p.addElement(key, w, el.Value, el.Timestamp); err != nil {
			return nil, nil, err
		}
		keys = append(keys, elementKey(key, w.seq-1))
	}
	return kept, keys, nil
}

// fireElements evicts, calls the function on the window's elements and
// forwards its results, then evicts again.
func (p *windowProc[K, V, A]) fireElements(k K, key []byte, w *stored[A]) error {
	elems, keys, err := p.loadElements(key)
	if err != nil {
		return err
	}
	if elems, keys, err = p.evict(key, w, p.elements.cfg.before, elems, keys); err != nil {
		return err
	}
	if len(elems) > 0 {
		for _, out := range p.elements.fire(k, w.b, slices.Clone(elems)) {
			if p.elements.table {
				out = exec.Change{New: out}
			}
			if err := p.forwardValue(k, w.b, out); err != nil {
				return err
			}
		}
	}
	_, _, err = p.evict(key, w, p.elements.cfg.after, elems, keys)
	return err
}

// clearElements deletes a window's elements.
func (p *windowProc[K, V, A]) clearElements(key []byte) error {
	_, keys, err := p.loadKeys(key)
	for _, k := range keys {
		err = errors.Join(err, p.st.Delete(k))
	}
	return err
}

func (p *windowProc[K, V, A]) loadKeys(key []byte) ([][]byte, [][]byte, error) {
	var keys, vals [][]byte
	pre := elementPrefix(key)
	err := p.st.Range(pre, layout.PrefixEnd(pre), func(k, v []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		vals = append(vals, append([]byte(nil), v...))
		return nil
	})
	return vals, keys, err
}

// moveElements re-files an absorbed session's elements under the merged
// session w (stored under to), after its own.
func (p *windowProc[K, V, A]) moveElements(from, to []byte, w *stored[A]) error {
	vals, keys, err := p.loadKeys(from)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if err := p.st.Delete(k); err != nil {
			return err
		}
		w.seq++
		w.hasAgg = true
		if err := p.st.Put(elementKey(to, w.seq-1), vals[i]); err != nil {
			return err
		}
	}
	return nil
}
