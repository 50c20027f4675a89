package ops

import "github.com/sluice-streams/sluice/internal/exec"

// fnProc adapts a function to exec.Processor: the shape of every stateless
// operator.
type fnProc struct {
	ctx exec.Context
	fn  func(ctx exec.Context, r exec.Record) error
}

func (p *fnProc) Init(ctx exec.Context) error { p.ctx = ctx; return nil }
func (p *fnProc) Process(r exec.Record) error { return p.fn(p.ctx, r) }
func (p *fnProc) Close() error                { return nil }

// NewFn is an exec.Node's New for a processor that runs fn on each record.
func NewFn(fn func(exec.Context, exec.Record) error) func() exec.Processor {
	return func() exec.Processor { return &fnProc{fn: fn} }
}

// Pass forwards a record unchanged: the body of the nodes that only join
// edges (Merge, a branch's child, a join's output, late records).
func Pass(c exec.Context, r exec.Record) error { return c.Forward(r) }

// KeepIf forwards the records whose value keep accepts, and drops the rest.
func KeepIf(keep func(v any) bool) func(exec.Context, exec.Record) error {
	return func(c exec.Context, r exec.Record) error {
		if keep(r.Value) {
			return c.Forward(r)
		}
		return nil
	}
}

// Chain is the exec.Typed of a source or processor whose entry, given the
// entry its output goes to, is made by entry.
func Chain[K, V, K2, V2 any](entry func(f *exec.Frame, emit func(K2, V2) error) func(K, V) error) *exec.Typed {
	return &exec.Typed{
		Link: func(f *exec.Frame, _ exec.Processor, next any) any {
			emit, ok := next.(func(K2, V2) error)
			if !ok {
				return nil
			}
			return entry(f, emit)
		},
		Out: exec.ChainOut[K2, V2],
		Fan: exec.ChainFan[K2, V2],
	}
}

// Link is a stateless operator's body for typed chains (exec.Typed):
// given its node, the task's frame and its child's entry, it returns its own
// entry, which sets the frame's node before it calls user code.
type Link[K, V, K2, V2 any] func(n *exec.Node, f *exec.Frame, emit func(K2, V2) error) func(K, V) error

// Stateless is a stateless operator: its body over erased records and,
// where it has one, its typed chain link.
type Stateless[K, V, K2, V2 any] struct {
	// Rekeys marks an operator that changes the key: it drops a
	// tombstone (a delete has no new key) instead of passing it on.
	Rekeys bool
	// Fn is the body over erased records; it never sees a tombstone.
	Fn func(exec.Context, exec.Record) error
	// Link is the typed body; nil if the operator has none.
	Link Link[K, V, K2, V2]
}

// New is the node's New: Fn behind the tombstone guard.
func (s Stateless[K, V, K2, V2]) New() func() exec.Processor {
	return NewFn(Guard(s.Rekeys, s.Fn))
}

// Typed is the node's Typed (nil without a Link). No tombstone guard: a
// typed chain starts at a source whose records have values (From).
func (s Stateless[K, V, K2, V2]) Typed(n *exec.Node) *exec.Typed {
	link := s.Link
	if link == nil {
		return nil
	}
	return Chain(func(f *exec.Frame, emit func(K2, V2) error) func(K, V) error { return link(n, f, emit) })
}

// Guard keeps tombstones (a table's deletes) from fn, which has no value to
// give the user's function: an operator that keeps the key passes them on,
// one that changes it (rekeys) ignores them, and counts them.
func Guard(rekeys bool, fn func(exec.Context, exec.Record) error) func(exec.Context, exec.Record) error {
	return func(c exec.Context, r exec.Record) error {
		if r.Value != exec.Tombstone {
			return fn(c, r)
		}
		if rekeys {
			c.CountIgnoredDelete()
			return nil
		}
		return c.Forward(r)
	}
}

// Map is the operator that changes key and value with fn.
func Map[K, V, K2, V2 any](fn func(K, V) (K2, V2)) Stateless[K, V, K2, V2] {
	return Stateless[K, V, K2, V2]{Rekeys: true, Fn: func(c exec.Context, r exec.Record) error {
		r.Key, r.Value = fn(r.Key.(K), r.Value.(V))
		return c.Forward(r)
	}, Link: func(n *exec.Node, f *exec.Frame, emit func(K2, V2) error) func(K, V) error {
		return func(k K, v V) error {
			f.At(n, exec.Processing)
			return emit(fn(k, v))
		}
	}}
}

// MapValues is the operator that changes the value with fn.
func MapValues[K, V, V2 any](fn func(V) V2) Stateless[K, V, K, V2] {
	return Stateless[K, V, K, V2]{Fn: func(c exec.Context, r exec.Record) error {
		r.Value = fn(r.Value.(V))
		return c.Forward(r)
	}, Link: func(n *exec.Node, f *exec.Frame, emit func(K, V2) error) func(K, V) error {
		return func(k K, v V) error {
			f.At(n, exec.Processing)
			return emit(k, fn(v))
		}
	}}
}

