package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/window"
)

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// KeyValue is a key and a value, the element type of FlatMap.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// Stream is a record stream with keys of type K and values of type V.
type Stream[K, V any] struct {
	t *Topology
	n *exec.Node
	// keyChanged marks a stream whose key was (possibly) changed since it
	// was read or last repartitioned: a stateful operator downstream must
	// repartition it first.
	keyChanged bool
	// through, on a stream read back from a repartition topic, is the
	// sink that writes the topic.
	through *exec.Node
	ks      serde.Serde[K]
	vs      serde.Serde[V]
}

// SourceOption configures a source: TimestampFrom, ProcessingTime,
// Watermarks, SourceName, DeadLetter, SourceOnError.
type SourceOption interface {
	applySource(*sourceConfig)
}

// sourceOpt is a SourceOption.
type sourceOpt func(*sourceConfig)

func (o sourceOpt) applySource(c *sourceConfig) { o(c) }

type sourceConfig struct {
	name       string
	deadLetter string
	onError    ErrorHandler
	time       exec.TimestampKind
	extract    any // func(K, V, int64) int64, checked by From
	watermark  window.Strategy
}

// TimestampFrom takes each record's event time from its payload: fn gets
// the decoded key and value and the record's own timestamp, and returns
// milliseconds since the epoch. K and V must be the source's types (Build
// reports a mismatch). A result that is negative or past the year 9999,
// or a panic in fn, is a deserialization error, handled by the policy.
// Default: the record's timestamp, which is its create time or, for a topic
// with message.timestamp.type=LogAppendTime, its log-append (ingestion)
// time.
func TimestampFrom[K, V any](fn func(k K, v V, recordTs int64) int64) SourceOption {
	return sourceOpt(func(c *sourceConfig) { c.time, c.extract = exec.PayloadTime, fn })
}

// ProcessingTime makes the wall clock, when the task reads a record, its
// event time. Results then depend on when records are processed, not on the
// records: a replay decides differently (invariant 5 is the user's to give
// up here).
func ProcessingTime() SourceOption {
	return sourceOpt(func(c *sourceConfig) { c.time = exec.ProcessingTime })
}

// Watermarks sets how the source's watermark follows the event time of its
// records, per input partition: window.BoundedOutOfOrderness(d),
// window.Monotonous() or window.PerRecord(fn). Default: window.Monotonous(),
// under which a record older than the newest one seen on its partition may
// be late; grace for out-of-order records is always an explicit choice. A
// task's watermark is the minimum over its input partitions.
func Watermarks(s window.Strategy) SourceOption {
	return sourceOpt(func(c *sourceConfig) { c.watermark = s })
}

// SourceName names the source node (default: generated).
func SourceName(name string) SourceOption {
	return sourceOpt(func(c *sourceConfig) { c.name = name })
}

// DeadLetter names the dead-letter topic of the records this source reads
// (default: the application's, <application.id>-dlq). A dead-lettered record
// keeps its key and value bytes and gets its origin in headers
// (sluice.source.topic, .partition, .offset, .timestamp, sluice.error.class,
// sluice.error.message), inside the same transaction as everything else.
// Records that fail to decode are dead-lettered unless a handler says
// otherwise.
func DeadLetter(topic string) SourceOption {
	return sourceOpt(func(c *sourceConfig) { c.deadLetter = topic })
}

// From reads topic, decoding keys with ks and values with vs.
func From[K, V any](t *Topology, topic string, ks serde.Serde[K], vs serde.Serde[V], opts ...SourceOption) Stream[K, V] {
	if ks == nil || vs == nil {
		t.errorf(ErrMissingSerde, "source %q needs a key and a value serde", topic)
	}
	n := source[K, V](t, topic, ops.Decoder(ks, vs), opts)
	if n.Time != exec.PayloadTime && ks != nil && vs != nil {
		// The timestamp does not need the decoded record, so decoding
		// can start a typed chain.
		n.Typed = ops.SourceTyped(n, ks, vs)
	}
	return Stream[K, V]{t: t, n: n, ks: ks, vs: vs}
}

