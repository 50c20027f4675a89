package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
)

// ForeignKeyJoined names and types a foreign-key join: its stores
// <name>-subscriptions and <name>-results and its repartition topics
// <application.id>-<name>-subscription-repartition and
// -response-repartition; Result encodes the joined rows.
type ForeignKeyJoined[VR any] struct {
	Name   string
	Result serde.Serde[VR]
}

// JoinTablesByForeignKey joins each row of the left table with the row of
// the right table whose key fk extracts from it (Kafka Streams' foreign-key
// KTable join): an order keyed by order id with its customer keyed by
// customer id. The result is keyed like the left table; it has a row while
// both sides do. Changes on either side re-emit the affected rows, and a
// row whose foreign key changes moves to its new partner.
//
// As in Kafka Streams, the left side subscribes to the right side's
// partition of its foreign key and gets the right row back in a response;
// a response is used only if the left row still has the value (by hash)
// it subscribed with, so a row whose foreign key changed twice in flight
// never joins a stale partner.
func JoinTablesByForeignKey[K, V, KO, VO, VR any](l Table[K, V], r Table[KO, VO], fk func(V) KO, joiner func(V, VO) VR, j ForeignKeyJoined[VR]) Table[K, VR] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "JoinTablesByForeignKey needs a joiner")
	}
	return fkJoin(l, r, fk, j, "FKJOIN", func(v V, vo VO, ok bool) (VR, bool) {
		if !ok {
			var zero VR
			return zero, false
		}
		return joiner(v, vo), true
	})
}

// LeftJoinTablesByForeignKey keeps every left row: joiner gets ok=false
// while the right table has no row for its foreign key.
func LeftJoinTablesByForeignKey[K, V, KO, VO, VR any](l Table[K, V], r Table[KO, VO], fk func(V) KO, joiner func(v V, vo VO, ok bool) VR, j ForeignKeyJoined[VR]) Table[K, VR] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "LeftJoinTablesByForeignKey needs a joiner")
	}
	return fkJoin(l, r, fk, j, "LEFTFKJOIN", func(v V, vo VO, ok bool) (VR, bool) { return joiner(v, vo, ok), true })
}

func fkJoin[K, V, KO, VO, VR any](l Table[K, V], r Table[KO, VO], fk func(V) KO, j ForeignKeyJoined[VR], kind string, join func(V, VO, bool) (VR, bool)) Table[K, VR] {
	t := l.t
	if l.t != r.t {
		t.errorf(ErrForeignHandle, "join of tables from two topologies")
	}
	if fk == nil {
		t.errorf(ErrNilFunction, "%s needs a foreign key extractor", kind)
	}
	if j.Name == "" || j.Result == nil {
		t.errorf(ErrMissingSerde, "%s needs ForeignKeyJoined with a name and a result serde", kind)
		return Table[K, VR]{t: t, n: l.n}
	}
	lm, lok := joinable(l, kind)
	rm, rok := joinable(r, kind)
	if !lok || !rok {
		return Table[K, VR]{t: t, n: l.n}
	}
	subs := Materialized(j.Name+"-subscriptions", serde.Bytes, serde.Bytes)
	subs.spec.Layout = layout.KindSubscriptions
	results := Materialized(j.Name+"-results", lm.ks, j.Result)
	if !subs.register(t) || !results.register(t) {
		return Table[K, VR]{t: t, n: l.n}
	}

	// Left side: subscribes on left changes, joins on responses.
	left := t.add(&exec.Node{Name: t.name(j.Name+"-fk-left", kind+"-LEFT"), Kind: exec.KindProcessor,
		Stores: []string{lm.Name(), results.Name()},
		New: func() exec.Processor {
			return ops.NewFKLeft(ops.FKLeftConfig[K, V, KO, VO, VR]{
				Left:    func(c exec.Context) ops.FKTable[K, V] { return lm.open(c) },
				Results: func(c exec.Context) ops.FKTable[K, VR] { return results.open(c) },
				Key:     lm.ks, Value: lm.vs, RightKey: rm.ks, RightValue: rm.vs, FK: fk, Join: join})
		}}, l.n)
	pass := func(kind string, parent *exec.Node, keep func(any) bool) *exec.Node {
		return t.add(&exec.Node{Name: t.name("", kind), Kind: exec.KindProcessor, New: ops.NewFn(ops.KeepIf(keep))}, parent)
	}
	subOut := pass(kind+"-SUBSCRIBE", left, func(v any) bool { _, ok := v.(ops.Subscription); return ok })
	subIn := repartition(Stream[KO, ops.Subscription]{t: t, n: subOut}, j.Name+"-subscription", rm.ks, serde.Serde[ops.Subscription](ops.SubscriptionSerde{}))

	// Right side: keeps the subscriptions, answers them, and answers them
	// all again when its row changes.
	right := t.add(&exec.Node{Name: t.name(j.Name+"-fk-right", kind+"-RIGHT"), Kind: exec.KindProcessor,
		Stores: []string{subs.Name(), rm.Name()},
		New: func() exec.Processor {
			return ops.NewFKRight(ops.FKRightConfig[K, KO, VO]{Subscriptions: subs.Name(), Right: rm.Name(), RightKey: rm.ks, RightValue: rm.vs, LeftKey: lm.ks})
		}}, subIn.n, r.n)
	respIn := repartition(Stream[K, ops.Response]{t: t, n: right}, j.Name+"-response", lm.ks, serde.Serde[ops.Response](ops.ResponseSerde{}))
	// The responses come back to the left side's node.
	respIn.n.Children = append(respIn.n.Children, left)
	left.Parents = append(left.Parents, respIn.n)

	out := pass(kind, left, func(v any) bool { _, ok := v.(exec.Change); return ok })
	return Table[K, VR]{t: t, n: out, ks: lm.ks, vs: j.Result, mat: results}
}
