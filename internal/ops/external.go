package ops

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
)

// The runtimes of external sinks (exec/external.go), generic over the
// sink's types.

// ErrSinkTombstone is a processing error: an external sink got a delete,
// which sink.Record cannot carry.
var ErrSinkTombstone = errors.New("sink: an external sink cannot write a delete (tombstone); filter deletes out or map them to a value")

// TwoPhaseBuffer is the processor of a two-phase sink in one task: it holds
// the records of the open transaction, each with the coordinates of the
// input record it derives from (exec.Pending), and that input's bytes, for
// the dead letter of a record the participant refuses.
type TwoPhaseBuffer[K, V any] struct {
	ctx  exec.Context
	in   exec.InputReader // nil: a Context that cannot say (no dead letters)
	recs []sink.Record[K, V]
	ins  []exec.Input
	mark int
}

// TwoPhaseBatch is what TwoPhaseBuffer.Take hands over: the records and,
// index for index, their inputs.
type TwoPhaseBatch[K, V any] struct {
	Recs []sink.Record[K, V]
	Ins  []exec.Input
}

// NewTwoPhaseBuffer is the node's New.
func NewTwoPhaseBuffer[K, V any]() exec.Processor { return &TwoPhaseBuffer[K, V]{} }

func (b *TwoPhaseBuffer[K, V]) Init(ctx exec.Context) error {
	b.ctx = ctx
	b.in, _ = ctx.(exec.InputReader)
	return nil
}

func (b *TwoPhaseBuffer[K, V]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		return ErrSinkTombstone
	}
	topic, p, off, ok := b.ctx.RecordMeta()
	if !ok {
		p, off = -1, -1 // a punctuation: no input record
	}
	var in exec.Input
	if b.in != nil {
		in, _ = b.in.Input()
	}
	b.recs = append(b.recs, sink.Record[K, V]{Key: r.Key.(K), Value: r.Value.(V), Timestamp: r.Timestamp, Topic: topic, Partition: p, Offset: off})
	b.ins = append(b.ins, in)
	return nil
}

func (b *TwoPhaseBuffer[K, V]) Close() error { b.Drop(); return nil }

func (b *TwoPhaseBuffer[K, V]) Mark() { b.mark = len(b.recs) }

func (b *TwoPhaseBuffer[K, V]) Rollback() {
	clear(b.recs[b.mark:])
	clear(b.ins[b.mark:])
	b.recs, b.ins = b.recs[:b.mark], b.ins[:b.mark]
}

// Take hands the held records over; the buffer starts new slices, since
// the driver keeps the batch until the participant has it.
func (b *TwoPhaseBuffer[K, V]) Take() (any, int) {
	batch := &TwoPhaseBatch[K, V]{Recs: b.recs, Ins: b.ins}
	b.recs, b.ins, b.mark = nil, nil, 0
	return batch, len(batch.Recs)
}

func (b *TwoPhaseBuffer[K, V]) Drop() {
	clear(b.recs)
	clear(b.ins)
	b.recs, b.ins, b.mark = b.recs[:0], b.ins[:0], 0
}

// TwoPhaseSpec erases p for the runtime.
func TwoPhaseSpec[K, V any](name, store string, p sink.Participant[K, V]) *exec.TwoPhase {
	var ping func(context.Context) error
	if pi, ok := p.(sink.Pinger); ok {
		ping = pi.Ping
	}
	return &exec.TwoPhase{
		Ping: ping,
		Name: name, Store: store,
		Prepare: func(ctx context.Context, xid string, batch any) error {
			var recs []sink.Record[K, V]
			if b, ok := batch.(*TwoPhaseBatch[K, V]); ok {
				recs = b.Recs
			}
			return p.Prepare(ctx, xid, recs)
		},
		CommitPrepared:   p.CommitPrepared,
		RollbackPrepared: p.RollbackPrepared,
		Prepared:         p.Prepared,
		Reject: func(batch any, i int) (exec.Input, bool) {
			b, ok := batch.(*TwoPhaseBatch[K, V])
			if !ok || i < 0 || i >= len(b.Recs) {
				return exec.Input{}, false
			}
			in := b.Ins[i]
			b.Recs = append(b.Recs[:i:i], b.Recs[i+1:]...)
			b.Ins = append(b.Ins[:i:i], b.Ins[i+1:]...)
			return in, true
		},
	}
}

// OffsetsSpec erases st for the runtime: the writer's records are decoded
// with ks and vs, the sink's topic serdes.
func OffsetsSpec[K, V any](name string, st sink.Idempotent[K, V], ks serde.Serde[K], vs serde.Serde[V]) *exec.OffsetsSink {
	var ping func(context.Context) error
	if pi, ok := st.(sink.Pinger); ok {
		ping = pi.Ping
	}
	return &exec.OffsetsSink{
		Ping: ping,
		Name: name,
		Offsets: func(ctx context.Context, topic string) (map[int32]int64, error) {
			return st.Offsets(ctx, name, topic)
		},
		Write: func(ctx context.Context, topic string, raw []exec.RawRecord, next map[int32]int64) error {
			recs := make([]sink.Record[K, V], len(raw))
			for i, r := range raw {
				k, err := ks.Decode(r.Key)
				if err != nil {
					return fmt.Errorf("sink %s: %s/%d@%d: key: %w", name, r.Topic, r.Partition, r.Offset, err)
				}
				v, err := vs.Decode(r.Value)
				if err != nil {
					return fmt.Errorf("sink %s: %s/%d@%d: value: %w", name, r.Topic, r.Partition, r.Offset, err)
				}
				recs[i] = sink.Record[K, V]{Key: k, Value: v, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
			}
			return st.Write(ctx, name, topic, recs, next)
		},
	}
}

// OffsetsEncoder is an offsets-mode sink's Encode: Encoder, refusing a
// delete, which the store could not be handed.
func OffsetsEncoder[K, V any](ks serde.Serde[K], vs serde.Serde[V]) func(a *exec.Arena, k, v any) ([]byte, []byte, error) {
	enc := Encoder(ks, vs)
	return func(a *exec.Arena, k, v any) ([]byte, []byte, error) {
		if v == exec.Tombstone {
			return nil, nil, ErrSinkTombstone
		}
		return enc(a, k, v)
	}
}
