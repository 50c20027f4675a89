package ops

import (
	"bytes"
	"fmt"
	"hash/fnv"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
)

// Subscription is what the left side of a foreign-key join sends to the
// partition of a foreign key: subscribe (or unsubscribe) left key Key,
// whose value has hash Hash. Its bytes are layout.AppendSubscription's.
type Subscription struct {
	Add  bool
	Key  []byte
	Hash uint64
}

// Response is what the right side sends back to a left key: the right row
// (nil: none) for the left value with hash Hash. Its bytes are
// layout.AppendResponse's.
type Response struct {
	Hash  uint64
	Value []byte
}

// SubscriptionSerde is the serde of the subscription repartition topic.
type SubscriptionSerde struct{}

func (SubscriptionSerde) Encode(s Subscription) ([]byte, error) {
	return layout.AppendSubscription(nil, s.Add, s.Key, s.Hash), nil
}

func (SubscriptionSerde) Decode(b []byte) (Subscription, error) {
	add, kb, h, err := layout.ParseSubscription(b)
	if err != nil {
		return Subscription{}, err
	}
	return Subscription{Add: add, Key: kb, Hash: h}, nil
}

// ResponseSerde is the serde of the response repartition topic.
type ResponseSerde struct{}

func (ResponseSerde) Encode(r Response) ([]byte, error) {
	return layout.AppendResponse(nil, r.Hash, r.Value), nil
}

func (ResponseSerde) Decode(b []byte) (Response, error) {
	h, vb, err := layout.ParseResponse(b)
	if err != nil {
		return Response{}, err
	}
	return Response{Hash: h, Value: vb}, nil
}

// ValueHash is the hash a left row subscribes with: FNV-1a (64 bits) of
// its value's encoding. It travels in subscriptions and responses, so it
// must not change.
func ValueHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// FKTable is a typed key-value store a foreign-key join's left side reads
// and writes (topology's KV view).
type FKTable[K, V any] interface {
	Get(k K) (v V, ok bool, err error)
	Put(k K, v V) error
	Delete(k K) error
}

// FKLeftConfig configures the left side of a foreign-key join (NewFKLeft).
type FKLeftConfig[K, V, KO, VO, VR any] struct {
	// Left opens the left table's store, Results the join's result store.
	Left    func(exec.Context) FKTable[K, V]
	Results func(exec.Context) FKTable[K, VR]
	// Key and Value are the left table's serdes; RightKey and RightValue
	// the right table's.
	Key        serde.Serde[K]
	Value      serde.Serde[V]
	RightKey   serde.Serde[KO]
	RightValue serde.Serde[VO]
	// FK extracts a left row's foreign key. Join gets ok=false while the
	// right table has no row; keep=false removes the result row.
	FK   func(V) KO
	Join func(v V, vo VO, ok bool) (out VR, keep bool)
}

// FKLeft is the runtime of the left side of a foreign-key join: on a left
// change it sends subscriptions (keyed by the foreign key) downstream, and
// on a response it joins and emits the result row's change.
type FKLeft[K, V, KO, VO, VR any] struct {
	cfg FKLeftConfig[K, V, KO, VO, VR]

	ctx   exec.Context
	left  FKTable[K, V]
	prior FKTable[K, VR]
}

// NewFKLeft returns the runtime of the left side cfg.
func NewFKLeft[K, V, KO, VO, VR any](cfg FKLeftConfig[K, V, KO, VO, VR]) *FKLeft[K, V, KO, VO, VR] {
	return &FKLeft[K, V, KO, VO, VR]{cfg: cfg}
}

func (p *FKLeft[K, V, KO, VO, VR]) Init(ctx exec.Context) error {
	p.ctx, p.left, p.prior = ctx, p.cfg.Left(ctx), p.cfg.Results(ctx)
	return nil
}

func (p *FKLeft[K, V, KO, VO, VR]) Process(r exec.Record) error {
	k := r.Key.(K)
	kb, err := p.cfg.Key.Encode(k)
	if err != nil {
		return err
	}
	switch v := r.Value.(type) {
	case exec.Change:
		// Unsubscribe from the old foreign key, subscribe to the new one
		// with the new value's hash; a deleted row leaves the result now.
		var oldFK, newFK *KO
		if v.Old != nil {
			f := p.cfg.FK(v.Old.(V))
			oldFK = &f
		}
		if v.New != nil {
			f := p.cfg.FK(v.New.(V))
			newFK = &f
		}
		same, err := p.sameKey(oldFK, newFK)
		if err != nil {
			return err
		}
		if oldFK != nil && !same {
			if err := p.ctx.Forward(exec.Record{Key: *oldFK, Value: Subscription{Add: false, Key: kb}, Timestamp: r.Timestamp}); err != nil {
				return err
			}
		}
		if newFK == nil {
			return p.emit(r, k, nil)
		}
		vb, err := p.cfg.Value.Encode(v.New.(V))
		if err != nil {
			return err
		}
		return p.ctx.Forward(exec.Record{Key: *newFK, Value: Subscription{Add: true, Key: kb, Hash: ValueHash(vb)}, Timestamp: r.Timestamp})
	case Response:
		cur, ok, err := p.left.Get(k)
		if err != nil || !ok {
			return err // the row is gone: its delete was emitted already
		}
		vb, err := p.cfg.Value.Encode(cur)
		if err != nil {
			return err
		}
		if ValueHash(vb) != v.Hash {
			return nil // an answer for a value the row no longer has
		}
		var vo VO
		if v.Value != nil {
			if vo, err = p.cfg.RightValue.Decode(v.Value); err != nil {
				return err
			}
		}
		out, keep := p.cfg.Join(cur, vo, v.Value != nil)
		if !keep {
			return p.emit(r, k, nil)
		}
		return p.emit(r, k, out)
	}
	return nil
}

