package ops

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/store"
)

// tableWriter is what the nodes that keep a table in a key-value store and
// forward its changes share (aggregations, table sources): the typed store
// and, with folding (exec.Context.Folding), holding each change back in the
// store until the flush instead of forwarding it. It is the Processor's
// Init, Close and Unfold of such a node.
type tableWriter[K, V any] struct {
	store KVStore[K, V]
	kv    *KV[K, V]
	ctx   exec.Context
	fold  bool
	// out is the typed chain the node's output goes to, if the task
	// linked one (tableTyped), and frame the task's.
	out   func(K, exec.ChangeOf[V]) error
	frame *exec.Frame
}

// tableLinker is the Processor of a node whose exec.Typed tableTyped made.
type tableLinker[K, V any] interface {
	linkOut(*exec.Frame, func(K, exec.ChangeOf[V]) error)
}

// linkOut keeps the typed chain the node's output goes to.
func (w *tableWriter[K, V]) linkOut(f *exec.Frame, out func(K, exec.ChangeOf[V]) error) {
	w.frame, w.out = f, out
}

func (w *tableWriter[K, V]) Init(ctx exec.Context) error {
	w.ctx, w.kv, w.fold = ctx, w.store.Open(ctx), ctx.Folding()
	return nil
}

func (w *tableWriter[K, V]) Close() error { return nil }

// get reads k's value for an update; write, which must follow with
// nothing else on the store between, stores the key's new value.
func (w *tableWriter[K, V]) get(k K) (V, bool, error) { return w.kv.GetForUpdate(k) }

// write stores the new value of the key get read, or deletes it
// (!ch.HasNew). With folding it holds ch back until the flush, with its
// record context, and reports held.
func (w *tableWriter[K, V]) write(ch exec.ChangeOf[V], ts int64, hs []exec.Header) (held bool, err error) {
	return w.fold, w.kv.WriteUpdate(ch.New, ch.HasNew, w.fold, ts, hs)
}

// change writes ch, the change of r's key k, and forwards it as r's value,
// unless it was held.
func (w *tableWriter[K, V]) change(r exec.Record, k K, ch exec.ChangeOf[V]) error {
	held, err := w.write(ch, r.Timestamp, r.Headers)
	if held || err != nil {
		return err
	}
	r.Value = ch.Erase()
	return w.ctx.Forward(r)
}

// Unfold forwards a held update (exec.Unfolder), through the typed chain
// if there is one; a key that was added and deleted since the last flush
// did not change.
func (w *tableWriter[K, V]) Unfold(h store.Held) error {
	k, ch, err := w.kv.DecodeChange(h)
	if err != nil || !ch.HasOld && !ch.HasNew {
		return err
	}
	hs, _ := h.Meta.([]exec.Header)
	if w.out != nil {
		w.frame.Timestamp, w.frame.Headers = h.Timestamp, hs
		return w.out(k, ch)
	}
	return w.ctx.Forward(exec.Record{Key: k, Value: ch.Erase(), Timestamp: h.Timestamp, Headers: hs})
}

// tableTyped is the exec.Typed of a node that keeps a table of K and V
// (its Processor embeds a tableWriter): its output is a typed chain of
// changes, which the writer keeps for its held updates. input, if not
// nil, makes the node's own entry from its Processor and that output; nil:
// the node takes no typed input.
func tableTyped[K, V any](input func(p exec.Processor, f *exec.Frame, out func(K, exec.ChangeOf[V]) error) any) *exec.Typed {
	return &exec.Typed{
		Link: func(f *exec.Frame, p exec.Processor, next any) any {
			out, ok := next.(func(K, exec.ChangeOf[V]) error)
			if !ok {
				return nil
			}
			p.(tableLinker[K, V]).linkOut(f, out)
			if input == nil {
				return nil
			}
			return input(p, f, out)
		},
		Out: changeOut[K, V],
		Fan: exec.ChainFan[K, exec.ChangeOf[V]],
	}
}

// changeOut is the Typed.Out of a node whose output is a chain of changes
// of K and V.
func changeOut[K, V any](f *exec.Frame, receive func(exec.Record) error) any {
	return func(k K, ch exec.ChangeOf[V]) error {
		return receive(exec.Record{Key: k, Value: ch.Erase(), Timestamp: f.Timestamp, Headers: f.Headers})
	}
}
