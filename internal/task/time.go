package task

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// clock is a task's event time: one watermark input per user source topic
// (the task reads one partition of each) and one per upstream writer of each
// repartition topic (a writer announces its watermark in watermark records,
// see exec.HeaderWatermark). The task's watermark is the minimum over the
// inputs that are not idle (window.Tracker).
//
// The state that decisions depend on — the tracker and the stream time — is
// kept in the sub-topology's time store and committed with the offsets,
// so a restarted or replaying task decides the same (invariant 5).
type clock struct {
	tracker *window.Tracker
	base    map[string]int // runtime source topic → its first input
	// sinks are the repartition topics the task writes, with their widths:
	// each partition gets the task's watermark.
	sinks []sinkTopic

	// announced is the watermark and idleness last written to the sinks,
	// in the open transaction and at the last commit.
	announced, committedAnnounced announcement

	committed window.Tracker // the tracker at the last commit
	saved     []byte         // time state last written to the time store
	// committedSaved is saved at the last commit: after an abort the
	// store holds it again, and a replay that leaves the time as it was
	// writes nothing, as the first run did not.
	committedSaved []byte
}

type sinkTopic struct {
	topic      string
	partitions int32
}

type announcement struct {
	wm   int64
	idle bool
}

// newClock lays out the inputs of sub as seen by task t.
func (t *Task) newClock() error {
	c := &t.clock
	c.base = map[string]int{}
	n := 0
	for _, src := range t.sub.Sources {
		for _, topic := range src.Topics {
			width := int32(1)
			if src.Internal {
				topic = names.Internal(t.appID, topic)
				width = t.cfg.InternalPartitions[topic]
				if width < 1 {
					width = 1
				}
			}
			c.base[topic] = n
			n += int(width)
		}
	}
	for _, node := range t.sub.Nodes {
		if node.Kind == exec.KindSink && node.Internal && !node.TaskPartition {
			topic := names.Internal(t.appID, node.Topics[0])
			c.sinks = append(c.sinks, sinkTopic{topic, max(1, t.cfg.InternalPartitions[topic])})
		}
	}
	var opts []window.TrackerOpt
	if t.cfg.IdleTimeout > 0 {
		opts = append(opts, window.IdleTimeout(t.cfg.IdleTimeout))
	}
	// Every input is fed with Advance, each source applying its own
	// strategy, so the tracker's own strategy is never used.
	tr, err := window.NewTracker(window.Monotonous(), n, opts...)
	if err != nil {
		return fmt.Errorf("processor: task %s: %w", t.id, err)
	}
	// Tables do not hold the watermark back: their inputs stay idle.
	for _, src := range t.sub.Sources {
		if src.Table && !src.Internal {
			for _, topic := range src.Topics {
				tr.SetIdle(c.base[topic])
			}
		}
	}
	c.tracker = tr
	c.announced = announcement{wm: window.NoWatermark}
	c.committedAnnounced = c.announced
	c.committed.CopyFrom(tr)
	return nil
}

// Watermark is the task's watermark.
func (t *Task) Watermark() int64 { return t.clock.tracker.Watermark() }

// timestamp is the event time of a decoded record read by src.
func (t *Task) timestamp(src *exec.Node, k, v any, r *kgo.Record) (ts int64, err error) {
	switch src.Time {
	case exec.ProcessingTime:
		return t.wall, nil
	case exec.PayloadTime:
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("timestamp extractor panicked: %v", p)
			}
		}()
		return src.Extract(k, v, r.Timestamp.UnixMilli()), nil
	}
	return r.Timestamp.UnixMilli(), nil
}

// observe feeds an accepted record's timestamp to the watermark of input i,
// its topic's.
// Records of repartition topics carry no watermark of their own: their
// writers announce it.
func (t *Task) observe(src *exec.Node, i int, ts int64) {
	if src.Internal || src.Table {
		return
	}
	s := src.Watermark
	if s == nil {
		s = window.Monotonous()
	}
	tr := t.clock.tracker
	tr.Advance(i, s.Next(ts, tr.InputWatermark(i)))
}