// source adds the source node of topic, for a stream or a table.
func source[K, V any](t *Topology, topic string, decode func(k, v []byte) (any, any, error), opts []SourceOption) *exec.Node {
	var cfg sourceConfig
	for _, o := range opts {
		o.applySource(&cfg)
	}
	if topic == "" {
		t.errorf(ErrMissingName, "a source needs a topic")
	}
	if t.topics[topic] {
		t.errorf(ErrDuplicateTopic, "topic %q is read by two sources; read it once and reuse the stream", topic)
	}
	t.topics[topic] = true
	n := t.add(&exec.Node{
		Name:       t.name(cfg.name, "SOURCE"),
		Kind:       exec.KindSource,
		Topics:     []string{topic},
		DeadLetter: cfg.deadLetter,
		OnError:    cfg.onError.toExec(),
		Decode:     decode,
		Time:       cfg.time,
	})
	if cfg.watermark != nil {
		if err := cfg.watermark.Validate(); err != nil {
			t.errorf(ErrInvalidWindow, "source %q: %v", topic, err)
		}
		n.Watermark = cfg.watermark
	}
	if cfg.time == exec.PayloadTime {
		fn, ok := cfg.extract.(func(K, V, int64) int64)
		switch {
		case !ok:
			t.errorf(ErrTypeMismatch, "source %q: TimestampFrom's function takes %T, not the source's key and value types", topic, cfg.extract)
		case fn == nil:
			t.errorf(ErrNilFunction, "source %q: TimestampFrom needs a function", topic)
		default:
			n.Extract = ops.PayloadTime(fn)
		}
	}
	return n
}

// stateless adds the node of the stateless operator op after s.
func stateless[K, V, K2, V2 any](s Stream[K, V], kind string, keyChanged bool, ks serde.Serde[K2], vs serde.Serde[V2], op ops.Stateless[K, V, K2, V2]) Stream[K2, V2] {
	n := s.t.add(&exec.Node{Name: s.t.name("", kind), Kind: exec.KindProcessor, New: op.New()}, s.n)
	n.Typed = op.Typed(n)
	return Stream[K2, V2]{t: s.t, n: n, keyChanged: keyChanged, ks: ks, vs: vs}
}

// Map changes key and value; downstream stateful operators repartition.
func Map[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) (K2, V2)) Stream[K2, V2] {
	if fn == nil {
		s.t.errorf(ErrNilFunction, "Map needs a function")
	}
	return stateless(s, "MAP", true, nil, nil, ops.Map(fn))
}

// MapValues changes the value only: no repartition is needed downstream.
func MapValues[K, V, V2 any](s Stream[K, V], fn func(V) V2) Stream[K, V2] {
	if fn == nil {
		s.t.errorf(ErrNilFunction, "MapValues needs a function")
	}
	return stateless(s, "MAPVALUES", s.keyChanged, s.ks, nil, ops.MapValues[K](fn))
}

// FlatMap turns each record into zero or more records with new keys.
func FlatMap[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) []KeyValue[K2, V2]) Stream[K2, V2] {
	if fn == nil {
		s.t.errorf(ErrNilFunction, "FlatMap needs a function")
	}
	return stateless(s, "FLATMAP", true, nil, nil, ops.FlatMap(fn))
}

// FlatMapValues turns each value into zero or more values with the same key.
func FlatMapValues[K, V, V2 any](s Stream[K, V], fn func(V) []V2) Stream[K, V2] {
	if fn == nil {
		s.t.errorf(ErrNilFunction, "FlatMapValues needs a function")
	}
	return stateless(s, "FLATMAPVALUES", s.keyChanged, s.ks, nil, ops.FlatMapValues[K](fn))
}

// Filter keeps the records for which pred is true.
func Filter[K, V any](s Stream[K, V], pred func(K, V) bool) Stream[K, V] {
	if pred == nil {
		s.t.errorf(ErrNilFunction, "Filter needs a predicate")
	}
	return stateless(s, "FILTER", s.keyChanged, s.ks, s.vs, ops.Filter(pred))
}

// FilterNot drops the records for which pred is true.
func FilterNot[K, V any](s Stream[K, V], pred func(K, V) bool) Stream[K, V] {
	if pred == nil {
		s.t.errorf(ErrNilFunction, "FilterNot needs a predicate")
		return Filter(s, nil)
	}
	return Filter(s, func(k K, v V) bool { return !pred(k, v) })
}

// SelectKey sets a new key computed from the record; downstream stateful
// operators repartition.
func SelectKey[K, V, K2 any](s Stream[K, V], fn func(K, V) K2) Stream[K2, V] {
	if fn == nil {
		s.t.errorf(ErrNilFunction, "SelectKey needs a function")
	}
	return stateless(s, "SELECTKEY", true, nil, s.vs, ops.SelectKey(fn))
}

// Peek calls fn for each record and passes it on unchanged.
func Peek[K, V any](s Stream[K, V], fn func(K, V)) Stream[K, V] {
	if fn == nil {
		s.t.errorf(ErrNilFunction, "Peek needs a function")
	}
	return stateless(s, "PEEK", s.keyChanged, s.ks, s.vs, ops.Peek(fn))
}

// Merge interleaves two streams of the same types into one.
func Merge[K, V any](a, b Stream[K, V]) Stream[K, V] {
	if a.t != b.t {
		a.t.errorf(ErrForeignHandle, "Merge of streams from two topologies")
	}
	n := a.t.add(&exec.Node{Name: a.t.name("", "MERGE"), Kind: exec.KindProcessor, New: ops.NewFn(ops.Pass)}, a.n, b.n)
	ks, vs := a.ks, a.vs
	if ks == nil {
		ks = b.ks
	}
	if vs == nil {
		vs = b.vs
	}
	return Stream[K, V]{t: a.t, n: n, keyChanged: a.keyChanged || b.keyChanged, ks: ks, vs: vs}
}

