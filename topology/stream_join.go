package topology

import (
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// JoinWindow bounds a stream-stream join (Kafka Streams' JoinWindows): a
// left record at ts joins the right records of its key with timestamps in
// [ts-before, ts+after], both ends inclusive. Grace is how long after that
// a record may still arrive; it defaults to 0 and is never hidden.
type JoinWindow struct {
	before, after, grace int64
}

// JoinWindows is a symmetric window: right records up to d before or after
// a left one.
func JoinWindows(d time.Duration) JoinWindow {
	return JoinWindow{before: d.Milliseconds(), after: d.Milliseconds()}
}

// JoinWindowsBetween is a window of right records from before a left
// record to after it.
func JoinWindowsBetween(before, after time.Duration) JoinWindow {
	return JoinWindow{before: before.Milliseconds(), after: after.Milliseconds()}
}

// WithGrace lets records arrive up to d late (after the watermark passed
// the end of the windows they could join).
func (w JoinWindow) WithGrace(d time.Duration) JoinWindow { w.grace = d.Milliseconds(); return w }

// StreamJoined names and types the stores of a stream-stream join: the
// records of each side wait in the window stores <name>-left and
// <name>-right (changelogs <application.id>-<name>-left-changelog and
// -right-changelog), and re-keyed sides repartition through
// <application.id>-<name>-left-repartition (and -right-).
type StreamJoined[K, VL, VR any] struct {
	Name string
	Key  serde.Serde[K]
	Left serde.Serde[VL]
	// Right is the right side's value serde.
	Right serde.Serde[VR]
	// Stores are options of both sides' stores. InMemory keeps the
	// records of the window in memory rather than in Pebble, as Kafka
	// Streams' in-memory window store suppliers do: faster where the
	// window fits in memory (outside state.memory.budget), restored from
	// the changelogs whenever a task opens.
	Stores []StoreOption
}

// JoinStreams joins the records of two streams with equal keys whose
// timestamps are within the window (inner join): each pair is joined once,
// when the second of the two arrives.
func JoinStreams[K, VL, VR, V any](l Stream[K, VL], r Stream[K, VR], w JoinWindow, joiner func(K, VL, VR) V, j StreamJoined[K, VL, VR]) Stream[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "JoinStreams needs a joiner")
	}
	return streamJoin(l, r, w, j, "JOIN-STREAMS", false, false, func(k K, lv VL, _ bool, rv VR, _ bool) V { return joiner(k, lv, rv) })
}

// LeftJoinStreams is JoinStreams that also emits each left record that
// joined nothing, with ok=false, once no right record can join it any
// more: when the watermark passes ts+before+after+grace. No left record is
// ever emitted unjoined and then joined.
func LeftJoinStreams[K, VL, VR, V any](l Stream[K, VL], r Stream[K, VR], w JoinWindow, joiner func(k K, lv VL, rv VR, ok bool) V, j StreamJoined[K, VL, VR]) Stream[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "LeftJoinStreams needs a joiner")
	}
	return streamJoin(l, r, w, j, "LEFTJOIN-STREAMS", true, false, func(k K, lv VL, _ bool, rv VR, rok bool) V { return joiner(k, lv, rv, rok) })
}

// OuterJoinStreams is LeftJoinStreams for both sides.
func OuterJoinStreams[K, VL, VR, V any](l Stream[K, VL], r Stream[K, VR], w JoinWindow, joiner func(k K, lv VL, lok bool, rv VR, rok bool) V, j StreamJoined[K, VL, VR]) Stream[K, V] {
	if joiner == nil {
		l.t.errorf(ErrNilFunction, "OuterJoinStreams needs a joiner")
	}
	return streamJoin(l, r, w, j, "OUTERJOIN-STREAMS", true, true, joiner)
}

