package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
)

// TableSource materializes a topic read as a table (TableFrom): each
// record upserts its key, a tombstone deletes it, and every change is
// forwarded (or held, folding) with the key's old and new value.
type TableSource[K, V any] struct{ tableWriter[K, V] }

// NewTableSource returns the Processor of a table source kept in s.
func NewTableSource[K, V any](s KVStore[K, V]) *TableSource[K, V] {
	return &TableSource[K, V]{tableWriter[K, V]{store: s}}
}

// TableSourceTyped is the exec.Typed of a table source: its input may be a
// delete, which a typed chain cannot carry, so it takes none; its held
// updates go out typed.
func TableSourceTyped[K, V any]() *exec.Typed { return tableTyped[K, V](nil) }

func (p *TableSource[K, V]) Process(r exec.Record) error {
	k := r.Key.(K)
	old, had, err := p.get(k)
	if err != nil {
		return err
	}
	ch := exec.ChangeOf[V]{Old: old, HasOld: had}
	if r.Value == exec.Tombstone {
		if !had {
			return nil // deleting what is not there changes nothing
		}
	} else {
		ch.New, ch.HasNew = r.Value.(V), true
	}
	return p.change(r, k, ch)
}

// TableMap is the runtime of a stateless operator over a table's changes
// (MapTableValues, FilterTable): fn maps one side (old or new) of a change,
// returning ok=false for "absent"; a change both of whose sides end absent
// is dropped.
func TableMap[K, V, V2 any](fn func(K, V) (V2, bool)) func(exec.Context, exec.Record) error {
	side := func(k K, v any) any {
		if v == nil {
			return nil
		}
		if out, ok := fn(k, v.(V)); ok {
			return out
		}
		return nil
	}
	return func(c exec.Context, r exec.Record) error {
		ch := r.Value.(exec.Change)
		k := r.Key.(K)
		out := exec.Change{Old: side(k, ch.Old), New: side(k, ch.New)}
		if out.Old == nil && out.New == nil {
			return nil
		}
		r.Value = out
		return c.Forward(r)
	}
}

// ToStream is the erased runtime of a table's ToStream: an upsert (key,
// new value) for each insert and update, a tombstone for each delete. Its
// error names topology, whose node the user sees.
func ToStream(c exec.Context, r exec.Record) error {
	ch, ok := r.Value.(exec.Change)
	switch {
	case !ok:
		return fmt.Errorf("topology: table node forwarded %T, not a change", r.Value)
	case ch.New != nil:
		r.Value = ch.New
	case ch.Old != nil:
		r.Value = exec.Tombstone
	default:
		return nil
	}
	return c.Forward(r)
}

// ToStreamTyped is the exec.Typed of n, a ToStream node: in a typed chain,
// where a change arrives with its types, an upsert goes on typed and a
// delete (a tombstone, which a chain cannot carry) takes the erased path of
// the node's Processor.
func ToStreamTyped[K, V any](n *exec.Node) *exec.Typed {
	return &exec.Typed{
		Link: func(f *exec.Frame, p exec.Processor, next any) any {
			emit, ok := next.(func(K, V) error)
			if !ok {
				return nil
			}
			return func(k K, ch exec.ChangeOf[V]) error {
				f.At(n, exec.Processing)
				switch {
				case ch.HasNew:
					return emit(k, ch.New)
				case ch.HasOld:
					return p.Process(exec.Record{Key: k, Value: ch.Erase(), Timestamp: f.Timestamp, Headers: f.Headers})
				}
				return nil
			}
		},
		Out: exec.ChainOut[K, V],
		Fan: exec.ChainFan[K, V],
	}
}
