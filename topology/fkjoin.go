package topology

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
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

// subscription is what the left side sends to the partition of a foreign
// key: subscribe (or unsubscribe) left key kb, whose value has hash h.
type subscription struct {
	add bool
	kb  []byte
	h   uint64
}

// response is what the right side sends back to a left key: the right row
// (nil: none) for the left value with hash h.
type response struct {
	h  uint64
	vb []byte
}

type subscriptionSerde struct{}

func (subscriptionSerde) Encode(s subscription) ([]byte, error) {
	b := []byte{0}
	if s.add {
		b[0] = 1
	}
	b = binary.AppendUvarint(b, uint64(len(s.kb)))
	b = append(b, s.kb...)
	return binary.BigEndian.AppendUint64(b, s.h), nil
}

func (subscriptionSerde) Decode(b []byte) (subscription, error) {
	if len(b) < 1 {
		return subscription{}, fmt.Errorf("%w: subscription", serde.ErrDecode)
	}
	n, w := binary.Uvarint(b[1:])
	if w <= 0 || uint64(len(b)) != 1+uint64(w)+n+8 {
		return subscription{}, fmt.Errorf("%w: subscription of %d bytes", serde.ErrDecode, len(b))
	}
	kb := append([]byte(nil), b[1+w:1+w+int(n)]...)
	return subscription{add: b[0] == 1, kb: kb, h: binary.BigEndian.Uint64(b[len(b)-8:])}, nil
}

type responseSerde struct{}

func (responseSerde) Encode(r response) ([]byte, error) {
	b := binary.BigEndian.AppendUint64(nil, r.h)
	if r.vb == nil {
		return append(b, 0), nil
	}
	return append(append(b, 1), r.vb...), nil
}

func (responseSerde) Decode(b []byte) (response, error) {
	if len(b) < 9 || b[8] > 1 {
		return response{}, fmt.Errorf("%w: response of %d bytes", serde.ErrDecode, len(b))
	}
	r := response{h: binary.BigEndian.Uint64(b)}
	if b[8] == 1 {
		r.vb = append([]byte{}, b[9:]...)
	}
	return r, nil
}

func valueHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
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
	results := Materialized(j.Name+"-results", lm.ks, j.Result)
	if !subs.register(t) || !results.register(t) {
		return Table[K, VR]{t: t, n: l.n}
	}

	// Left side: subscribes on left changes, joins on responses.
	left := t.add(&exec.Node{Name: t.name(j.Name+"-fk-left", kind+"-LEFT"), Kind: exec.KindProcessor,
		Stores: []string{lm.Name(), results.Name()},
		New: func() exec.Processor {
			return &fkLeft[K, V, KO, VO, VR]{lm: lm, rks: rm.ks, rvs: rm.vs, results: results, fk: fk, join: join}
		}}, l.n)
	pass := func(kind string, parent *exec.Node, keep func(any) bool) *exec.Node {
		return t.add(&exec.Node{Name: t.name("", kind), Kind: exec.KindProcessor, New: newFn(func(c exec.Context, r exec.Record) error {
			if keep(r.Value) {
				return c.Forward(r)
			}
			return nil
		})}, parent)
	}
	subOut := pass(kind+"-SUBSCRIBE", left, func(v any) bool { _, ok := v.(subscription); return ok })
	subIn := repartition(Stream[KO, subscription]{t: t, n: subOut}, j.Name+"-subscription", rm.ks, serde.Serde[subscription](subscriptionSerde{}))

	// Right side: keeps the subscriptions, answers them, and answers them
	// all again when its row changes.
	right := t.add(&exec.Node{Name: t.name(j.Name+"-fk-right", kind+"-RIGHT"), Kind: exec.KindProcessor,
		Stores: []string{subs.Name(), rm.Name()},
		New: func() exec.Processor {
			return &fkRight[K, KO, VO]{rm: rm, subs: subs, lks: lm.ks}
		}}, subIn.n, r.n)
	respIn := repartition(Stream[K, response]{t: t, n: right}, j.Name+"-response", lm.ks, serde.Serde[response](responseSerde{}))
	// The responses come back to the left side's node.
	respIn.n.Children = append(respIn.n.Children, left)
	left.Parents = append(left.Parents, respIn.n)

	out := pass(kind, left, func(v any) bool { _, ok := v.(exec.Change); return ok })
	return Table[K, VR]{t: t, n: out, ks: lm.ks, vs: j.Result, mat: results}
}

// fkLeft is the left side of a foreign-key join.
type fkLeft[K, V, KO, VO, VR any] struct {
	lm      Materialization[K, V]
	rks     serde.Serde[KO]
	rvs     serde.Serde[VO]
	results Materialization[K, VR]
	fk      func(V) KO
	join    func(V, VO, bool) (VR, bool)

	ctx   exec.Context
	left  *KV[K, V]
	prior *KV[K, VR]
}

func (p *fkLeft[K, V, KO, VO, VR]) Init(ctx exec.Context) error {
	p.ctx, p.left, p.prior = ctx, p.lm.open(ctx), p.results.open(ctx)
	return nil
}

