package topology

import (
	"strings"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
)

// Grouping names the repartition topic a grouping may need and gives its
// serdes. Make one with Grouped, as a Materialization with Materialized;
// the zero Grouping takes every default. Setting its fields in a literal
// still works but is deprecated: there is one way to make a Grouping.
type Grouping[K, V any] struct {
	// Deprecated: use Grouped.
	Name string
	// Deprecated: use Grouped.
	Key serde.Serde[K]
	// Deprecated: use Grouped.
	Val serde.Serde[V]
}

// Grouped makes a Grouping (Kafka Streams' Grouped.with): name names the
// repartition topic <application.id>-<name>-repartition, if the grouping
// needs one, and ks and vs encode its records. Any of them may be zero:
// the name then comes from the store of the aggregation that follows, the
// serdes from the stream.
func Grouped[K, V any](name string, ks serde.Serde[K], vs serde.Serde[V]) Grouping[K, V] {
	return Grouping[K, V]{Name: name, Key: ks, Val: vs}
}

// GroupedStream is a stream grouped by key, ready for an aggregation.
type GroupedStream[K, V any] struct {
	s Stream[K, V]
	g Grouping[K, V]
}

// GroupByKey groups s by its current key. When the key was changed upstream
// (Map, SelectKey, FlatMap, Process), the aggregation that follows first
// repartitions through <application.id>-<name>-repartition.
func GroupByKey[K, V any](s Stream[K, V], g ...Grouping[K, V]) GroupedStream[K, V] {
	gs := GroupedStream[K, V]{s: s}
	if len(g) > 0 {
		gs.g = g[0]
	}
	return gs
}

// GroupBy re-keys s with fn and groups by the new key; the aggregation that
// follows always repartitions.
func GroupBy[K, V, K2 any](s Stream[K, V], fn func(K, V) K2, g ...Grouping[K2, V]) GroupedStream[K2, V] {
	return GroupByKey(SelectKey(s, fn), g...)
}

// prepare repartitions the grouped stream when needed, naming the topic after
// the grouping or else the store.
func (g GroupedStream[K, V]) prepare(store string, ks serde.Serde[K]) Stream[K, V] {
	s := g.s
	if !s.keyChanged {
		return s
	}
	name := g.g.Name
	if name == "" {
		name = store
	}
	k, v := g.g.Key, g.g.Val
	if k == nil {
		k = s.ks
	}
	if k == nil {
		k = ks
	}
	if v == nil {
		v = s.vs
	}
	if v == nil {
		s.t.errorf(ErrMissingSerde, "grouping %q must repartition and needs a value serde (give one in Grouped)", name)
		return s
	}
	return repartition(s, name, k, v)
}

// Table is a changelog stream: the latest value per key, as produced by an
// aggregation. Every update is forwarded downstream.
type Table[K, V any] struct {
	t  *Topology
	n  *exec.Node
	ks serde.Serde[K]
	vs serde.Serde[V]
	// mat is the key-value store holding the table, if it has one:
	// a table read from a topic, or aggregated from a stream or a table.
	mat Materialization[K, V]
}

// StoreName is the name of the store that materializes the table ("" if
// none does: a table mapped or filtered from another).
func (tb Table[K, V]) StoreName() string {
	if tb.mat.spec == nil && tb.n != nil && len(tb.n.Stores) > 0 {
		return tb.n.Stores[0] // a windowed table's window store
	}
	return tb.mat.Name()
}

// ToStream turns the table's changes into a stream: an upsert (key, new
// value) for each insert and update, a tombstone for each delete (a record
// whose value is Kafka null when written to a topic; see Record.Tombstone).
func ToStream[K, V any](tb Table[K, V]) Stream[K, V] {
	n := toStream[K, V](tb)
	return Stream[K, V]{t: tb.t, n: n, ks: tb.ks, vs: tb.vs}
}

