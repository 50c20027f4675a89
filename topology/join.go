package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/ops"
)

// Joins of a stream or a table with a table need both sides in one task:
// the table's store is read by the join node, which is a child of the table
// node too, so both land in one sub-topology, and their input topics must
// be co-partitioned (the runtime refuses to start otherwise). A stream whose
// key was changed is repartitioned first, through
// <application.id>-<table store>-join-repartition.

// joinable checks that tb has a store a join can read and returns it.
func joinable[K, V any](tb Table[K, V], op string) (Materialization[K, V], bool) {
	if tb.mat.spec == nil {
		tb.t.errorf(ErrUnknownStore, "%s needs a materialized table (read from a topic, or aggregated); this one is mapped or filtered", op)
		return tb.mat, false
	}
	return tb.mat, true
}

// JoinTable joins each stream record with the table's current value for
// its key (Kafka Streams' KStream.join(KTable)): records whose key is not
// in the table are dropped. Table updates produce nothing: only the stream
// side triggers.
func JoinTable[K, V, VT, VR any](s Stream[K, V], tb Table[K, VT], joiner func(K, V, VT) VR) Stream[K, VR] {
	if joiner == nil {
		s.t.errorf(ErrNilFunction, "JoinTable needs a joiner")
	}
	return streamTableJoin(s, tb, "JOIN-TABLE", func(k K, v V, vt VT, ok bool) (VR, bool) {
		if !ok {
			var zero VR
			return zero, false
		}
		return joiner(k, v, vt), true
	})
}

// LeftJoinTable is JoinTable keeping every stream record: joiner gets
// ok=false (and the zero VT) when the key is not in the table.
func LeftJoinTable[K, V, VT, VR any](s Stream[K, V], tb Table[K, VT], joiner func(k K, v V, vt VT, ok bool) VR) Stream[K, VR] {
	if joiner == nil {
		s.t.errorf(ErrNilFunction, "LeftJoinTable needs a joiner")
	}
	return streamTableJoin(s, tb, "LEFTJOIN-TABLE", func(k K, v V, vt VT, ok bool) (VR, bool) {
		return joiner(k, v, vt, ok), true
	})
}

func streamTableJoin[K, V, VT, VR any](s Stream[K, V], tb Table[K, VT], kind string, join func(K, V, VT, bool) (VR, bool)) Stream[K, VR] {
	t := s.t
	if s.t != tb.t {
		t.errorf(ErrForeignHandle, "join of a stream and a table from two topologies")
	}
	m, ok := joinable(tb, kind)
	if !ok {
		return Stream[K, VR]{t: t, n: s.n}
	}
	if s.keyChanged {
		if s.vs == nil {
			t.errorf(ErrMissingSerde, "a stream re-keyed before a join must repartition and needs a value serde (Repartition it first)")
		} else {
			s = repartition(s, m.Name()+"-join", tb.ks, s.vs)
		}
	}
	st := m.kvStore()
	n := t.add(&exec.Node{
		Name:   t.name("", kind),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New: func() exec.Processor {
			return ops.NewStreamTableJoin(st, join)
		},
	}, s.n, tb.n)
	n.Typed = ops.StreamTableJoinTyped[K, V, VT, VR](n)
	return Stream[K, VR]{t: t, n: n, ks: s.ks}
}

// JoinTables joins two tables on their keys (Kafka Streams'
// KTable.join(KTable)): a row exists in the result while both sides have
// it. An update on either side re-emits the joined row; a delete on either
// side deletes it (a tombstone downstream).
func JoinTables[K, VL, VR, V any](l Table[K, VL], r Table[K, VR], joiner func(K, VL, VR) V) Table[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "JoinTables needs a joiner")
	}
	return tableTableJoin(l, r, "JOIN-TABLES", func(k K, lv VL, lok bool, rv VR, rok bool) (V, bool) {
		if !lok || !rok {
			var zero V
			return zero, false
		}
		return joiner(k, lv, rv), true
	})
}

// LeftJoinTables keeps every row of the left table: joiner gets ok=false
// (and the zero VR) while the right table lacks the key.
func LeftJoinTables[K, VL, VR, V any](l Table[K, VL], r Table[K, VR], joiner func(k K, lv VL, rv VR, ok bool) V) Table[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "LeftJoinTables needs a joiner")
	}
	return tableTableJoin(l, r, "LEFTJOIN-TABLES", func(k K, lv VL, lok bool, rv VR, rok bool) (V, bool) {
		if !lok {
			var zero V
			return zero, false
		}
		return joiner(k, lv, rv, rok), true
	})
}

// OuterJoinTables keeps every row of either table: joiner says which sides
// have the key.
func OuterJoinTables[K, VL, VR, V any](l Table[K, VL], r Table[K, VR], joiner func(k K, lv VL, lok bool, rv VR, rok bool) V) Table[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "OuterJoinTables needs a joiner")
	}
	return tableTableJoin(l, r, "OUTERJOIN-TABLES", func(k K, lv VL, lok bool, rv VR, rok bool) (V, bool) {
		if !lok && !rok {
			var zero V
			return zero, false
		}
		return joiner(k, lv, lok, rv, rok), true
	})
}

// tableTableJoin adds one node per side (ops.TableJoinSide): a change on
// one side is joined with the value the other side last forwarded (read
// from its store), before and after, and forwarded as the joined change.
// The two sides merge into the result table's node.
func tableTableJoin[K, VL, VR, V any](l Table[K, VL], r Table[K, VR], kind string, join func(K, VL, bool, VR, bool) (V, bool)) Table[K, V] {
	t := l.t
	if l.t != r.t {
		t.errorf(ErrForeignHandle, "join of tables from two topologies")
	}
	lm, lok := joinable(l, kind)
	rm, rok := joinable(r, kind)
	if !lok || !rok {
		return Table[K, V]{t: t, n: l.n}
	}
	side := func(name string, store string, parent *exec.Node, mk func() exec.Processor) *exec.Node {
		return t.add(&exec.Node{Name: t.name("", name), Kind: exec.KindProcessor, Stores: []string{store}, New: mk}, parent)
	}
	lst, rst := lm.kvStore(), rm.kvStore()
	left := side(kind+"-LEFT", rm.Name(), l.n, func() exec.Processor {
		return ops.NewTableJoinSide(rst, join)
	})
	right := side(kind+"-RIGHT", lm.Name(), r.n, func() exec.Processor {
		return ops.NewTableJoinSide(lst, func(k K, own VR, ownOK bool, other VL, ok bool) (V, bool) {
			return join(k, other, ok, own, ownOK)
		})
	})
	n := t.add(&exec.Node{Name: t.name("", kind), Kind: exec.KindProcessor, New: ops.NewFn(ops.Pass)}, left, right)
	// Each side reads the other's store: the stores must share the
	// sub-topology, which the edges above guarantee.
	return Table[K, V]{t: t, n: n, ks: l.ks}
}