func (p *fkLeft[K, V, KO, VO, VR]) Process(r exec.Record) error {
	k := r.Key.(K)
	kb, err := p.lm.ks.Encode(k)
	if err != nil {
		return err
	}
	switch v := r.Value.(type) {
	case exec.Change:
		// Unsubscribe from the old foreign key, subscribe to the new one
		// with the new value's hash; a deleted row leaves the result now.
		var oldFK, newFK *KO
		if v.Old != nil {
			f := p.fk(v.Old.(V))
			oldFK = &f
		}
		if v.New != nil {
			f := p.fk(v.New.(V))
			newFK = &f
		}
		same, err := p.sameKey(oldFK, newFK)
		if err != nil {
			return err
		}
		if oldFK != nil && !same {
			if err := p.ctx.Forward(exec.Record{Key: *oldFK, Value: subscription{add: false, kb: kb}, Timestamp: r.Timestamp}); err != nil {
				return err
			}
		}
		if newFK == nil {
			return p.emit(r, k, nil)
		}
		vb, err := p.lm.vs.Encode(v.New.(V))
		if err != nil {
			return err
		}
		return p.ctx.Forward(exec.Record{Key: *newFK, Value: subscription{add: true, kb: kb, h: valueHash(vb)}, Timestamp: r.Timestamp})
	case response:
		cur, ok, err := p.left.Get(k)
		if err != nil || !ok {
			return err // the row is gone: its delete was emitted already
		}
		vb, err := p.lm.vs.Encode(cur)
		if err != nil {
			return err
		}
		if valueHash(vb) != v.h {
			return nil // an answer for a value the row no longer has
		}
		var vo VO
		if v.vb != nil {
			if vo, err = p.rvs.Decode(v.vb); err != nil {
				return err
			}
		}
		out, keep := p.join(cur, vo, v.vb != nil)
		if !keep {
			return p.emit(r, k, nil)
		}
		return p.emit(r, k, out)
	}
	return nil
}

// sameKey reports whether two foreign keys (nil: none) are the same, by
// their encoding.
func (p *fkLeft[K, V, KO, VO, VR]) sameKey(a, b *KO) (bool, error) {
	if a == nil || b == nil {
		return a == b, nil
	}
	ab, err := p.rks.Encode(*a)
	if err != nil {
		return false, err
	}
	bb, err := p.rks.Encode(*b)
	return string(ab) == string(bb), err
}

// emit forwards the result row's change (new nil: delete) and keeps it.
func (p *fkLeft[K, V, KO, VO, VR]) emit(r exec.Record, k K, newV any) error {
	old, had, err := p.prior.Get(k)
	if err != nil {
		return err
	}
	ch := exec.Change{New: newV}
	if had {
		ch.Old = old
	}
	if newV == nil {
		if !had {
			return nil
		}
		err = p.prior.Delete(k)
	} else {
		err = p.prior.Put(k, newV.(VR))
	}
	if err != nil {
		return err
	}
	return p.ctx.Forward(exec.Record{Key: k, Value: ch, Timestamp: r.Timestamp})
}

func (p *fkLeft[K, V, KO, VO, VR]) Close() error { return nil }

// fkRight is the right side of a foreign-key join. Its subscription store
// is keyed uvarint(len(fk)) fk leftKey → the subscribed value's hash.
type fkRight[K, KO, VO any] struct {
	rm    Materialization[KO, VO]
	lks   serde.Serde[K]
	subs  Materialization[[]byte, []byte]
	ctx   exec.Context
	right *KV[KO, VO]
}

func (p *fkRight[K, KO, VO]) Init(ctx exec.Context) error {
	p.ctx, p.right = ctx, p.rm.open(ctx)
	return nil
}

func (p *fkRight[K, KO, VO]) Process(r exec.Record) error {
	fk := r.Key.(KO)
	fkb, err := p.rm.ks.Encode(fk)
	if err != nil {
		return err
	}
	pre := layout.WindowKeyPrefix(fkb)[1:] // uvarint(len) fk, without the window prefix
	st := p.ctx.Store(p.subs.Name())
	switch v := r.Value.(type) {
	case subscription:
		key := append(append([]byte(nil), pre...), v.kb...)
		if !v.add {
			return st.Delete(key)
		}
		if err := st.Put(key, binary.BigEndian.AppendUint64(nil, v.h)); err != nil {
			return err
		}
		rb, ok, err := p.ctx.Store(p.rm.Name()).Get(fkb)
		if err != nil {
			return err
		}
		if !ok {
			rb = nil
		}
		return p.respond(r, v.kb, v.h, rb)
	case exec.Change:
		// The right row changed: answer every subscriber again.
		var rb []byte
		if v.New != nil {
			if rb, err = p.rm.vs.Encode(v.New.(VO)); err != nil {
				return err
			}
		}
		type sub struct {
			kb []byte
			h  uint64
		}
		var all []sub
		if err := st.Range(pre, layout.PrefixEnd(pre), func(k, val []byte) error {
			all = append(all, sub{append([]byte(nil), k[len(pre):]...), binary.BigEndian.Uint64(val)})
			return nil
		}); err != nil {
			return err
		}
		for _, s := range all {
			if err := p.respond(r, s.kb, s.h, rb); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *fkRight[K, KO, VO]) respond(r exec.Record, kb []byte, h uint64, rb []byte) error {
	// The left key is kept as bytes; the response repartition encodes it
	// again with the left table's key serde.
	k, err := p.lks.Decode(kb)
	if err != nil {
		return fmt.Errorf("topology: foreign-key join: left key: %w", err)
	}
	return p.ctx.Forward(exec.Record{Key: k, Value: response{h: h, vb: rb}, Timestamp: r.Timestamp})
}

func (p *fkRight[K, KO, VO]) Close() error { return nil }