// judgedWatermark is the watermark a record read by src from the task's
// current input (lastInput) is judged against (lateness), before the
// record's own header is read: for a user topic, that input's own
// watermark; for a repartition topic, the task's, which the record's
// sluice.wm header then raises to the watermark it was judged against
// where it was read from its user topic.
//
// Either way it depends only on the records of the one input partition
// the record came from, in that partition's order, not on how far the
// task's other inputs were fetched (the task's own watermark, the minimum
// over its inputs, does): so any interleaving of a task's inputs, and any
// replay, accepts and rejects the same records (invariant 5). A record
// late by its own input is late by every watermark the task could reach
// later, so nothing fires before an on-time record of any input arrives.
// The task's watermark is its floor still: it exceeds an input's own only
// when that input was idle (the wall-clock exception), and a window it
// already closed must not take records again.
func (t *Task) judgedWatermark(src *exec.Node) int64 {
	wm := t.clock.tracker.Watermark()
	if !src.Internal && !src.Table {
		wm = max(wm, t.clock.tracker.InputWatermark(t.lastInput))
	}
	return wm
}

// watermarkRecord applies a writer's announcement read from a repartition
// topic.
func (t *Task) watermarkRecord(r *kgo.Record, writer []byte) error {
	w, err := strconv.Atoi(string(writer))
	base := t.clock.base[r.Topic]
	width := max(1, int(t.cfg.InternalPartitions[r.Topic]))
	if err != nil || w < 0 || w >= width || len(r.Value) != 9 {
		return fmt.Errorf("malformed watermark record (writer %q, %d bytes)", writer, len(r.Value))
	}
	if r.Value[8]&1 != 0 {
		t.clock.tracker.SetIdle(base + w)
	} else {
		t.clock.tracker.Advance(base+w, int64(binary.BigEndian.Uint64(r.Value)))
	}
	return nil
}

// advance hands the watermark to the listeners, in topological order: after
// every record (a timer registered at or below the watermark is due at once)
// and whenever the watermark moves. Listeners keep track of what is due and
// return at once when nothing is. What a listener forwards runs as units of
// its own (see nodeInst.Forward), so one failing result is handled by the
// error policy without undoing the others.
func (t *Task) advance() error {
	if len(t.onWatermark) == 0 {
		return nil
	}
	wm := t.clock.tracker.Watermark()
	for _, ni := range t.onWatermark {
		l := ni.proc.(exec.WatermarkListener)
		if err := t.listen(ni, func() error { return l.OnWatermark(wm) }); err != nil {
			return err
		}
	}
	return nil
}

// listen runs a listener's callback with ni as the running node; a panic
// in the listener itself (not in what it forwards) stops the task.
func (t *Task) listen(ni *nodeInst, fn func() error) (err error) {
	prev, prevWM := t.firing, t.recWM
	t.firing, t.recWM = true, t.clock.tracker.Watermark()
	t.curNode = ni.node
	defer func() {
		t.firing, t.recWM, t.curNode = prev, prevWM, nil
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
		if err != nil {
			err = fmt.Errorf("processor: task %s: %s: %w", t.id, ni.node.Name, err)
		}
	}()
	return fn()
}

// fire runs one result forwarded by a listener, or one held update of a
// folding node, as a unit: on failure its writes and records are rolled
// back and the error policy decides. Fail stops the task; Continue drops
// the result; DeadLetter, having no input record to write, drops it too.
// Either way the action is logged and counted (OnAction), never silent.
func (t *Task) fire(ni *nodeInst, ts int64, fn func() error) error {
	t.begin()
	// What ni forwards may go through a typed chain (a folding node's),
	// whose errors name their node only in the frame.
	err := t.chain(ni, fn)
	if err == nil {
		t.release()
		return nil
	}
	t.rollback()
	var ne *nodeError
	errors.As(err, &ne) // chain blames every error on a node
	node, class, err := ne.node, ne.class, ne.err
	ec := exec.ErrorContext{Class: class, Node: node.Name, Timestamp: ts, Err: err}
	if c := t.cur; c.ok {
		ec.Topic, ec.Partition, ec.Offset = c.topic, c.partition, c.offset
	}
	// A damaged store stops the task whatever the handler says (see failed).
	if errors.Is(err, store.ErrCorrupted) || t.decide(node, ec, false) == exec.Fail {
		if !t.firing {
			return fmt.Errorf("processor: task %s: %s error in %s forwarding held updates at the flush: %w", t.id, class, node.Name, err)
		}
		return fmt.Errorf("processor: task %s: %s error in %s firing at watermark %d: %w", t.id, class, node.Name, t.clock.tracker.Watermark(), err)
	}
	return nil
}

