package exec

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a record inside a task: key and value decoded, timestamp in
// milliseconds since the epoch.
type Record struct {
	Key       any
	Value     any
	Timestamp int64
	Headers   []Header
}

// Change is the value a table node forwards: the key's value before and
// after an update. nil means absent: Old is nil for an insert, New for a
// delete.
type Change struct {
	Old, New any
}

// ChangeOf is a Change with the type of its values kept: what typed chains
// carry from a table node. HasOld and HasNew say whether each side is
// present.
type ChangeOf[V any] struct {
	Old, New       V
	HasOld, HasNew bool
}

// Erase returns c as a Change.
func (c ChangeOf[V]) Erase() Change {
	var ch Change
	if c.HasOld {
		ch.Old = c.Old
	}
	if c.HasNew {
		ch.New = c.New
	}
	return ch
}

// tombstone is the type of Tombstone.
type tombstone struct{}

// Tombstone is the value of a stream record that deletes its key (a Kafka
// null): what a table's deletes become in its stream, and what a table
// source reads from a null value.
var Tombstone any = tombstone{}

// Processor is one operator instance inside one task. It is called from the
// task's goroutine only.
type Processor interface {
	Init(ctx Context) error
	Process(r Record) error
	Close() error
}

// PunctuationType says which clock drives a punctuation.
type PunctuationType int

const (
	// StreamTime punctuations fire as the task's stream time (the largest
	// record timestamp seen) advances: deterministic under replay.
	StreamTime PunctuationType = iota
	// WallClockTime punctuations fire on the system clock, checked between
	// polls.
	WallClockTime
)

// Context is what a Processor sees of its task.
type Context interface {
	// Forward passes r to every child of the node.
	Forward(r Record) error
	// ForwardTo passes r to the named child only.
	ForwardTo(child string, r Record) error
	// ForwardTyped runs send, which passes one record of the node's,
	// stamped ts and without headers, to the typed chain its output was
	// linked to (Typed): as Forward runs a forward, so inside a listener
	// as a unit of its own. While send runs, the task's Frame holds ts and
	// no headers; once send succeeds, the Frame is as it was before.
	// Whichever path brought the node its record, a failure in send is
	// blamed on the node of the chain where it arose.
	ForwardTyped(ts int64, send func() error) error
	// Store returns the named store; the node must have declared it.
	Store(name string) *store.Staged
	// Send produces a record to topic (internal: a repartition topic named
	// without the application id) inside the current transaction,
	// partitioned by the key bytes.
	Send(topic string, internal bool, key, value []byte, headers []Header, ts int64) error
	// RecordMeta is the input record being processed: the coordinates of
	// the record that the current call chain started from. ok is false in
	// a punctuation.
	RecordMeta() (topic string, partition int32, offset int64, ok bool)
	// TaskID names the task, e.g. "1_3" for partition 3 of sub-topology 1.
	TaskID() string
	// Partition is the task's partition.
	Partition() int32
	// StreamTime is the largest record timestamp the task has seen, the
	// record being processed included.
	StreamTime() int64
	// Schedule calls fn every interval of the given clock until cancel.
	Schedule(interval time.Duration, typ PunctuationType, fn func(ts int64) error) (cancel func())
	// Watermark is the event-time watermark (window.NoWatermark until
	// every input has reported): no more records at or below it are
	// expected. While a record is processed it is the watermark the record
	// is judged against: its own input's (see HeaderRecordWatermark), which
	// is never below the task's; in a listener, the task's.
	Watermark() int64
	// Children names the node's children, in the order they were added.
	Children() []string
	// CountLate counts a record that arrived after its windows closed.
	CountLate()
	// CountIgnoredDelete counts a delete (a record without a value) that
	// the node ignores, having no value to add or join, or no value to
	// give a function that would change its key: an aggregation's, a
	// window's, a join's, or a Map's (Kafka Streams' dropped records).
	CountIgnoredDelete()
	// Global returns the named global table: the raw key and value bytes
	// of its topic, replicated to every instance and kept current.
	Global(name string) store.Engine
	// WallClock is the wall-clock time the driver last passed in
	// (milliseconds): processing time, for processing-time triggers.
	WallClock() int64
	// Folding reports whether the node, one with a FoldStore, holds its
	// table's updates back until the task's flush (processor.FoldUpdates):
	// it then writes each with store.Staged.PutHeld instead of forwarding
	// it, and the task hands it the held updates at the flush (Unfolder).
	Folding() bool
}

