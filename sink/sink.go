package sink

import (
	"context"
	"errors"
)

// Record is one record handed to an external store: the key and value the
// stream carried, its timestamp, and the coordinates of the Kafka record it
// derives from. For a Participant those are the input record the task was
// processing when the sink received it; for an Idempotent store, the
// record of the committed output topic it was read from, which are unique
// and increase within a partition.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp int64 // milliseconds since the epoch
	Topic     string
	Partition int32
	Offset    int64
}

// MaxXIDLength bounds the transaction ids sluice hands a Participant: they
// are ASCII letters, digits, '-', '_' and '.', at most 64 bytes (MySQL's
// XA gtrid limit; PostgreSQL allows 200).
const MaxXIDLength = 64

// ErrNotPrepared is wrapped by a Participant's CommitPrepared or
// RollbackPrepared when no transaction is prepared under the id: an
// earlier call that lost its answer already resolved it.
var ErrNotPrepared = errors.New("sink: no transaction prepared under this id")

// Participant is an external transactional store that takes part in
// sluice's commit. sluice calls, for each task and commit that gave the
// sink records: Prepare (before the Kafka transaction commits), then
// CommitPrepared once it committed, or RollbackPrepared if it aborted; and,
// when a task opens, Prepared to find what an earlier owner left prepared,
// which it commits or rolls back according to the task's committed state.
// Implementations must be safe for concurrent use by several tasks.
type Participant[K, V any] interface {
	// Prepare writes records in a new external transaction and prepares
	// it under xid: once Prepare returns nil, the transaction survives a
	// crash of this process and of the store, and is neither visible nor
	// lost until CommitPrepared or RollbackPrepared. If Prepare returns an
	// error, nothing of the transaction may remain (not even prepared).
	Prepare(ctx context.Context, xid string, records []Record[K, V]) error
	// CommitPrepared makes the prepared transaction xid visible. It wraps
	// ErrNotPrepared when none is prepared under xid.
	CommitPrepared(ctx context.Context, xid string) error
	// RollbackPrepared discards the prepared transaction xid. It wraps
	// ErrNotPrepared when none is prepared under xid.
	RollbackPrepared(ctx context.Context, xid string) error
	// Prepared lists the ids of the prepared transactions that start with
	// prefix, in any order.
	Prepared(ctx context.Context, prefix string) ([]string, error)
}

// Idempotent is an external store written after the Kafka transaction that
// produced the records committed, from the committed output topic: each
// Write stores the records and, in the same store transaction, the next
// offset of each partition they came from, so that a replay skips what is
// already stored. It needs no prepared transactions. Implementations must be
// safe for concurrent use.
type Idempotent[K, V any] interface {
	// Offsets returns, for the sink named sink reading topic, the next
	// offset to write of each partition stored so far (none: empty).
	Offsets(ctx context.Context, sink, topic string) (map[int32]int64, error)
	// Write stores records and next (per partition, the offset after the
	// last record of that partition written) in one store transaction.
	// sluice never hands it a record below the stored next offset.
	Write(ctx context.Context, sink, topic string, records []Record[K, V], next map[int32]int64) error
}
