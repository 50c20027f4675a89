package task

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
)

// External sinks in the task (exec/external.go): a two-phase sink's buffer
// is a processor the task holds per unit and drops on abort; the driver
// takes what it holds at the commit. An offsets-mode sink is a sink to
// the task's own partition of its topic.

// TwoPhaseSink is a two-phase sink's buffer in one task.
type TwoPhaseSink struct {
	Node    *exec.Node // whose OnError applies to records the participant refuses
	Spec    *exec.TwoPhase
	Pending exec.Pending
}

// TwoPhase lists the task's two-phase sinks, in plan order; empty before
// Init.
func (t *Task) TwoPhase() []TwoPhaseSink {
	var out []TwoPhaseSink
	for _, ni := range t.pending {
		if ni.node.TwoPhase != nil {
			out = append(out, TwoPhaseSink{Node: ni.node, Spec: ni.node.TwoPhase, Pending: ni.proc.(exec.Pending)})
		}
	}
	return out
}

// sendOwn produces what an offsets-mode sink encoded to the task's own
// partition of its topic, where the sink's writer for this task reads it;
// the record carries no watermark (no task reads the topic).
func (n *nodeInst) sendOwn(k, v []byte, hs []exec.Header, ts int64) error {
	return n.produce(n.topic, n.t.id.Partition, k, v, hs, ts)
}

// Input is the raw input record being processed (exec.InputReader), for a
// two-phase sink to keep beside each record it holds.
func (n *nodeInst) Input() (exec.Input, bool) {
	r := n.t.cur.rec
	if r == nil {
		return exec.Input{}, false
	}
	hs := make([]exec.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = exec.Header{Key: h.Key, Value: h.Value}
	}
	return exec.Input{Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp.UnixMilli(),
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, true
}

// ExternalFailed applies node's error policy (its OnError, else the
// application's handler of production errors, else Fail) to in, a record
// that an external store refused after the task had processed it
// (sink.Rejected): a production error (invariant 6). DeadLetter returns the
// dead letter for the caller to produce (a two-phase sink's inside the
// open transaction; an offsets-mode writer's after the commit, on its
// own); Fail returns the error that stops the instance. Safe to call
// beside the task's own processing: it reads only its configuration.
func (t *Task) ExternalFailed(node *exec.Node, in exec.Input, cause error) (exec.Action, *kgo.Record, error) {
	dlq := t.cfg.DeadLetter
	if src := t.sources[in.Topic]; src != nil && src.node.DeadLetter != "" {
		dlq = src.node.DeadLetter
	}
	ec := exec.ErrorContext{Class: exec.Production, Node: node.Name, Topic: in.Topic, Partition: in.Partition,
		Offset: in.Offset, Timestamp: in.Timestamp, Err: cause}
	switch a := t.decide(node, ec, dlq != ""); a {
	case exec.Continue:
		return a, nil, nil
	case exec.DeadLetter:
		return a, DeadLetter(dlq, in, string(exec.Production), cause), nil
	default:
		return exec.Fail, nil, fmt.Errorf("processor: task %s: %s error in %s at %s/%d@%d: %w", t.id, exec.Production, node.Name, in.Topic, in.Partition, in.Offset, cause)
	}
}

// DeadLetter is the dead letter of in: its bytes and headers, then its
// origin and the error in sluice's headers (exec.HeaderSourceTopic...).
func DeadLetter(topic string, in exec.Input, class string, cause error) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(in.Headers)+6)
	for _, h := range in.Headers {
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	hs = append(hs,
		kgo.RecordHeader{Key: exec.HeaderSourceTopic, Value: []byte(in.Topic)},
		kgo.RecordHeader{Key: exec.HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(in.Partition), 10)},
		kgo.RecordHeader{Key: exec.HeaderSourceOffset, Value: strconv.AppendInt(nil, in.Offset, 10)},
		kgo.RecordHeader{Key: exec.HeaderSourceTimestamp, Value: strconv.AppendInt(nil, in.Timestamp, 10)},
		kgo.RecordHeader{Key: exec.HeaderErrorClass, Value: []byte(class)},
		kgo.RecordHeader{Key: exec.HeaderErrorMessage, Value: []byte(cause.Error())},
	)
	return &kgo.Record{Topic: topic, Key: in.Key, Value: in.Value, Headers: hs, Timestamp: time.UnixMilli(in.Timestamp)}
}
