package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
)

// TableOp is what a change sends to a group (GroupTableBy): take the
// row's old value out (Sub), then put its new value in (Add). A change
// whose row stays in its group is one TableOp with both, so the group's
// aggregate changes once and never shows the row missing (Kafka Streams'
// KIP-904); a row that moves sends a subtraction to its old group and an
// addition to its new one.
type TableOp[V any] struct {
	Add, Sub bool
	New, Old V // New: the value added; Old: the value subtracted
}

// TableOpSerde encodes a TableOp as layout/tableop.go lays it out, with
// Values encoding the values.
type TableOpSerde[V any] struct{ Values serde.Serde[V] }

func (s TableOpSerde[V]) Encode(op TableOp[V]) ([]byte, error) {
	switch {
	case op.Add && op.Sub:
		ob, err := s.Values.Encode(op.Old)
		if err != nil {
			return nil, err
		}
		b, err := s.Values.Encode(op.New)
		if err != nil {
			return nil, err
		}
		out := layout.AppendTableOpHead(make([]byte, 0, 1+10+len(ob)+len(b)), layout.TableOpBoth, len(ob))
		return append(append(out, ob...), b...), nil
	case op.Add:
		b, err := s.Values.Encode(op.New)
		if err != nil {
			return nil, err
		}
		return append(layout.AppendTableOpHead(make([]byte, 0, 1+len(b)), layout.TableOpAdd, 0), b...), nil
	default:
		b, err := s.Values.Encode(op.Old)
		if err != nil {
			return nil, err
		}
		return append(layout.AppendTableOpHead(make([]byte, 0, 1+len(b)), layout.TableOpSub, 0), b...), nil
	}
}

func (s TableOpSerde[V]) Decode(b []byte) (TableOp[V], error) {
	flag, ob, nb, err := layout.ParseTableOp(b)
	if err != nil {
		return TableOp[V]{}, err
	}
	op := TableOp[V]{Sub: flag != layout.TableOpAdd, Add: flag != layout.TableOpSub}
	if op.Sub {
		if op.Old, err = s.Values.Decode(ob); err != nil {
			return op, err
		}
	}
	if op.Add {
		op.New, err = s.Values.Decode(nb)
	}
	return op, err
}

// TableGroupBy is the runtime of GroupTableBy, the node before its
// repartition topic named name: fn re-keys each side of a change, and the
// change goes to the groups as TableOp records. When both sides' group
// keys encode equal under groupKeys, it is one update of that group;
// otherwise a subtraction from the old group and an addition to the new.
// Its error names topology, whose node the user sees.
func TableGroupBy[K, V, K2, V2 any](name string, groupKeys serde.Serde[K2], fn func(K, V) (K2, V2)) func(exec.Context, exec.Record) error {
	return func(c exec.Context, r exec.Record) error {
		ch := r.Value.(exec.Change)
		k := r.Key.(K)
		forward := func(k2 K2, op TableOp[V2]) error {
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
			same, err := sameEncoding(groupKeys, oldK, newK)
			if err != nil {
				return fmt.Errorf("topology: %s: group key: %w", name, err)
			}
			if same {
				return forward(newK, TableOp[V2]{Add: true, Sub: true, New: newV, Old: oldV})
			}
		}
		if ch.Old != nil {
			if err := forward(oldK, TableOp[V2]{Sub: true, Old: oldV}); err != nil {
				return err
			}
		}
		if ch.New != nil {
			return forward(newK, TableOp[V2]{Add: true, New: newV})
		}
		return nil
	}
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

// TableAggregate is the update function of an AggregateTable (for
// NewUpdate): a group's aggregate, from init() when it has none, takes a
// row that leaves the group out with subtract and a row that joins it in
// with add, in that order.
func TableAggregate[K, V, A any](init func() A, add, subtract func(K, V, A) A) func(k K, op TableOp[V], agg A, ok bool) A {
	return func(k K, op TableOp[V], agg A, ok bool) A {
		if !ok {
			agg = init()
		}
		if op.Sub {
			agg = subtract(k, op.Old, agg)
		}
		if op.Add {
			agg = add(k, op.New, agg)
		}
		return agg
	}
}
