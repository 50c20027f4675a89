package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
)

// External sinks (package sink; DESIGN.md, invariant 7): a stream written
// to a store outside Kafka exactly once, in one of two modes chosen per
// sink. Both are named by the user, as stores are: the name is part of
// internal topic and store names and must stay stable across deployments.

// ToParticipant writes s through p in two phases, tied to the Kafka
// transaction: the records a task's sink received in a transaction are
// prepared in p under a new transaction id before the Kafka transaction
// commits, committed in p after it committed, and rolled back if it
// aborted; when a task opens, what an earlier owner left prepared is
// committed or rolled back by what the committed state recorded. Rows
// become visible right after the commit; p must support prepared
// transactions. The id is recorded in the store <name>-sink-xid (changelog
// <application.id>-<name>-sink-xid-changelog). A delete (tombstone) in s
// is a processing error. It needs processing.guarantee=exactly_once
// (processor.New refuses the others). A record p refuses (sink.Rejected)
// is a production error handled by SinkOnError's handler, else the
// application's: its input record dead-lettered inside the transaction,
// skipped, or the instance stopped; the rest of the batch is prepared
// again without it.
func ToParticipant[K, V any](s Stream[K, V], name string, p sink.Participant[K, V], opts ...SinkOption) {
	if !externalName(s.t, name) {
		return
	}
	if p == nil {
		s.t.errorf(ErrNilFunction, "sink %q needs a participant", name)
		return
	}
	st := names.SinkXIDStore(name)
	s.t.addStore(&exec.Store{Name: st})
	n := &exec.Node{
		Name:     s.t.name(name+names.SinkSuffix, "SINK"),
		Kind:     exec.KindProcessor,
		New:      ops.NewTwoPhaseBuffer[K, V],
		Stores:   []string{st},
		TwoPhase: ops.TwoPhaseSpec(name, st, p),
	}
	for _, o := range opts {
		o.applySink(n)
	}
	s.t.add(n, s.n)
}

// ToIdempotent writes s to store after the Kafka transaction that produced
// it committed: inside the transaction the records go to the internal
// topic <application.id>-<name>-sink (encoded with ks and vs, each to the
// partition of the task that wrote it); after the commit, a writer on the
// instance that owns the task reads the partition read_committed from the
// offset store holds and calls store.Write with the records and the next
// offset, in batches. Rows become visible after the commit plus the
// writer's lag; store needs no prepared transactions, only one ordinary
// transaction per Write. A delete (tombstone) in s is a production error.
// A record store refuses (sink.Rejected) is a production error handled by
// SinkOnError's handler, else the application's: dead-lettered (the sink
// topic's record; at least once, before the rest is written), skipped, or
// the instance stopped with the store's offset before it.
func ToIdempotent[K, V any](s Stream[K, V], name string, store sink.Idempotent[K, V], ks serde.Serde[K], vs serde.Serde[V], opts ...SinkOption) {
	if !externalName(s.t, name) {
		return
	}
	if store == nil {
		s.t.errorf(ErrNilFunction, "sink %q needs a store", name)
		return
	}
	if ks == nil || vs == nil {
		s.t.errorf(ErrMissingSerde, "sink %q needs a key and a value serde", name)
		return
	}
	n := &exec.Node{
		Name:          s.t.name(name+names.SinkSuffix, "SINK"),
		Kind:          exec.KindSink,
		Topics:        []string{names.Sink(name)},
		Internal:      true,
		TaskPartition: true,
		Encode:        ops.OffsetsEncoder(ks, vs),
		Offsets:       ops.OffsetsSpec(name, store, ks, vs),
	}
	for _, o := range opts {
		o.applySink(n)
	}
	s.t.add(n, s.n)
}

// externalName checks an external sink's name as a store's is checked.
func externalName(t *Topology, name string) bool {
	if name == "" {
		t.errorf(ErrMissingName, "an external sink must be named")
		return false
	}
	if err := validTopicPart(name); err != nil {
		t.errorf(ErrInvalidTopicName, "sink %q: %v", name, err)
		return false
	}
	return true
}