// Unfolder is implemented by the processors of nodes with a FoldStore: at
// its flush, when folding, the task hands Unfold each key's held update of
// the store (store.Staged.TakeHeld), each in a unit of its own, to forward.
type Unfolder interface {
	Unfold(h store.Held) error
}

// WatermarkListener is implemented by processors that act on event time
// (windows, timers). The task calls OnWatermark, in topological order, after
// every record and each time its watermark advances; what the processor
// forwards from there flows downstream before the next processor's
// OnWatermark runs. It must return at once when nothing is due.
type WatermarkListener interface {
	OnWatermark(wm int64) error
}

// ProcessingTimeListener is implemented by processors with processing-time
// timers or triggers: the task calls OnProcessingTime with the wall clock
// each time the driver passes it in, like a WatermarkListener.
type ProcessingTimeListener interface {
	OnProcessingTime(now int64) error
}

// AbortListener is implemented by processors that keep, across records,
// anything outside their stores: the in-memory lower bounds of their next
// due times (windows, sliding windows, stream joins, timers). The task
// calls OnAbort after an abort has dropped its stage, so that the
// processor returns exactly to the committed state before the aborted
// records are processed again; a bound left where the aborted transaction
// moved it would skip firings in the replay. OnAbort must not touch the
// stores (their stage is gone) and cannot fail: a processor that cannot
// tell its committed bounds forgets them, to find them again from the
// committed stores on its next call.
type AbortListener interface {
	OnAbort()
}

// Holder is implemented by processors that hold writes of the open
// transaction in memory before their stores get them: the windows a
// window runtime opened in it, and the range deletes of the expiry
// entries, or of the windows laid out by start, that came due in it
// (ops.Window). The task treats what they hold as it treats its stages:
//
//   - Mark begins a unit (one record) and Rollback undoes what the unit
//     changed, so that a record skipped after an error leaves nothing held;
//   - Spill, called when the transaction is about to end, before the
//     stores' Flush, writes everything held to the stores and holds
//     nothing after (a Commit with anything held fails);
//   - Held estimates the bytes held, counted with the stages' in the
//     memory budget;
//   - Drop, at an abort, forgets everything held.
type Holder interface {
	Mark()
	Rollback()
	Spill() error
	Held() int
	Drop()
}

// Source timestamp kinds.
type TimestampKind int

const (
	// RecordTime uses the record's timestamp: its create time, or the
	// log-append time when the topic is configured with
	// message.timestamp.type=LogAppendTime (ingestion time).
	RecordTime TimestampKind = iota
	// PayloadTime extracts the timestamp from the decoded record
	// (Node.Extract).
	PayloadTime
	// ProcessingTime uses the wall clock when the task reads the record.
	ProcessingTime
)

// Kind is the kind of a node.
type Kind int

const (
	KindSource Kind = iota
	KindProcessor
	KindSink
)

