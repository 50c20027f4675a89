package ops

import (
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
)

// ValueState is a value state in a task: one value per key, under the 'v'
// layout. Writes are staged until the task's transaction commits; reads see
// them at once.
type ValueState[K, V any] struct {
	c  *Keyed
	ks serde.Serde[K]
	vs serde.Serde[V]
}

// NewValueState types c with the state's serdes.
func NewValueState[K, V any](c *Keyed, ks serde.Serde[K], vs serde.Serde[V]) *ValueState[K, V] {
	return &ValueState[K, V]{c: c, ks: ks, vs: vs}
}

func (v *ValueState[K, V]) key(k K) ([]byte, error) {
	kb, err := v.ks.Encode(k)
	if err != nil {
		return nil, v.c.errorf("key: %w", err)
	}
	return layout.ValueKey(kb), nil
}

// Get returns the value of k; ok is false if it has none or it expired.
func (v *ValueState[K, V]) Get(k K) (val V, ok bool, err error) {
	key, err := v.key(k)
	if err != nil {
		return val, false, err
	}
	b, ok, err := v.c.get(key)
	if err != nil || !ok {
		return val, false, err
	}
	if val, err = v.vs.Decode(b); err != nil {
		return val, false, v.c.errorf("value: %w", err)
	}
	return val, true, nil
}

// Set sets the value of k, stamped with the state's clock under a TTL.
func (v *ValueState[K, V]) Set(k K, val V) error {
	key, err := v.key(k)
	if err != nil {
		return err
	}
	vb, err := v.vs.Encode(val)
	if err != nil {
		return v.c.errorf("value: %w", err)
	}
	return v.c.put(key, vb)
}

// Clear removes the value of k.
func (v *ValueState[K, V]) Clear(k K) error {
	key, err := v.key(k)
	if err != nil {
		return err
	}
	return v.c.delete(key)
}

// ReducingState is a reducing state in a task: a value state underneath
// (the same layout), so a value state may become a reducing state under
// the same name and keep its values.
type ReducingState[K, V any] struct {
	v      *ValueState[K, V]
	reduce func(V, V) V
}

// NewReducingState reduces the values of v with reduce(current, added).
func NewReducingState[K, V any](v *ValueState[K, V], reduce func(V, V) V) *ReducingState[K, V] {
	return &ReducingState[K, V]{v: v, reduce: reduce}
}

// Add folds val into k's value: the value becomes val if k has none (or
// it expired), else reduce(value, val).
func (r *ReducingState[K, V]) Add(k K, val V) error {
	cur, ok, err := r.v.Get(k)
	if err != nil {
		return err
	}
	if ok {
		val = r.reduce(cur, val)
	}
	return r.v.Set(k, val)
}

// Get returns the reduction of k's values.
func (r *ReducingState[K, V]) Get(k K) (V, bool, error) { return r.v.Get(k) }

// Clear removes k's value.
func (r *ReducingState[K, V]) Clear(k K) error { return r.v.Clear(k) }

// AggregatingState is an aggregating state in a task: per key, an
// accumulator stored as a value state, read out through result.
type AggregatingState[K, IN, ACC, OUT any] struct {
	acc    *ValueState[K, ACC]
	init   func() ACC
	add    func(IN, ACC) ACC
	result func(ACC) OUT
}

// NewAggregatingState keeps the accumulators in acc: a key's starts as
// init(), each Add makes it add(in, acc), and Get returns result(acc).
func NewAggregatingState[K, IN, ACC, OUT any](acc *ValueState[K, ACC], init func() ACC, add func(IN, ACC) ACC, result func(ACC) OUT) *AggregatingState[K, IN, ACC, OUT] {
	return &AggregatingState[K, IN, ACC, OUT]{acc: acc, init: init, add: add, result: result}
}

// Add adds in to k's accumulator, which starts as init() if k has none (or
// it expired).
func (a *AggregatingState[K, IN, ACC, OUT]) Add(k K, in IN) error {
	acc, ok, err := a.acc.Get(k)
	if err != nil {
		return err
	}
	if !ok {
		acc = a.init()
	}
	return a.acc.Set(k, a.add(in, acc))
}

// Get returns the result of k's accumulator; ok is false if k has none.
func (a *AggregatingState[K, IN, ACC, OUT]) Get(k K) (out OUT, ok bool, err error) {
	acc, ok, err := a.acc.Get(k)
	if err != nil || !ok {
		return out, false, err
	}
	return a.result(acc), true, nil
}

// Clear removes k's accumulator.
func (a *AggregatingState[K, IN, ACC, OUT]) Clear(k K) error { return a.acc.Clear(k) }
