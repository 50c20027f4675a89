package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
)

// TableFrom reads topic as a table (Kafka Streams' builder.table): each
// record upserts its key, a record with a null value deletes it, and every
// change is forwarded with the key's old and new value. The table is
// materialized in m, whose changelog is the topic itself (Kafka Streams'
// source-topic reuse): a restore replays the topic up to the offset the
// application committed. Null values are deletes here, not decoding
// errors.
func TableFrom[K, V any](t *Topology, topic string, m Materialization[K, V], opts ...SourceOption) Table[K, V] {
	if !m.register(t) {
		return Table[K, V]{t: t}
	}
	dec := ops.TombstoneDecoder(m.ks, m.vs)
	src := source[K, V](t, topic, dec, opts)
	src.Table = true
	// The topic is the table's changelog: no second copy. The store keeps
	// only what decodes, as processing does.
	spec := t.stores[m.Name()] // this topology's, not the shared m.spec
	spec.Source = topic
	spec.SourceAccepts = ops.Accepts(dec)
	st := m.kvStore()
	n := t.add(m.folding(&exec.Node{
		Name:   t.name(m.Name()+"-table-source", "TABLE-SOURCE"),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New:    func() exec.Processor { return ops.NewTableSource(st) },
		// Its input may be a delete, which a typed chain cannot carry;
		// its held updates go out typed.
		Typed: ops.TableSourceTyped[K, V](),
	}), src)
	return Table[K, V]{t: t, n: n, ks: m.ks, vs: m.vs, mat: m}
}

// tableNode adds a stateless node over a table's changes (ops.TableMap):
// fn maps one side (old or new) of a change, returning ok=false for
// "absent".
func tableNode[K, V, V2 any](tb Table[K, V], kind string, fn func(K, V) (V2, bool)) *exec.Node {
	return tb.t.add(&exec.Node{Name: tb.t.name("", kind), Kind: exec.KindProcessor, New: ops.NewFn(ops.TableMap(fn))}, tb.n)
}

// MapTableValues maps each value of the table (Kafka Streams'
// KTable.mapValues): old and new values of every change are both mapped,
// so aggregations downstream can retract the old one.
func MapTableValues[K, V, V2 any](tb Table[K, V], fn func(K, V) V2) Table[K, V2] {
	if fn == nil {
		tb.t.errorf(ErrNilFunction, "MapTableValues needs a function")
	}
	n := tableNode(tb, "TABLE-MAPVALUES", func(k K, v V) (V2, bool) { return fn(k, v), true })
	return Table[K, V2]{t: tb.t, n: n, ks: tb.ks}
}

// FilterTable keeps the rows for which pred is true (Kafka Streams'
// KTable.filter): a row that stops matching is deleted downstream.
func FilterTable[K, V any](tb Table[K, V], pred func(K, V) bool) Table[K, V] {
	if pred == nil {
		tb.t.errorf(ErrNilFunction, "FilterTable needs a predicate")
	}
	n := tableNode(tb, "TABLE-FILTER", func(k K, v V) (V, bool) { return v, pred(k, v) })
	return Table[K, V]{t: tb.t, n: n, ks: tb.ks, vs: tb.vs}
}

// GroupedTable is a table re-grouped by a new key, ready for an
// aggregation that adds new rows and subtracts old ones.
type GroupedTable[K, V any] struct {
	t *Topology
	s Stream[K, ops.TableOp[V]]
}

// GroupTableBy re-keys each row with fn and groups by the new key (Kafka
// Streams' KTable.groupBy). A change whose row stays in its group (the new
// keys encode equal) goes to it as one update; otherwise it becomes a
// subtraction of the old row from its old group and an addition of the
// new row to its new group. Both go through
// <application.id>-<name>-repartition.
func GroupTableBy[K, V, K2, V2 any](tb Table[K, V], fn func(K, V) (K2, V2), g Grouping[K2, V2]) GroupedTable[K2, V2] {
	t := tb.t
	if fn == nil {
		t.errorf(ErrNilFunction, "GroupTableBy needs a function")
	}
	if g.Name == "" || g.Key == nil || g.Val == nil {
		t.errorf(ErrMissingSerde, "GroupTableBy always repartitions: give Grouped a name and serdes")
		return GroupedTable[K2, V2]{t: t, s: Stream[K2, ops.TableOp[V2]]{t: t, n: tb.n}}
	}
	n := t.add(&exec.Node{Name: t.name("", "TABLE-GROUPBY"), Kind: exec.KindProcessor, New: ops.NewFn(ops.TableGroupBy(g.Name, g.Key, fn))}, tb.n)
	s := repartition(Stream[K2, ops.TableOp[V2]]{t: t, n: n}, g.Name, g.Key, serde.Serde[ops.TableOp[V2]](ops.TableOpSerde[V2]{Values: g.Val}))
	return GroupedTable[K2, V2]{t: t, s: s}
}

// AggregateTable folds each group's rows into an accumulator kept in m:
// add for a row that joins the group, subtract for one that leaves it
// (Kafka Streams' KGroupedTable.aggregate).
func AggregateTable[K, V, A any](g GroupedTable[K, V], init func() A, add, subtract func(K, V, A) A, m Materialization[K, A]) Table[K, A] {
	t := g.t
	if init == nil || add == nil || subtract == nil {
		t.errorf(ErrNilFunction, "AggregateTable needs init, add and subtract functions")
	}
	if !m.register(t) {
		return Table[K, A]{t: t, n: g.s.n}
	}
	// A row joining or leaving its group is an update of the group's
	// aggregate, as a stream's record is. It reads its own repartition
	// topic (GroupTableBy), whose records stand for one each: Weighed
	// refuses one that stands for several.
	fn := ops.TableAggregate(init, add, subtract)
	n := t.add(updateNode(m, t.name(m.Name()+"-table-aggregate", "TABLE-AGGREGATE"), func(st ops.KVStore[K, A]) *ops.Update[K, ops.TableOp[V], A] {
		return ops.NewUpdate(st, fn).Weighed()
	}), g.s.n)
	return Table[K, A]{t: t, n: n, ks: m.ks, vs: m.vs, mat: m}
}

// CountTable counts the rows per group.
func CountTable[K, V any](g GroupedTable[K, V], m Materialization[K, int64]) Table[K, int64] {
	return AggregateTable(g, func() int64 { return 0 },
		func(_ K, _ V, n int64) int64 { return n + 1 },
		func(_ K, _ V, n int64) int64 { return n - 1 }, m)
}

// ReduceTable combines each group's rows with add, and takes a row out
// with subtract.
func ReduceTable[K, V any](g GroupedTable[K, V], add, subtract func(V, V) V, m Materialization[K, V]) Table[K, V] {
	var zero V
	if add == nil || subtract == nil {
		g.t.errorf(ErrNilFunction, "ReduceTable needs add and subtract functions")
	}
	return AggregateTable(g, func() V { return zero },
		func(_ K, v, agg V) V { return add(agg, v) },
		func(_ K, v, agg V) V { return subtract(agg, v) }, m)
}
