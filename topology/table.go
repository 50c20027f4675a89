package topology

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
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
	dec := tombstoneDecoder(m.ks, m.vs)
	src := source[K, V](t, topic, dec, opts)
	src.Table = true
	// The topic is the table's changelog: no second copy. The store keeps
	// only what decodes, as processing does.
	m.spec.Source = topic
	m.spec.SourceAccepts = func(k, v []byte) bool { _, _, err := dec(k, v); return err == nil }
	n := t.add(m.folding(&exec.Node{
		Name:   t.name(m.Name()+"-table-source", "TABLE-SOURCE"),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New:    func() exec.Processor { return &tableSourceProc[K, V]{tableWriter[K, V]{m: m}} },
		// Its input may be a delete, which a typed chain cannot carry;
		// its held updates go out typed.
		Typed: tableTyped[K, V](nil),
	}), src)
	return Table[K, V]{t: t, n: n, ks: m.ks, vs: m.vs, mat: m}
}

// tableSourceProc materializes a topic read as a table.
type tableSourceProc[K, V any] struct{ tableWriter[K, V] }

func (p *tableSourceProc[K, V]) Process(r exec.Record) error {
	k := r.Key.(K)
	old, had, err := p.get(k)
	if err != nil {
		return err
	}
	ch := exec.ChangeOf[V]{Old: old, HasOld: had}
	if r.Value == exec.Tombstone {
		if !had {
			return nil // deleting what is not there changes nothing
		}
	} else {
		ch.New, ch.HasNew = r.Value.(V), true
	}
	return p.change(r, k, ch)
}

// tableNode adds a stateless node over a table's changes: fn maps one side
// (old or new) of a change, returning ok=false for "absent".
func tableNode[K, V, V2 any](tb Table[K, V], kind string, fn func(K, V) (V2, bool)) *exec.Node {
	side := func(k K, v any) any {
		if v == nil {
			return nil
		}
		if out, ok := fn(k, v.(V)); ok {
			return out
		}
		return nil
	}
	return tb.t.add(&exec.Node{Name: tb.t.name("", kind), Kind: exec.KindProcessor, New: newFn(func(c exec.Context, r exec.Record) error {
		ch := r.Value.(exec.Change)
		k := r.Key.(K)
		out := exec.Change{Old: side(k, ch.Old), New: side(k, ch.New)}
		if out.Old == nil && out.New == nil {
			return nil
		}
		r.Value = out
		return c.Forward(r)
	})}, tb.n)
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
	s Stream[K, tableOp[V]]
}

// tableOp is what a change sends to a group: take the row's old value
// out (sub), then put its new value in (add). A change whose row stays in
// its group is one tableOp with both, so the group's aggregate changes
// once and never shows the row missing (Kafka Streams' KIP-904); a row
// that moves sends a subtraction to its old group and an addition to its
// new one.
type tableOp[V any] struct {
	add, sub bool
	v, old   V // v: the value added; old: the value subtracted
}

// tableOpSerde encodes a tableOp as a flag byte and its values: 0 and
// the value: subtract; 1 and the value: add; 2, uvarint(len(old)), old and
// the new value: both.
type tableOpSerde[V any] struct{ vs serde.Serde[V] }

func (s tableOpSerde[V]) Encode(op tableOp[V]) ([]byte, error) {
	switch {
	case op.add && op.sub:
		ob, err := s.vs.Encode(op.old)
		if err != nil {
			return nil, err
		}
		b, err := s.vs.Encode(op.v)
		if err != nil {
			return nil, err
		}
		out := binary.AppendUvarint(append(make([]byte, 0, 1+binary.MaxVarintLen64+len(ob)+len(b)), 2), uint64(len(ob)))
		return append(append(out, ob...), b...), nil
	case op.add:
		b, err := s.vs.Encode(op.v)
		if err != nil {
			return nil, err
		}
		return append([]byte{1}, b...), nil
	default:
		b, err := s.vs.Encode(op.old)
		if err != nil {
			return nil, err
		}
		return append([]byte{0}, b...), nil
	}
}

func (s tableOpSerde[V]) Decode(b []byte) (tableOp[V], error) {
	if len(b) == 0 || b[0] > 2 {
		return tableOp[V]{}, fmt.Errorf("%w: table operation", serde.ErrDecode)
	}
	var op tableOp[V]
	var err error
	switch b[0] {
	case 0:
		op.sub = true
		op.old, err = s.vs.Decode(b[1:])
	case 1:
		op.add = true
		op.v, err = s.vs.Decode(b[1:])
	default:
		n, w := binary.Uvarint(b[1:])
		if w <= 0 || n > uint64(len(b)-1-w) {
			return tableOp[V]{}, fmt.Errorf("%w: table operation of %d bytes", serde.ErrDecode, len(b))
		}
		rest := b[1+w:]
		op.add, op.sub = true, true
		if op.old, err = s.vs.Decode(rest[:n]); err == nil {
			op.v, err = s.vs.Decode(rest[n:])
		}
	}
	return op, err
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
		return GroupedTable[K2, V2]{t: t, s: Stream[K2, tableOp[V2]]{t: t, n: tb.n}}
	}
	n := t.add(&exec.Node{Name: t.name("", "TABLE-GROUPBY"), Kind: exec.KindProcessor, New: newFn(func(c exec.Context, r exec.Record) error {
		ch := r.Value.(exec.Change)
		k := r.Key.(K)
		forward := func(k2 K2, op tableOp[V2]) error {
			return c.Forward(exec.Record{Key: k2, Value: op, Timestamp: r.Timestamp, Headers: r.Headers})
		}
		var oldK, newK K2
		var oldV, newV V2
		if ch.Old != nil {
			oldK, oldV = fn(k, ch.Old.(V))
		}
		if ch.New != nil {
			newK, newV = fn(k, ch.New.(V))
		}
		if ch.Old != nil && ch.New != nil {
			same, err := sameEncoding(g.Key, oldK, newK)
			if err != nil {
				return fmt.Errorf("topology: %s: group key: %w", g.Name, err)
			}
			if same {
				return forward(newK, tableOp[V2]{add: true, sub: true, v: newV, old: oldV})
			}
		}
		if ch.Old != nil {
			if err := forward(oldK, tableOp[V2]{sub: true, old: oldV}); err != nil {
				return err
			}
		}
		if ch.New != nil {
			return forward(newK, tableOp[V2]{add: true, v: newV})
		}
		return nil
	})}, tb.n)
	s := repartition(Stream[K2, tableOp[V2]]{t: t, n: n}, g.Name, g.Key, serde.Serde[tableOp[V2]](tableOpSerde[V2]{g.Val}))
	return GroupedTable[K2, V2]{t: t, s: s}
}

// sameEncoding reports whether a and b encode to the same bytes: the same
// group, whatever K's notion of equality.
func sameEncoding[K any](ks serde.Serde[K], a, b K) (bool, error) {
	ab, err := ks.Encode(a)
	if err != nil {
		return false, err
	}
	bb, err := ks.Encode(b)
	return string(ab) == string(bb), err
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
	// aggregate, as a stream's record is.
	n := t.add(updateNode(m, t.name(m.Name()+"-table-aggregate", "TABLE-AGGREGATE"), func(k K, op tableOp[V], agg A, ok bool) A {
		if !ok {
			agg = init()
		}
		if op.sub {
			agg = subtract(k, op.old, agg)
		}
		if op.add {
			agg = add(k, op.v, agg)
		}
		return agg
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