// sameKey reports whether two foreign keys (nil: none) are the same, by
// their encoding.
func (p *FKLeft[K, V, KO, VO, VR]) sameKey(a, b *KO) (bool, error) {
	if a == nil || b == nil {
		return a == b, nil
	}
	ab, err := p.cfg.RightKey.Encode(*a)
	if err != nil {
		return false, err
	}
	bb, err := p.cfg.RightKey.Encode(*b)
	return string(ab) == string(bb), err
}

// emit forwards the result row's change (new nil: delete) and keeps it.
func (p *FKLeft[K, V, KO, VO, VR]) emit(r exec.Record, k K, newV any) error {
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

func (p *FKLeft[K, V, KO, VO, VR]) Close() error { return nil }

// FKRightConfig configures the right side of a foreign-key join
// (NewFKRight).
type FKRightConfig[K, KO, VO any] struct {
	// Subscriptions names the subscription store (layout.SubscriptionKey),
	// Right the right table's store.
	Subscriptions, Right string
	// RightKey and RightValue are the right table's serdes, LeftKey the
	// left table's key serde.
	RightKey   serde.Serde[KO]
	RightValue serde.Serde[VO]
	LeftKey    serde.Serde[K]
}

// FKRight is the runtime of the right side of a foreign-key join: it keeps
// the subscriptions, answers each with the right row, and answers them all
// again when the right row changes.
type FKRight[K, KO, VO any] struct {
	cfg FKRightConfig[K, KO, VO]
	ctx exec.Context
}

// NewFKRight returns the runtime of the right side cfg.
func NewFKRight[K, KO, VO any](cfg FKRightConfig[K, KO, VO]) *FKRight[K, KO, VO] {
	return &FKRight[K, KO, VO]{cfg: cfg}
}

func (p *FKRight[K, KO, VO]) Init(ctx exec.Context) error {
	p.ctx = ctx
	return nil
}

func (p *FKRight[K, KO, VO]) Process(r exec.Record) error {
	fk := r.Key.(KO)
	fkb, err := p.cfg.RightKey.Encode(fk)
	if err != nil {
		return err
	}
	pre := layout.SubscriptionPrefix(fkb)
	st := p.ctx.Store(p.cfg.Subscriptions)
	switch v := r.Value.(type) {
	case Subscription:
		key := layout.SubscriptionKey(pre, v.Key)
		if !v.Add {
			return st.Delete(key)
		}
		if err := st.Put(key, layout.SubscriptionHash(v.Hash)); err != nil {
			return err
		}
		rb, ok, err := p.ctx.Store(p.cfg.Right).Get(fkb)
		if err != nil {
			return err
		}
		if !ok {
			rb = nil
		}
		return p.respond(r, v.Key, v.Hash, rb)
	case exec.Change:
		// The right row changed: answer every subscriber again.
		var rb []byte
		if v.New != nil {
			if rb, err = p.cfg.RightValue.Encode(v.New.(VO)); err != nil {
				return err
			}
		}
		type sub struct {
			kb []byte
			h  uint64
		}
		var all []sub
		if err := st.Range(pre, layout.PrefixEnd(pre), func(k, val []byte) error {
			all = append(all, sub{bytes.Clone(k[len(pre):]), layout.ReadSubscriptionHash(val)}) // non-nil when empty
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

func (p *FKRight[K, KO, VO]) respond(r exec.Record, kb []byte, h uint64, rb []byte) error {
	// The left key is kept as bytes; the response repartition encodes it
	// again with the left table's key serde.
	k, err := p.cfg.LeftKey.Decode(kb)
	if err != nil {
		return fmt.Errorf("topology: foreign-key join: left key: %w", err)
	}
	return p.ctx.Forward(exec.Record{Key: k, Value: Response{Hash: h, Value: rb}, Timestamp: r.Timestamp})
}

func (p *FKRight[K, KO, VO]) Close() error { return nil }
