package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
)

// Update is the runtime of an aggregation into a key-value store
// (Aggregate, Count, Reduce, and AggregateTable over TableOp records): on
// the erased path and in typed chains alike, read the key's value, compute
// the new one, store it and forward the change (or hold it, folding).
type Update[K, V, A any] struct {
	tableWriter[K, A]
	fn func(k K, v V, old A, ok bool) A
	// add, set for a count, adds to a key's old count the number of
	// records a record stands for (exec.Weight: more than one when a
	// combining sink wrote it). Without it the node is no count, and a
	// record that stands for more than itself is an error.
	add func(old A, w int64) A
	// weighed: the node reads its own repartition topic, where a count's
	// combining sink writes records standing for several. Elsewhere a
	// header of exec.HeaderCount's name is the user's, and weighs nothing.
	weighed bool
}

// NewUpdate returns the Processor of an aggregation into s: fn computes a
// key's new aggregate from a record's value and the old aggregate (ok is
// false when the key has none yet).
func NewUpdate[K, V, A any](s KVStore[K, A], fn func(k K, v V, old A, ok bool) A) *Update[K, V, A] {
	return &Update[K, V, A]{tableWriter: tableWriter[K, A]{store: s}, fn: fn}
}

// NewCount returns the Processor of a count into s: each record adds its
// weight to its key's count, so that a record a combining sink wrote
// counts for the records it stands for.
func NewCount[K, V any](s KVStore[K, int64]) *Update[K, V, int64] {
	return &Update[K, V, int64]{tableWriter: tableWriter[K, int64]{store: s}, add: func(n int64, w int64) int64 { return n + w }}
}

// Weighed says that p reads its own repartition topic, whose records may
// stand for several (exec.Weight): a count adds their weight, another
// aggregation refuses them. It returns p.
func (p *Update[K, V, A]) Weighed() *Update[K, V, A] {
	p.weighed = true
	return p
}

// UpdateTyped is the exec.Typed of n, a node whose Processor is an
// *Update[K, V, A]: its entry takes the typed records, its output is a
// typed chain of changes.
func UpdateTyped[K, V, A any](n *exec.Node) *exec.Typed {
	return tableTyped(func(p exec.Processor, f *exec.Frame, out func(K, exec.ChangeOf[A]) error) any {
		u := p.(*Update[K, V, A])
		return func(k K, v V) error {
			f.At(n, exec.Processing)
			ch, hs, err := u.update(k, v, f.Headers)
			if err != nil {
				return err
			}
			held, err := u.write(ch, f.Timestamp, hs)
			if held || err != nil {
				return err
			}
			if len(hs) == len(f.Headers) {
				return out(k, ch)
			}
			// The record's weight is the count's: its change goes on
			// without it, and the frame is given back after, as each
			// child on the erased path gets the record as it came.
			all := f.Headers
			f.Headers = hs
			err = out(k, ch)
			f.Headers = all
			return err
		}
	})
}

// update computes the change of k's aggregate that v, a record with
// headers hs, makes; rest is hs without the record's weight.
func (p *Update[K, V, A]) update(k K, v V, hs []exec.Header) (ch exec.ChangeOf[A], rest []exec.Header, err error) {
	w, rest := int64(1), hs
	if p.weighed {
		w, rest, err = exec.Weight(hs)
		if err == nil && w != 1 && p.add == nil {
			err = fmt.Errorf("a record standing for %d records (header %s) reached an aggregation that is not a count", w, exec.HeaderCount)
		}
		if err != nil {
			return ch, nil, err
		}
	}
	old, ok, err := p.get(k)
	if err != nil {
		return ch, nil, err
	}
	ch = exec.ChangeOf[A]{Old: old, HasOld: ok, HasNew: true}
	if p.add != nil {
		ch.New = p.add(old, w)
	} else {
		ch.New = p.fn(k, v, old, ok)
	}
	return ch, rest, nil
}

func (p *Update[K, V, A]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		p.ctx.CountIgnoredDelete() // aggregations ignore deletes, as Kafka Streams' ignore nulls
		return nil
	}
	k := r.Key.(K)
	ch, hs, err := p.update(k, r.Value.(V), r.Headers)
	if err != nil {
		return err
	}
	r.Headers = hs
	return p.change(r, k, ch)
}
