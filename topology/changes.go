package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/ops"
)

// Change is one change of a table as a value: the row's new value, or
// Deleted. External sinks refuse tombstones (a delete has no value to
// hand a store), so a table mirrored into a database goes through
// TableChanges: its deletes become values the sink's mapping can turn
// into a DELETE (plugin/sluicedb's Mirror).
type Change[V any] struct {
	Value   V    `json:"value"`
	Deleted bool `json:"deleted,omitempty"`
}

// TableChanges is ToStream with every delete as a Change whose Deleted is
// set, instead of a tombstone: a stream an external sink
// (ToParticipant, ToIdempotent) takes whole.
func TableChanges[K, V any](tb Table[K, V]) Stream[K, Change[V]] {
	// Erased records only (no typed link): the typed chain of ToStream
	// hands a delete on as an erased tombstone, which this must see.
	n := tb.t.add(&exec.Node{Name: tb.t.name("", "TABLE-CHANGES"), Kind: exec.KindProcessor, New: ops.NewFn(func(c exec.Context, r exec.Record) error {
		if r.Value == exec.Tombstone {
			r.Value = Change[V]{Deleted: true}
		} else {
			r.Value = Change[V]{Value: r.Value.(V)}
		}
		return c.Forward(r)
	})}, toStream[K, V](tb))
	return Stream[K, Change[V]]{t: tb.t, n: n, ks: tb.ks}
}