// Node is one vertex of the plan. Nodes are created by the DSL and are
// immutable once a Plan is built.
type Node struct {
	Name     string
	Kind     Kind
	Children []*Node
	Parents  []*Node

	// Source and sink: the topic(s); Internal topics are named without the
	// application id, which the runtime prefixes.
	Topics   []string
	Internal bool

	// Source: Decode turns raw bytes into the typed key and value. A nil
	// key or value (Kafka null) is passed to Decode as nil.
	Decode func(key, value []byte) (k, v any, err error)
	// Source: Table marks a topic read as a table: it does not hold the
	// task's watermark back (a table's updates are state, not a stream of
	// events: Flink's versioned tables, Kafka Streams' KTables).
	Table bool
	// Processor: Globals names the global tables the processor reads.
	Globals []string
	// Source: where event time comes from, and how the source's
	// watermark follows it (nil: window.Monotonous()).
	Time      TimestampKind
	Extract   func(k, v any, recordTs int64) int64
	Watermark window.Strategy
	// Source: DeadLetter names the dead-letter topic of records read by
	// this source (default: the application's, <application.id>-dlq).
	DeadLetter string

	// Processor: New makes the operator instance for one task.
	New func() Processor
	// Stores names the stores the processor uses.
	Stores []string

	// Processor: FoldStore, if set, marks a node whose forwards are the
	// updates of a table (exec.Change values) that the task may have it
	// hold back and forward at its flush, one per key (Kafka Streams'
	// record cache; Context.Folding). It names the store that holds them:
	// the one the node keeps the table in.
	FoldStore string

	// Sink: Encode turns key and value into bytes, carved from a where
	// the serdes can append.
	Encode func(a *Arena, k, v any) (key, value []byte, err error)
	// Sink: Combine marks the repartition sink of a count (topology.Count
	// after a key change). When the task folds updates, it combines the
	// sink's records by key within a transaction and writes, at the flush,
	// one record per key that stands for all of them (HeaderCount): the
	// local half of Flink's local-global aggregation, Spark's map-side
	// combine.
	Combine bool

	// OnError overrides the application's error handler for errors that
	// arise in this node; nil keeps the application's.
	OnError ErrorHandler

	// Typed, if set, lets the node take part in a typed chain (chain.go):
	// the same operator as New, Decode or Encode, without the erasure.
	Typed *Typed

	// External sinks (external.go). Processor: TwoPhase marks the buffer
	// of a two-phase sink. Sink: Offsets marks the sink of an
	// offsets-mode sink, and TaskPartition sends each record to the
	// task's own partition of the topic, with no watermark in or beside
	// it (the topic is read by the sink's writer, not by a task).
	TwoPhase      *TwoPhase
	Offsets       *OffsetsSink
	TaskPartition bool
}

// Store describes a store the plan needs.
type Store struct {
	Name string
	// InMemory stores keep no local checkpoint: they restore from the
	// whole changelog on every open.
	InMemory bool
	// NewEngine, if set, makes the engine of an InMemory store in place
	// of a store.Memory: one laid out for its operator (a stream join's,
	// ops.JoinMemory).
	NewEngine func() store.Engine
	// Packing, if set, sends the writes of the keys it groups in packs
	// of many (store.WithPacking): a stream join's records, by segment.
	Packing *store.Packing
	// Cache folds repeated updates of a key within a commit into one
	// changelog record.
	Cache bool
	// Windowed stores (window, session and timer stores) have keys laid
	// out by sluice and remove their entries as time passes; with a
	// Retention their changelogs are compact,delete, retained that long.
	// The first of a sub-topology's windowed stores also holds the task's
	// time state under layout.TimeStateKey, so that it commits with everything
	// else.
	Windowed  bool
	Retention time.Duration
	// TimeState marks a store sluice added to hold only the task's time
	// state, for a sub-topology with no windowed store whose watermark
	// must still survive a restart (it writes repartition topics in a plan
	// that uses event time; topology.TimeStoreSuffix).
	TimeState bool
	// Source, for a table read from a topic, names that topic: it is the
	// store's changelog (no second copy), restored up to the application's
	// committed offset. SourceAccepts says which of its records the table
	// took (those that decode).
	Source        string
	SourceAccepts func(key, value []byte) bool
	// KeySerde and ValueSerde are the identities (serde.ID) of the serdes
	// of the store's keys and values, as savepoints record them; "" where
	// the store's bytes are sluice's own (timers, time state).
	KeySerde, ValueSerde string
	// Layout is the store's byte layout (internal/layout's StoreKind),
	// set by the DSL where it declares the store; "" where the DSL did not
	// say (see StoreLayout). Savepoints record it, and a start from a
	// savepoint refuses a store whose layout changed.
	Layout layout.StoreKind
	// Query, if set, lets interactive queries read the store from outside
	// its task, with its serdes erased; nil: its layout is private
	// (timers, keyed state, join buffers) and it cannot be queried.
	Query *StoreQuery
}