// chain runs send, what ni forwards, and returns its error blamed on the
// node it arose in (a *nodeError): where a typed chain was, or the
// innermost erased node. fire runs each of a listener's results so; a
// window the erased path brought a record to sends its results so
// (ForwardTyped), so that the erased nodes that called it do not take a
// failure after it for their own.
func (t *Task) chain(ni *nodeInst, send func() error) error {
	t.frame.At(ni.node, exec.Processing)
	err := t.runFrom(send)
	if err == nil {
		return nil
	}
	var ne *nodeError
	if errors.As(err, &ne) {
		return err
	}
	return &nodeError{node: t.frame.Node, class: t.frame.Class, err: err}
}

// runFrom runs fn, a forward from a node, turning a panic downstream into an
// error of the node it happened in: the innermost erased node, or where
// the typed chain was (no erased node below the forwarding one ran). It
// leaves the running node as it found it.
func (t *Task) runFrom(fn func() error) (err error) {
	prev := t.curNode
	defer func() {
		if p := recover(); p != nil {
			node, class := t.curNode, exec.Processing
			if node == prev {
				node, class = t.frame.Node, t.frame.Class
			}
			err = &nodeError{node: node, class: class, err: fmt.Errorf("panic: %v", p)}
		}
		t.curNode = prev
	}()
	return fn()
}

// announce writes the task's watermark to every partition of every
// repartition topic it writes, when it changed: downstream tasks take the
// minimum over their writers.
func (t *Task) announce() {
	c := &t.clock
	now := announcement{wm: c.tracker.Watermark(), idle: c.tracker.Idle()}
	if !t.carryWM || len(c.sinks) == 0 || now == c.announced || now.wm == window.NoWatermark && !now.idle {
		return
	}
	c.announced = now
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 9), uint64(now.wm))
	var flags byte
	if now.idle {
		flags = 1
	}
	v = append(v, flags)
	writer := []byte(strconv.Itoa(int(t.id.Partition)))
	// At most what a time.Time carries in nanoseconds (kgo's encoding):
	// the end of time (bounded runs) is past it.
	ts := time.UnixMilli(max(0, min(now.wm, MaxTimestamp, maxRecordMillis)))
	for _, s := range c.sinks {
		for p := range s.partitions {
			t.send(&kgo.Record{
				Topic: s.topic, Partition: p, Value: v, Timestamp: ts,
				Headers: []kgo.RecordHeader{{Key: exec.HeaderWatermark, Value: writer}},
			}, nil)
		}
	}
}

// saveTime writes the time state (layout/time.go) to the time store when
// it changed, before the stores flush, so it commits with the offsets it
// reflects.
func (t *Task) saveTime() error {
	if t.sub.TimeStore == "" {
		return nil
	}
	b := layout.AppendTimeState(nil, t.streamTime, t.clock.tracker)
	if string(b) == string(t.clock.saved) {
		return nil
	}
	t.clock.saved = b
	return t.stores[t.sub.TimeStore].Put(layout.TimeStateKey, b)
}

// loadTime restores the committed time state, after the stores restored.
func (t *Task) loadTime() error {
	if t.sub.TimeStore == "" {
		return nil
	}
	b, ok, err := t.stores[t.sub.TimeStore].Get(layout.TimeStateKey)
	if err != nil || !ok {
		return err
	}
	streamTime, tracker, err := layout.ParseTimeState(b)
	if err != nil {
		return fmt.Errorf("processor: task %s: time state in store %s: %w", t.id, t.sub.TimeStore, err)
	}
	if err := t.clock.tracker.UnmarshalBinary(tracker); err != nil {
		return fmt.Errorf("processor: task %s: time state in store %s (did the topology's inputs change? reset the application): %w", t.id, t.sub.TimeStore, err)
	}
	t.streamTime = streamTime
	t.committedStreamTime = t.streamTime
	t.clock.saved = append([]byte(nil), b...)
	t.clock.committedSaved = append([]byte(nil), b...)
	t.clock.committed.CopyFrom(t.clock.tracker)
	return nil
}

// commitTime remembers the committed time state, to return to on abort.
func (t *Task) commitTime() {
	t.clock.committed.CopyFrom(t.clock.tracker)
	t.clock.committedAnnounced = t.clock.announced
	t.clock.committedSaved = append(t.clock.committedSaved[:0], t.clock.saved...)
}

// abortTime returns to the committed time state: the tracker exactly as it
// was, idle timers included, which the time store does not keep.
func (t *Task) abortTime() {
	t.clock.tracker.CopyFrom(&t.clock.committed)
	t.clock.announced = t.clock.committedAnnounced
	t.clock.saved = append([]byte(nil), t.clock.committedSaved...)
}