func streamJoin[K, VL, VR, V any](l Stream[K, VL], r Stream[K, VR], w JoinWindow, j StreamJoined[K, VL, VR], kind string, leftOuter, rightOuter bool, joiner func(K, VL, bool, VR, bool) V) Stream[K, V] {
	t := l.t
	if l.t != r.t {
		t.errorf(ErrForeignHandle, "join of streams from two topologies")
	}
	if j.Name == "" || j.Key == nil || j.Left == nil || j.Right == nil {
		t.errorf(ErrMissingSerde, "%s needs StreamJoined with a name and serdes", kind)
		return Stream[K, V]{t: t, n: l.n}
	}
	if w.before < 0 || w.after < 0 || w.grace < 0 {
		t.errorf(ErrInvalidWindow, "join window bounds and grace must not be negative")
	}
	if l.keyChanged {
		l = repartition(l, j.Name+"-left", j.Key, j.Left)
	}
	if r.keyChanged {
		r = repartition(r, j.Name+"-right", j.Key, j.Right)
	}
	retention := time.Duration(w.before+w.after+w.grace)*time.Millisecond + 24*time.Hour
	lm := Materialized(j.Name+"-left", j.Key, j.Left, j.Stores...)
	rm := Materialized(j.Name+"-right", j.Key, j.Right, j.Stores...)
	for _, spec := range []*exec.Store{lm.spec, rm.spec} {
		spec.Windowed, spec.Retention = true, retention
		spec.Query = nil // records by time, not a key's value: not queryable
		spec.Layout = layout.KindJoin
		spec.Packing = &ops.JoinPacking
		if spec.InMemory {
			spec.NewEngine = func() store.Engine { return ops.NewJoinMemory() }
		}
	}
	if !lm.register(t) || !rm.register(t) {
		return Stream[K, V]{t: t, n: l.n}
	}
	stores := []string{lm.Name(), rm.Name()}
	// A left record at ts may be late once ts+after+grace is reached: the
	// earliest right record it could join (ts-before) is then gone. It is
	// removed (and, unjoined in a left join, emitted) at
	// ts+before+after+grace, when no on-time right record can join it.
	span := w.before + w.after + w.grace
	left := t.add(&exec.Node{Name: t.name(j.Name+"-join-left", kind+"-LEFT"), Kind: exec.KindProcessor, Stores: stores, New: func() exec.Processor {
		return ops.NewStreamJoinSide(ops.StreamJoinConfig[K, VL, VR, V]{OwnStore: lm.Name(), OtherStore: rm.Name(),
			Key: j.Key, OwnValue: j.Left, OtherValue: j.Right, LateAfter: w.after + w.grace, CloseAfter: span,
			Lo: -w.after, Hi: w.before, Outer: leftOuter, OtherOuter: rightOuter,
			Join: func(k K, own VL, other VR, ok bool) V { return joiner(k, own, true, other, ok) }})
	}}, l.n)
	right := t.add(&exec.Node{Name: t.name(j.Name+"-join-right", kind+"-RIGHT"), Kind: exec.KindProcessor, Stores: stores, New: func() exec.Processor {
		return ops.NewStreamJoinSide(ops.StreamJoinConfig[K, VR, VL, V]{OwnStore: rm.Name(), OtherStore: lm.Name(),
			Key: j.Key, OwnValue: j.Right, OtherValue: j.Left, LateAfter: w.before + w.grace, CloseAfter: span,
			Lo: -w.before, Hi: w.after, Outer: rightOuter, OtherOuter: leftOuter,
			Join: func(k K, own VR, other VL, ok bool) V { return joiner(k, other, ok, own, true) }})
	}}, r.n)
	left.Typed, right.Typed = ops.StreamJoinTyped[K, VL, VR, V](left), ops.StreamJoinTyped[K, VR, VL, V](right)
	n := t.add(&exec.Node{Name: t.name("", kind), Kind: exec.KindProcessor, New: ops.NewFn(ops.Pass)}, left, right)
	return Stream[K, V]{t: t, n: n, ks: j.Key, keyChanged: false}
}
