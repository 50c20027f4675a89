package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
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
	n := t.add(&exec.Node{
		Name:   t.name("", kind),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New: func() exec.Processor {
			return &streamTableJoinProc[K, V, VT, VR]{m: m, join: join}
		},
	}, s.n, tb.n)
	return Stream[K, VR]{t: t, n: n, ks: s.ks}
}

type streamTableJoinProc[K, V, VT, VR any] struct {
	m    Materialization[K, VT]
	kv   *KV[K, VT]
	ctx  exec.Context
	join func(K, V, VT, bool) (VR, bool)
}

func (p *streamTableJoinProc[K, V, VT, VR]) Init(ctx exec.Context) error {
	p.ctx, p.kv = ctx, p.m.open(ctx)
	return nil
}

func (p *streamTableJoinProc[K, V, VT, VR]) Process(r exec.Record) error {
	if _, fromTable := r.Value.(exec.Change); fromTable || r.Value == exec.Tombstone {
		return nil // table updates trigger nothing; a stream delete joins nothing
	}
	k := r.Key.(K)
	vt, ok, err := p.kv.Get(k)
	if err != nil {
		return err
	}
	out, keep := p.join(k, r.Value.(V), vt, ok)
	if !keep {
		return nil
	}
	r.Value = out
	return p.ctx.Forward(r)
}

func (p *streamTableJoinProc[K, V, VT, VR]) Close() error { return nil }

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

// tableTableJoin adds one node per side: a change on one side is joined
// with the other side's current value (read from its store), before and
// after, and forwarded as the joined change. The two sides merge into the
// result table's node.
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
	left := side(kind+"-LEFT", rm.Name(), l.n, func() exec.Processor {
		return &tableJoinSide[K, VL, VR, V]{other: rm, join: func(k K, own any, other VR, ok bool) (V, bool) {
			if own == nil {
				return join(k, *new(VL), false, other, ok)
			}
			return join(k, own.(VL), true, other, ok)
		}}
	})
	right := side(kind+"-RIGHT", lm.Name(), r.n, func() exec.Processor {
		return &tableJoinSide[K, VR, VL, V]{other: lm, join: func(k K, own any, other VL, ok bool) (V, bool) {
			if own == nil {
				return join(k, other, ok, *new(VR), false)
			}
			return join(k, other, ok, own.(VR), true)
		}}
	})
	n := t.add(&exec.Node{Name: t.name("", kind), Kind: exec.KindProcessor, New: newFn(func(c exec.Context, r exec.Record) error {
		return c.Forward(r)
	})}, left, right)
	// Each side reads the other's store: the stores must share the
	// sub-topology, which the edges above guarantee.
	return Table[K, V]{t: t, n: n, ks: l.ks}
}

// tableJoinSide joins the changes of one table with the other's store.
type tableJoinSide[K, Own, Other, V any] struct {
	other Materialization[K, Other]
	kv    *KV[K, Other]
	ctx   exec.Context
	join  func(k K, own any, other Other, ok bool) (V, bool)
}

func (p *tableJoinSide[K, Own, Other, V]) Init(ctx exec.Context) error {
	p.ctx, p.kv = ctx, p.other.open(ctx)
	return nil
}

func (p *tableJoinSide[K, Own, Other, V]) Process(r exec.Record) error {
	ch := r.Value.(exec.Change)
	k := r.Key.(K)
	other, ok, err := p.kv.forwarded(k)
	if err != nil {
		return err
	}
	// The other side did not change: join this side's old and new value
	// (nil: absent) with the value the other side last forwarded. The
	// joined old value is then exactly what the join last emitted for the
	// key, since every change of either side is joined with the value the
	// other last forwarded. The other side's newest value would not do:
	// with folding (fold.updates) its store is ahead of what it forwarded
	// until its held update goes out at the flush, and a retraction made of
	// it would retract a row never emitted (issue 15).
	var out exec.Change
	if v, keep := p.join(k, ch.Old, other, ok); keep {
		out.Old = v
	}
	if v, keep := p.join(k, ch.New, other, ok); keep {
		out.New = v
	}
	if out.Old == nil && out.New == nil {
		return nil
	}
	r.Value = out
	return p.ctx.Forward(r)
}

func (p *tableJoinSide[K, Own, Other, V]) Close() error { return nil }