// StoreQuery is a store's erased read side for interactive queries. The
// typed DSL fills it in where the store is declared, so the runtime can turn
// a key's text into bytes and stored bytes into values without knowing the
// types.
type StoreQuery struct {
	// KeyFromText encodes a key given as text: the text itself for string
	// and []byte keys, the JSON of the key for any other key type.
	KeyFromText func(text string) ([]byte, error)
	// Key and Value decode stored bytes (Value: of a key-value store).
	Key, Value func([]byte) (any, error)
	// Windows, set for window and session stores, calls fn for each
	// window of the encoded key held by s, oldest first.
	Windows func(s *store.Staged, key []byte, fn func(start, end int64, value any) error) error
}

// SubTopology is a connected part of the plan: the unit of a task.
type SubTopology struct {
	ID      int
	Sources []*Node // in creation order
	Nodes   []*Node // all nodes, in creation order
	Stores  []string
	// TimeStore is the store holding the task's time state: the first
	// windowed store by name, or else, where the sub-topology writes
	// repartition topics in a plan that uses event time, a store of its
	// own (Store.TimeState); "" otherwise (its time is then not
	// persisted: nothing it decides depends on it).
	TimeStore string
}

// UsesEventTime reports whether any sub-topology has windowed state
// (windows, joins, timers): only then do watermarks need to travel through
// repartition topics.
func (p *Plan) UsesEventTime() bool {
	for _, s := range p.Subs {
		if s.TimeStore != "" && !p.Stores[s.TimeStore].TimeState {
			return true
		}
	}
	return false
}

// SourceTopics lists the topics the sub-topology reads, with whether each
// is internal.
func (s *SubTopology) SourceTopics() (topics []string, internal []bool) {
	for _, n := range s.Sources {
		for _, t := range n.Topics {
			topics = append(topics, t)
			internal = append(internal, n.Internal)
		}
	}
	return topics, internal
}

// Global is a global table: all partitions of Topic, replicated to every
// instance, stored as the topic's raw key and value bytes (a null value
// deletes).
type Global struct {
	Name  string
	Topic string
}

// Plan is a built topology.
type Plan struct {
	Subs    []*SubTopology
	Globals []*Global
	Stores  map[string]*Store
	// StoreSub maps a store name to the sub-topology that owns it.
	StoreSub map[string]int
	// Migrations are the store migrations the topology registered
	// (topology.MigrateStore), by store name: a start from a savepoint
	// passes every entry of the store's copy through its migration before
	// it seeds the store's changelog.
	Migrations map[string]*Migration
}

// Migration rewrites a store's entries as they come out of a savepoint:
// Fn gets each entry's raw key and value and returns the entry the new
// store holds; a nil newKey drops the entry. Fn must be deterministic: a
// start calls it twice per entry, once to check every entry before
// anything is written and once to seed (and every replica that seeds
// calls it again).
type Migration struct {
	Fn func(key, old []byte) (newKey, newValue []byte, err error)
	// KeyValue marks a typed migration, which decodes entries with a
	// key-value store's serdes: it applies to layout.KindKV stores only.
	KeyValue bool
}

// StoreLayout is s's layout: s.Layout where the DSL set it, else what
// the store's query hooks and flags tell (the time store, key-value and
// window stores); "" when nothing tells.
func StoreLayout(s *Store) layout.StoreKind {
	switch {
	case s.Layout != "":
		return s.Layout
	case s.TimeState:
		return layout.KindTime
	case s.Query != nil && s.Query.Windows != nil:
		return layout.KindWindow
	case s.Query != nil:
		return layout.KindKV
	}
	return ""
}