// FlatMap is the operator that turns each record into the zero or more
// records fn returns. E is the DSL's key-value pair: any struct of a Key
// and a Value, read by conversion (no call per element).
func FlatMap[K, V, K2, V2 any, E ~struct {
	Key   K2
	Value V2
}](fn func(K, V) []E) Stateless[K, V, K2, V2] {
	type kv = struct {
		Key   K2
		Value V2
	}
	return Stateless[K, V, K2, V2]{Rekeys: true, Fn: func(c exec.Context, r exec.Record) error {
		for _, e := range fn(r.Key.(K), r.Value.(V)) {
			r.Key, r.Value = kv(e).Key, kv(e).Value
			if err := c.Forward(r); err != nil {
				return err
			}
		}
		return nil
	}, Link: func(n *exec.Node, f *exec.Frame, emit func(K2, V2) error) func(K, V) error {
		return func(k K, v V) error {
			f.At(n, exec.Processing)
			for _, e := range fn(k, v) {
				if err := emit(kv(e).Key, kv(e).Value); err != nil {
					return err
				}
			}
			return nil
		}
	}}
}

// FlatMapValues is the operator that turns each value into the zero or
// more values fn returns, with the same key.
func FlatMapValues[K, V, V2 any](fn func(V) []V2) Stateless[K, V, K, V2] {
	return Stateless[K, V, K, V2]{Fn: func(c exec.Context, r exec.Record) error {
		for _, v := range fn(r.Value.(V)) {
			r.Value = v
			if err := c.Forward(r); err != nil {
				return err
			}
		}
		return nil
	}, Link: func(n *exec.Node, f *exec.Frame, emit func(K, V2) error) func(K, V) error {
		return func(k K, v V) error {
			f.At(n, exec.Processing)
			for _, v2 := range fn(v) {
				if err := emit(k, v2); err != nil {
					return err
				}
			}
			return nil
		}
	}}
}

// Filter is the operator that keeps the records for which pred is true.
func Filter[K, V any](pred func(K, V) bool) Stateless[K, V, K, V] {
	return Stateless[K, V, K, V]{Fn: func(c exec.Context, r exec.Record) error {
		if pred(r.Key.(K), r.Value.(V)) {
			return c.Forward(r)
		}
		return nil
	}, Link: func(n *exec.Node, f *exec.Frame, emit func(K, V) error) func(K, V) error {
		return func(k K, v V) error {
			if f.At(n, exec.Processing); pred(k, v) {
				return emit(k, v)
			}
			return nil
		}
	}}
}

// SelectKey is the operator that sets the key fn computes from the record.
func SelectKey[K, V, K2 any](fn func(K, V) K2) Stateless[K, V, K2, V] {
	return Stateless[K, V, K2, V]{Rekeys: true, Fn: func(c exec.Context, r exec.Record) error {
		r.Key = fn(r.Key.(K), r.Value.(V))
		return c.Forward(r)
	}, Link: func(n *exec.Node, f *exec.Frame, emit func(K2, V) error) func(K, V) error {
		return func(k K, v V) error {
			f.At(n, exec.Processing)
			return emit(fn(k, v), v)
		}
	}}
}

// Peek is the operator that calls fn for each record and passes it on.
func Peek[K, V any](fn func(K, V)) Stateless[K, V, K, V] {
	return Stateless[K, V, K, V]{Fn: func(c exec.Context, r exec.Record) error {
		fn(r.Key.(K), r.Value.(V))
		return c.Forward(r)
	}, Link: func(n *exec.Node, f *exec.Frame, emit func(K, V) error) func(K, V) error {
		return func(k K, v V) error {
			f.At(n, exec.Processing)
			fn(k, v)
			return emit(k, v)
		}
	}}
}

// BranchChild is the operator of one branch of Branch: it passes the
// records the branch node sent it on.
func BranchChild[K, V any]() Stateless[K, V, K, V] {
	return Stateless[K, V, K, V]{Fn: Pass}
}

// Branch is the body of a branch node: a record goes to the child named
// children[i] of the first predicate preds[i] it matches, and is dropped if
// it matches none; a tombstone, with no value to test, goes to the first.
// children may be filled in after the call, before the task runs.
func Branch[K, V any](preds []func(K, V) bool, children []string) func(exec.Context, exec.Record) error {
	return func(c exec.Context, r exec.Record) error {
		if r.Value == exec.Tombstone {
			return c.ForwardTo(children[0], r) // no value to test: the first branch
		}
		k, v := r.Key.(K), r.Value.(V)
		for i, p := range preds {
			if p(k, v) {
				return c.ForwardTo(children[i], r)
			}
		}
		return nil
	}
}