// Branch splits s by predicates: a record goes to the branch of the first
// predicate it matches, and is dropped if it matches none (end with an
// always-true predicate for a default branch).
//
// Deprecated: use Split, whose rest gets the records that Branch drops
// (Kafka Streams deprecated branch for split too).
func Branch[K, V any](s Stream[K, V], preds ...func(K, V) bool) []Stream[K, V] {
	return branch(s, preds...)
}

// branch is Branch, which Split builds on.
func branch[K, V any](s Stream[K, V], preds ...func(K, V) bool) []Stream[K, V] {
	for i, p := range preds {
		if p == nil {
			s.t.errorf(ErrNilFunction, "Branch predicate %d is nil", i)
		}
	}
	names := make([]string, len(preds))
	split := s.t.add(&exec.Node{Name: s.t.name("", "BRANCH"), Kind: exec.KindProcessor, New: ops.NewFn(ops.Branch(preds, names))}, s.n)
	out := make([]Stream[K, V], len(preds))
	for i := range preds {
		out[i] = stateless(Stream[K, V]{t: s.t, n: split}, "BRANCH-CHILD", s.keyChanged, s.ks, s.vs, ops.BranchChild[K, V]())
		names[i] = out[i].n.Name
		out[i].keyChanged = s.keyChanged
	}
	return out
}

// Split splits s by predicates (Kafka Streams' split): branches[i] gets the
// records whose first matching predicate is preds[i], and rest gets those
// matching none; leave rest unused to drop them.
func Split[K, V any](s Stream[K, V], preds ...func(K, V) bool) (branches []Stream[K, V], rest Stream[K, V]) {
	all := branch(s, append(preds[:len(preds):len(preds)], func(K, V) bool { return true })...)
	return all[:len(preds)], all[len(preds)]
}

// To writes the stream to topic, partitioned by the key bytes with Kafka's
// default (murmur2) partitioner; records without a key go to one partition
// after another, 16 KiB to each, as Kafka's uniform sticky partitioner
// sends them.
func To[K, V any](s Stream[K, V], topic string, ks serde.Serde[K], vs serde.Serde[V], opts ...SinkOption) {
	if topic == "" {
		s.t.errorf(ErrMissingName, "To needs a topic")
	}
	if ks == nil || vs == nil {
		s.t.errorf(ErrMissingSerde, "To(%q) needs a key and a value serde", topic)
		return
	}
	n := s.t.add(&exec.Node{Name: s.t.name("", "SINK"), Kind: exec.KindSink, Topics: []string{topic}, Encode: ops.Encoder(ks, vs)}, s.n)
	n.Typed = ops.SinkTyped(n, ks, vs)
	for _, o := range opts {
		o.applySink(n)
	}
}

// Repartition writes the stream through the internal topic
// <application.id>-<name>-repartition, so that records with equal keys meet
// in one task; the topic gets as many partitions as the sub-topology
// writing it has tasks.
func Repartition[K, V any](s Stream[K, V], name string, ks serde.Serde[K], vs serde.Serde[V]) Stream[K, V] {
	return repartition(s, name, ks, vs)
}

func repartition[K, V any](s Stream[K, V], name string, ks serde.Serde[K], vs serde.Serde[V]) Stream[K, V] {
	if name == "" {
		s.t.errorf(ErrMissingName, "a repartition topic must be named")
	} else if err := validTopicPart(name); err != nil {
		s.t.errorf(ErrInvalidTopicName, "repartition %q: %v", name, err)
	}
	if ks == nil || vs == nil {
		s.t.errorf(ErrMissingSerde, "repartition %q needs a key and a value serde", name)
		return s
	}
	topic := names.Repartition(name)
	sink := s.t.add(&exec.Node{Name: s.t.name(name+"-repartition-sink", "SINK"), Kind: exec.KindSink, Topics: []string{topic}, Internal: true, Encode: ops.Encoder(ks, vs)}, s.n)
	sink.Typed = ops.SinkTyped(sink, ks, vs)
	src := s.t.add(&exec.Node{Name: s.t.name(name+"-repartition-source", "SOURCE"), Kind: exec.KindSource, Topics: []string{topic}, Internal: true, Decode: ops.TombstoneDecoder(ks, vs)})
	// Its records start a typed chain, but for deletes (no value), which
	// the task sends down the erased path.
	src.Typed = ops.SourceTyped(src, ks, vs)
	return Stream[K, V]{t: s.t, n: src, through: sink, ks: ks, vs: vs}
}
