package topology

import (
	"slices"
	"time"

	"github.com/sluice-streams/sluice/internal/ops"
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
	tb := windowedElements[K, V, Out](ws, "process", m, cfg, false, func(k K, b window.Bounds, elems []ops.Element[V]) []any {
		outs := fn(k, b, toElements(elems))
		res := make([]any, len(outs))
		for i, o := range outs {
			res[i] = o
		}
		return res
	})
	return Stream[Windowed[K], Out]{t: tb.t, n: tb.n, ks: tb.ks}
}

// windowedElements is the windowed node in element mode.
func windowedElements[K, V, A any](ws WindowedStream[K, V], kind string, m Materialization[K, V], cfg elementConfig[V], table bool, fire func(K, window.Bounds, []ops.Element[V]) []any) Table[Windowed[K], A] {
	if ws.evictCount > 0 {
		cfg.before = chainEvictors(CountEvictor[V](int(ws.evictCount)), cfg.before)
	}
	em := &ops.WindowElements[K, V]{Values: m.vs, Before: opsEvictor(cfg.before), After: opsEvictor(cfg.after), Fire: fire, Table: table}
	tb := windowedNode(ws, kind, m, nil, nil, em)
	return Table[Windowed[K], A]{t: tb.t, n: tb.n, ks: tb.ks}
}

func chainEvictors[V any](a, b Evictor[V]) Evictor[V] {
	if b == nil {
		return a
	}
	return func(w window.Bounds, elems []Element[V]) []Element[V] { return b(w, a(w, elems)) }
}

// opsEvictor is e over the runtime's elements, nil if e is.
func opsEvictor[V any](e Evictor[V]) func(window.Bounds, []ops.Element[V]) []ops.Element[V] {
	if e == nil {
		return nil
	}
	return func(w window.Bounds, elems []ops.Element[V]) []ops.Element[V] {
		return fromElements(e(w, toElements(elems)))
	}
}

// toElements and fromElements copy elements between the runtime's type and
// Element, the one users see.
func toElements[V any](es []ops.Element[V]) []Element[V] {
	out := make([]Element[V], len(es))
	for i, e := range es {
		out[i] = Element[V]{Value: e.Value, Timestamp: e.Timestamp}
	}
	return out
}

func fromElements[V any](es []Element[V]) []ops.Element[V] {
	out := make([]ops.Element[V], len(es))
	for i, e := range es {
		out[i] = ops.Element[V]{Value: e.Value, Timestamp: e.Timestamp}
	}
	return out
}