// toStream adds ToStream's node (ops.ToStream, typed by ops.ToStreamTyped).
func toStream[K, V any](tb Table[K, V]) *exec.Node {
	n := tb.t.add(&exec.Node{Name: tb.t.name("", "TOSTREAM"), Kind: exec.KindProcessor, New: ops.NewFn(ops.ToStream)}, tb.n)
	n.Typed = ops.ToStreamTyped[K, V](n)
	return n
}

// Aggregate folds each key's records into an accumulator, starting from
// init(), kept in the store m; every update is forwarded as the table's new
// value for the key.
func Aggregate[K, V, A any](g GroupedStream[K, V], init func() A, add func(K, V, A) A, m Materialization[K, A]) Table[K, A] {
	if init == nil || add == nil {
		g.s.t.errorf(ErrNilFunction, "Aggregate needs init and add functions")
	}
	return update(g, "aggregate", m, func(k K, v V, agg A, ok bool) A {
		if !ok {
			agg = init()
		}
		return add(k, v, agg)
	})
}

// Count counts the records per key. When it repartitions and updates are
// folded (processor.FoldUpdates), the writing task combines the records of
// a transaction by key before the repartition topic: one record per key
// and transaction, which says how many it stands for (the local half of
// Flink's local-global aggregation). Only the traffic changes: the count
// reaches the same values, of which folding skips some anyway.
func Count[K, V any](g GroupedStream[K, V], m Materialization[K, int64]) Table[K, int64] {
	return aggregation(g, "aggregate", m, true, ops.NewCount[K, V])
}

// Reduce combines each key's values with fn; the first value of a key is
// stored as is.
func Reduce[K, V any](g GroupedStream[K, V], fn func(V, V) V, m Materialization[K, V]) Table[K, V] {
	if fn == nil {
		g.s.t.errorf(ErrNilFunction, "Reduce needs a function")
	}
	return update(g, "reduce", m, func(_ K, v V, old V, ok bool) V {
		if ok {
			return fn(old, v)
		}
		return v
	})
}

// update is the one stateful node behind Aggregate and Reduce: read the
// key's value from the store, compute the new one, store it, forward it.
func update[K, V, A any](g GroupedStream[K, V], kind string, m Materialization[K, A], fn func(k K, v V, old A, ok bool) A) Table[K, A] {
	return aggregation(g, kind, m, false, func(st ops.KVStore[K, A]) *ops.Update[K, V, A] { return ops.NewUpdate(st, fn) })
}

// aggregation adds the node of an aggregation of g into m, whose runtime
// proc makes, after the repartition g may need; combine marks that
// repartition's sink as a count's (exec.Node.Combine).
func aggregation[K, V, A any](g GroupedStream[K, V], kind string, m Materialization[K, A], combine bool, proc func(ops.KVStore[K, A]) *ops.Update[K, V, A]) Table[K, A] {
	t := g.s.t
	if !m.register(t) {
		return Table[K, A]{t: t, n: g.s.n}
	}
	s := g.prepare(m.Name(), m.ks)
	own := s.n != g.s.n // the aggregation's own repartition, read by nothing else
	if combine && own {
		s.through.Combine = true
	}
	if own {
		// What the topic holds may stand for several records: a
		// combining count wrote it, before an upgrade if not now.
		plain := proc
		proc = func(st ops.KVStore[K, A]) *ops.Update[K, V, A] { return plain(st).Weighed() }
	}
	n := t.add(updateNode(m, t.name(m.Name()+"-"+kind, strings.ToUpper(kind)), proc), s.n)
	return Table[K, A]{t: t, n: n, ks: m.ks, vs: m.vs, mat: m}
}

// updateNode is the node of an aggregation into m (ops.Update, which proc
// makes): on the erased path and in typed chains alike, read the key's
// value, compute the new one, store it and forward the change (or hold it,
// folding).
func updateNode[K, V, A any](m Materialization[K, A], name string, proc func(ops.KVStore[K, A]) *ops.Update[K, V, A]) *exec.Node {
	st := m.kvStore()
	n := m.folding(&exec.Node{
		Name:   name,
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New:    func() exec.Processor { return proc(st) },
	})
	n.Typed = ops.UpdateTyped[K, V, A](n)
	return n
}
