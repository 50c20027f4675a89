package ops

import "github.com/sluice-streams/sluice/internal/exec"

// Update is the runtime of an aggregation into a key-value store
// (Aggregate, Count, Reduce, and AggregateTable over TableOp records): on
// the erased path and in typed chains alike, read the key's value, compute
// the new one, store it and forward the change (or hold it, folding).
type Update[K, V, A any] struct {
	tableWriter[K, A]
	fn func(k K, v V, old A, ok bool) A
}

// NewUpdate returns the Processor of an aggregation into s: fn computes a
// key's new aggregate from a record's value and the old aggregate (ok is
// false when the key has none yet).
func NewUpdate[K, V, A any](s KVStore[K, A], fn func(k K, v V, old A, ok bool) A) *Update[K, V, A] {
	return &Update[K, V, A]{tableWriter: tableWriter[K, A]{store: s}, fn: fn}
}

// UpdateTyped is the exec.Typed of n, a node whose Processor is an
// *Update[K, V, A]: its entry takes the typed records, its output is a
// typed chain of changes.
func UpdateTyped[K, V, A any](n *exec.Node) *exec.Typed {
	return tableTyped(func(p exec.Processor, f *exec.Frame, out func(K, exec.ChangeOf[A]) error) any {
		u := p.(*Update[K, V, A])
		return func(k K, v V) error {
			f.At(n, exec.Processing)
			ch, err := u.update(k, v)
			if err != nil {
				return err
			}
			held, err := u.write(ch, f.Timestamp, f.Headers)
			if held || err != nil {
				return err
			}
			return out(k, ch)
		}
	})
}

// update computes the change of k's aggregate that v makes.
func (p *Update[K, V, A]) update(k K, v V) (exec.ChangeOf[A], error) {
	old, ok, err := p.get(k)
	if err != nil {
		return exec.ChangeOf[A]{}, err
	}
	return exec.ChangeOf[A]{Old: old, HasOld: ok, New: p.fn(k, v, old, ok), HasNew: true}, nil
}

func (p *Update[K, V, A]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		return nil // aggregations ignore deletes, as Kafka Streams' ignore nulls
	}
	k := r.Key.(K)
	ch, err := p.update(k, r.Value.(V))
	if err != nil {
		return err
	}
	return p.change(r, k, ch)
}