// Headers that the runtime writes on dead-letter records.
const (
	HeaderSourceTopic     = "sluice.source.topic"
	HeaderSourcePartition = "sluice.source.partition"
	HeaderSourceOffset    = "sluice.source.offset"
	HeaderSourceTimestamp = "sluice.source.timestamp"
	HeaderErrorClass      = "sluice.error.class"
	HeaderErrorMessage    = "sluice.error.message"
	// HeaderWatermark marks a watermark record on a repartition topic: no
	// key, the value is the writer's watermark (8 bytes, big-endian) and a
	// flags byte (bit 0: the writer is idle); the header's value is the
	// writer's partition (decimal). Readers take it out of the stream.
	HeaderWatermark = "sluice.watermark"
	// HeaderRecordWatermark carries, on a record of a repartition topic,
	// the watermark it is judged against (8 bytes, big-endian): the one
	// of the task that read it from a user topic. Readers take it off.
	HeaderRecordWatermark = "sluice.wm"
	// HeaderCount carries, on a record of a count's repartition topic, the
	// number of records it stands for (8 bytes, big-endian, at least 1):
	// a combining sink (Node.Combine) wrote it for that many records with
	// its key. A record without it stands for itself. The count takes it
	// off (Weight).
	HeaderCount = "sluice.count"
)

// Weight is the number of records a record with headers hs stands for:
// the value of its HeaderCount, or 1 without one. rest is hs without the
// header, so that it goes no further than the count.
func Weight(hs []Header) (w int64, rest []Header, err error) {
	for _, h := range hs {
		if h.Key != HeaderCount {
			continue
		}
		if len(h.Value) != 8 {
			return 0, nil, fmt.Errorf("header %s: %d bytes, want 8", HeaderCount, len(h.Value))
		}
		if w = int64(binary.BigEndian.Uint64(h.Value)); w < 1 {
			return 0, nil, fmt.Errorf("header %s: %d records, want at least 1", HeaderCount, w)
		}
		return w, WithoutWeight(hs), nil
	}
	return 1, hs, nil
}

// WithoutWeight is hs without any HeaderCount: what a count's repartition
// sink writes of a record's headers, so that a header of that name that
// came with the input is not taken for the sink's.
func WithoutWeight(hs []Header) []Header {
	for i, h := range hs {
		if h.Key == HeaderCount {
			rest := append(make([]Header, 0, len(hs)-1), hs[:i]...)
			for _, h := range hs[i+1:] {
				if h.Key != HeaderCount {
					rest = append(rest, h)
				}
			}
			return rest
		}
	}
	return hs
}

// ErrInvalidTimestamp is the cause of a deserialization error for a record
// whose timestamp is negative or past the year 9999. It matches
// topology.ErrInvalidTimestamp.
var ErrInvalidTimestamp = &Sentinel{msg: "processor: invalid record timestamp"}

// ErrRecordTooLarge is the cause of a production error for an output record
// over the maximum record size (processor.MaxRecordBytes). It matches
// topology.ErrRecordTooLarge.
var ErrRecordTooLarge = &Sentinel{msg: "processor: record too large"}

// ErrorClass says where a record failed.
type ErrorClass string

const (
	// Deserialization: a source could not decode the record's bytes.
	Deserialization ErrorClass = "deserialization"
	// Processing: user code returned an error or panicked.
	Processing ErrorClass = "processing"
	// Production: a sink could not encode or produce a record.
	Production ErrorClass = "production"
)

// Action is what the runtime does with a record that failed.
type Action int

const (
	// Fail stops the instance without committing the record, which is
	// processed again after a restart (after the fix).
	Fail Action = iota
	// Continue skips the record: its effects are rolled back, it is
	// logged and counted, and processing goes on.
	Continue
	// DeadLetter writes the original record to the dead-letter topic, with
	// its origin and the error in headers, in the same transaction, then
	// goes on like Continue.
	DeadLetter
)

func (a Action) String() string {
	switch a {
	case Fail:
		return "fail"
	case Continue:
		return "continue"
	case DeadLetter:
		return "dead-letter"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// ErrorContext describes a failed record to an ErrorHandler.
type ErrorContext struct {
	Class ErrorClass
	// Node is the source, operator or sink where the error arose.
	Node string
	// The input record's coordinates.
	Topic     string
	Partition int32
	Offset    int64
	Timestamp int64
	Err       error
}

// ErrorHandler decides what to do with a failed record.
type ErrorHandler func(ErrorContext) Action
