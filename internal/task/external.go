package task

import "github.com/sluice-streams/sluice/internal/exec"

// External sinks in the task (exec/external.go): a two-phase sink's buffer
// is a processor the task holds per unit and drops on abort; the driver
// takes what it holds at the commit. An offsets-mode sink is a sink to
// the task's own partition of its topic.

// TwoPhaseSink is a two-phase sink's buffer in one task.
type TwoPhaseSink struct {
	Spec    *exec.TwoPhase
	Pending exec.Pending
}

// TwoPhase lists the task's two-phase sinks, in plan order; empty before
// Init.
func (t *Task) TwoPhase() []TwoPhaseSink {
	var out []TwoPhaseSink
	for _, ni := range t.pending {
		if ni.node.TwoPhase != nil {
			out = append(out, TwoPhaseSink{Spec: ni.node.TwoPhase, Pending: ni.proc.(exec.Pending)})
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
