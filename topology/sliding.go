package topology

import (
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

// Sliding windows (window.Sliding) are aggregated by their own node,
// whose runtime is ops.Sliding (how windows are made from the records, and
// when they emit) over the store layout of layout/sliding.go. Here: which
// of WindowedBy's options it accepts, its store and its node.

// slidingNode adds the node of AggregateWindows, CountWindows or
// ReduceWindows over sliding windows.
func slidingNode[K, V, A any](ws WindowedStream[K, V], kind string, m Materialization[K, A], fn func(K, V, A, bool) A) Table[Windowed[K], A] {
	t := ws.g.s.t
	sw, _ := ws.w.(window.SlidingWindows)
	var emit ops.SlidingEmit
	switch ws.cfg.trigger {
	case window.OnWatermark():
		emit = ops.SlidingOnWatermark
	case window.AtClose():
		emit = ops.SlidingFinal
	case window.EveryRecord():
		emit = ops.SlidingEveryUpdate
	default:
		// A general trigger would need per-window counts and timers for
		// windows that appear after their records; not supported yet.
		t.errorf(ErrInvalidWindow, "sliding windows emit on the watermark (the default), with EmitFinal or with EmitEveryUpdate only, not with trigger %v", ws.cfg.trigger)
	}
	vs := ws.g.s.vs
	if vs == nil {
		vs = ws.g.g.Val
	}
	if vs == nil {
		t.errorf(ErrMissingSerde, "sliding windows keep their records and need the stream's value serde (give one in Grouped)")
	}
	if !m.register(t) {
		return Table[Windowed[K], A]{t: t, n: ws.g.s.n}
	}
	if ws.late.agg != nil {
		t.errorf(ErrDuplicateName, "windowed stream aggregated twice (stores %q and %q); window it again for a second aggregation", ws.late.agg.Stores[0], m.Name())
	}
	d, lateness := sw.TimeDifference(), ws.cfg.lateness
	spec := t.stores[m.Name()] // this topology's, not the shared m.spec
	spec.Windowed = true
	spec.Query = windowQuery(m) // its windows are laid out as window.go's
	spec.Layout = layout.KindSliding
	// It keeps the records too, in the stream's value serde: a savepoint
	// must tell a change of either.
	spec.ValueSerde = serde.ID(m.vs) + "+records:" + serde.ID(vs)
	// As window.go's retention: the longest a record or window is kept,
	// plus a day.
	spec.Retention = time.Duration(d+lateness)*time.Millisecond + 24*time.Hour
	s := ws.g.prepare(m.Name(), m.ks)
	late := ws.late
	n := t.add(&exec.Node{
		Name:   t.name(m.Name()+"-sliding-"+kind, "SLIDING-"+kind),
		Kind:   exec.KindProcessor,
		Stores: []string{m.Name()},
		New: func() exec.Processor {
			lateChild := ""
			if late.node != nil {
				lateChild = late.node.Name
			}
			return ops.NewSliding(ops.SlidingConfig[K, V, A]{Store: m.Name(), Key: m.ks, Value: vs,
				D: d, Lateness: lateness, Emit: emit, Fn: fn,
				Agg: m.vs, Windowed: windowedKey[K], LateChild: lateChild})
		},
	}, s.n)
	late.agg = n
	return Table[Windowed[K], A]{t: t, n: n, ks: WindowedSerde(m.ks), vs: m.vs}
}
