package exec

import "context"

// External sinks (DESIGN.md, invariant 7): what topology's ToParticipant
// and ToIdempotent hand the runtime, with the user's types erased. The
// task core only buffers (Pending); the driver does the I/O around the
// commit.

// TwoPhase describes a two-phase sink (sink.Participant): set on the node
// of its buffer, a processor whose instances implement Pending.
type TwoPhase struct {
	// Name is the sink's name, as the user gave it.
	Name string
	// Store is the sink's internal store (changelog'd): it records, per
	// task, the id of the external transaction prepared for the Kafka
	// transaction that wrote it (XIDKey).
	Store string
	// The participant, its batches erased (Pending.Take's).
	Prepare          func(ctx context.Context, xid string, batch any) error
	CommitPrepared   func(ctx context.Context, xid string) error
	RollbackPrepared func(ctx context.Context, xid string) error
	Prepared         func(ctx context.Context, prefix string) ([]string, error)
	// Reject removes record i from a batch (Pending.Take's, changed in
	// place) after the participant refused it (sink.Rejected), and
	// returns the input record it derives from, for the dead letter.
	Reject func(batch any, i int) (in Input, ok bool)
	// Ping is the participant's sink.Pinger, or nil.
	Ping func(ctx context.Context) error
}

// Input is an input record as the task read it: what a dead letter holds
// when a record derived from it is refused by an external store after the
// task processed it (a two-phase sink's Prepare).
type Input struct {
	Key, Value []byte
	Headers    []Header
	Timestamp  int64
	Topic      string
	Partition  int32
	Offset     int64
}

// InputReader is implemented by the task's Context: the input record the
// current call chain started from; ok is false in a punctuation.
type InputReader interface {
	Input() (in Input, ok bool)
}

// XIDKey is the key under which a two-phase sink's store holds the task's
// last prepared transaction id.
var XIDKey = []byte("xid")

// Pending is implemented by the processor of a two-phase sink's node: it
// holds the records the sink received in the open transaction outside the
// stores. Records are held per unit like store writes: the task calls
// Mark when a unit begins and Rollback when it fails, so that a record
// skipped after an error leaves nothing held.
type Pending interface {
	Mark()
	Rollback()
	// Take hands over what is held (a typed batch, as any) and how many
	// records it has, and holds nothing after.
	Take() (batch any, n int)
	// Drop forgets what is held: the transaction aborted.
	Drop()
}

// RawRecord is a record of an offsets-mode sink's topic as the writer
// read it.
type RawRecord struct {
	Key, Value []byte
	Timestamp  int64
	Topic      string
	Partition  int32
	Offset     int64
}

// OffsetsSink describes an offsets-mode sink (sink.Idempotent): set on its
// sink node, which writes to the internal topic Topic (named without the
// application id) to the task's own partition (Node.TaskPartition). After
// a transaction commits, a writer on the instance that owns the task reads
// the partition read_committed and hands the store what it has not yet.
type OffsetsSink struct {
	// Name is the sink's name, as the user gave it.
	Name string
	// Offsets is the store's Offsets for the sink and the runtime topic.
	Offsets func(ctx context.Context, topic string) (map[int32]int64, error)
	// Write decodes recs and writes them with next (the store's Write).
	Write func(ctx context.Context, topic string, recs []RawRecord, next map[int32]int64) error
	// Ping is the store's sink.Pinger, or nil.
	Ping func(ctx context.Context) error
}
