package topologytest

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
)

// ErrUnknownTopic is returned for a topic that no source reads.
var ErrUnknownTopic = errors.New("topologytest: no source reads the topic")

// Option configures a Driver.
type Option func(*Driver)

// ApplicationID sets the application id that prefixes internal topics
// (default "test").
//
// Deprecated: use Processor(processor.ApplicationID(id)).
func ApplicationID(id string) Option { return func(d *Driver) { d.appID = id } }

// WallClock sets the driver's initial wall-clock time (default: the time New
// is called).
func WallClock(t time.Time) Option { return func(d *Driver) { d.wall = t.UnixMilli() } }

// OnError sets the application's handler for one class of errors, as
// processor.OnError does.
//
// Deprecated: use Processor(processor.OnError(class, h)).
func OnError(class topology.ErrorClass, h topology.ErrorHandler) Option {
	return func(d *Driver) {
		if d.errors == nil {
			d.errors = map[exec.ErrorClass]exec.ErrorHandler{}
		}
		d.errors[exec.ErrorClass(class)] = exec.HandlerOf(h)
	}
}

// MaxRecordBytes bounds produced records, as processor.MaxRecordBytes does.
//
// Deprecated: use Processor(processor.MaxRecordBytes(n)).
func MaxRecordBytes(n int) Option { return func(d *Driver) { d.maxRecordBytes = n } }

// IdleTimeout excludes an input from the watermark after it had no records
// for d of the driver's wall clock, as processor.IdleTimeout does.
//
// Deprecated: use Processor(processor.IdleTimeout(d)).
func IdleTimeout(d time.Duration) Option { return func(d2 *Driver) { d2.idleTimeout = d } }

// DeadLetterTopic sets the application's dead-letter topic, as
// processor.DeadLetterTopic does (default <application id>-dlq).
//
// Deprecated: use Processor(processor.DeadLetterTopic(topic)).
func DeadLetterTopic(topic string) Option { return func(d *Driver) { d.deadLetter = topic } }

// Driver runs a topology without Kafka. It is not safe for concurrent use.
type Driver struct {
	appID    string
	dir      string
	wall     int64
	tasks    []*task.Task
	bySource map[string]*task.Task
	byStore  map[string]*task.Task
	offsets  map[string]int64
	outputs  map[string][]*kgo.Record
	queue    []*kgo.Record // records sent to internal topics, not yet processed
	// globals are the global tables: topic → the engines it feeds.
	globals     map[string][]store.Engine
	globalNames map[string]store.Engine
	errors      map[exec.ErrorClass]exec.ErrorHandler

	maxRecordBytes int
	deadLetter     string
	idleTimeout    time.Duration
	ab             *aborter // AbortTransactions
	optErr         error    // a processor option the driver cannot apply (Processor)

	x extra // metamorphic.go's options
}

// New builds t and opens one task per sub-topology.
func New(t *topology.Topology, opts ...Option) (*Driver, error) {
	built, err := t.Build()
	if err != nil {
		return nil, err
	}
	d := &Driver{
		appID: "test", wall: time.Now().UnixMilli(),
		bySource: map[string]*task.Task{}, byStore: map[string]*task.Task{},
		offsets: map[string]int64{}, outputs: map[string][]*kgo.Record{},
		x: extra{commitEvery: 1},
	}
	for _, o := range append(defaultOptions[:len(defaultOptions):len(defaultOptions)], opts...) {
		o(d)
	}
	if d.optErr != nil {
		return nil, d.optErr
	}
	if d.ab != nil && (d.x.commitEvery != 1 || d.x.rng != nil) {
		return nil, errors.New("topologytest: AbortTransactions combines with neither CommitEvery nor ShuffleInternal: it chooses the transactions itself")
	}
	d.x.init()
	if d.deadLetter == "" {
		d.deadLetter = names.DeadLetter(d.appID)
	}
	if d.dir, err = os.MkdirTemp("", "sluice-topologytest-"); err != nil {
		return nil, err
	}
	plan := exec.BuiltPlan(built)
	d.globals, d.globalNames = map[string][]store.Engine{}, map[string]store.Engine{}
	for _, g := range plan.Globals {
		e := store.NewMemory()
		d.globals[g.Topic] = append(d.globals[g.Topic], e)
		d.globalNames[g.Name] = e
	}
	widths := d.x.internalPartitions(d.appID, plan)
	for _, slot := range d.x.slots(plan) {
		sub := slot.sub
		tk, err := task.New(task.ID{Sub: sub.ID, Partition: slot.p}, sub, plan, task.Config{
			AppID: d.appID, StateDir: d.dir, Send: d.sender(len(d.tasks)),
			Errors: d.errors, DeadLetter: d.deadLetter, MaxRecordBytes: d.maxRecordBytes,
			IdleTimeout: d.idleTimeout, Globals: d.globalNames,
			FoldUpdates: d.x.fold, InternalPartitions: widths,
			SkipAbortHooks: d.ab != nil && d.ab.skipHooks,
		})
		if err != nil {
			d.Close()
			return nil, err
		}
		d.tasks = append(d.tasks, tk)
		// Nothing to restore: the driver has no changelogs to read.
		if err := errors.Join(tk.Init(), tk.Transition(task.Running)); err != nil {
			d.Close()
			return nil, err
		}
		// Anchor wall-clock schedules at the initial clock, as the
		// Kafka driver's loop does right after a task opens, and commit
		// the anchors, so that an abort keeps them.
		if err := errors.Join(tk.Tick(d.wall), tk.Commit()); err != nil {
			d.Close()
			return nil, err
		}
		topics, internal := sub.SourceTopics()
		for i, tp := range topics {
			if internal[i] {
				tp = names.Internal(d.appID, tp)
			}
			d.x.byPartition[tp] = append(d.x.byPartition[tp], tk)
			if slot.p == 0 {
				d.bySource[tp] = tk
			}
		}
		for _, s := range sub.Stores {
			if slot.p == 0 {
				d.byStore[s] = tk
			}
		}
	}
	return d, nil
}

// Close closes the tasks and deletes their stores.
func (d *Driver) Close() error {
	errs := []error{d.settle()}
	for _, t := range d.tasks {
		errs = append(errs, t.Close())
	}
	d.tasks = nil
	errs = append(errs, os.RemoveAll(d.dir))
	return errors.Join(errs...)
}

// send is the tasks' Sender: records to internal topics wait to be
// processed, all others are output; each gets the next offset of its topic.
func (d *Driver) send(r *kgo.Record, promise func(*kgo.Record, error)) {
	r.Offset = d.offsets[r.Topic]
	d.offsets[r.Topic]++
	if _, internal := d.bySource[r.Topic]; internal {
		d.queue = append(d.queue, r)
	} else {
		d.outputs[r.Topic] = append(d.outputs[r.Topic], r)
	}
	if promise != nil {
		promise(r, nil)
	}
}

// pipe processes one input record to completion and commits; on an error
// every task aborts, as the record's transaction would.
func (d *Driver) pipe(topic string, key, value []byte, ts int64, headers []topology.Header) error {
	// A global table takes the record at once, as the instance's global
	// consumer would before the next record is processed.
	global := func() error {
		for _, e := range d.globals[topic] {
			if d.ab != nil {
				if err := d.ab.global(e, key); err != nil {
					return err
				}
			}
			if err := e.Apply([]store.Write{{Key: key, Value: value}}, store.NoCheckpoint); err != nil {
				return err
			}
		}
		return nil
	}
	tk := d.taskOf(topic, d.partitionOf(key))
	if tk == nil {
		if len(d.globals[topic]) > 0 {
			if d.ab != nil {
				return d.step(global) // part of the transaction's replay
			}
			return global()
		}
		return fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	r := &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: time.UnixMilli(ts), Offset: d.offsets[topic]}
	d.offsets[topic]++
	for _, h := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	r.Partition = d.partitionOf(key)
	d.x.inputs++
	return d.step(func() error {
		if err := global(); err != nil {
			return err
		}
		return tk.Process(r)
	})
}

// step runs fn, then everything it sent to internal topics, then commits.
// Flushing announces watermarks downstream through the internal topics,
// which are processed before the commit too, so a windowed result that an
// input record makes due is out once Pipe returns.
func (d *Driver) step(fn func() error) error {
	if d.ab != nil {
		return d.ab.step(fn)
	}
	commit, err := d.run(fn)
	if err != nil || !commit {
		return err
	}
	return d.commit()
}

// run runs fn and the internal records that may arrive, and reports
// whether the step ends the transaction; if so it flushes, delivering what
// the flush sent, until nothing more may arrive. On an error every task
// aborts. Under AbortTransactions every step flushes, and the aborter
// decides when to commit.
func (d *Driver) run(fn func() error) (commit bool, err error) {
	d.beginStep()
	err = fn()
	commit = d.ab != nil || d.commitDue()
	for err == nil {
		for err == nil {
			r, ok := d.dequeue()
			if !ok {
				break
			}
			err = d.taskOf(r.Topic, r.Partition).Process(r)
		}
		if !commit {
			break
		}
		for _, t := range d.tasks {
			if err == nil {
				err = t.Flush()
			}
		}
		if !d.deliverable() {
			break
		}
	}
	if err != nil {
		d.abortAll()
		return false, err
	}
	return commit, nil
}

// abortAll aborts the open transaction: every task drops its stage, and
// what the transaction sent is dropped with it.
func (d *Driver) abortAll() {
	d.dropUncommitted()
	for _, t := range d.tasks {
		t.Abort()
	}
}

// commit commits every task.
func (d *Driver) commit() error {
	d.x.inputs = 0
	for _, t := range d.tasks {
		if err := t.Commit(); err != nil {
			return err
		}
	}
	// The next transaction begins.
	d.x.txnAt = d.x.seq
	if d.x.txnOutputs == nil {
		d.x.txnOutputs = map[string]int{}
	}
	for topic, rs := range d.outputs {
		d.x.txnOutputs[topic] = len(rs)
	}
	return nil
}

// AdvanceWallClock moves the wall clock forward by dt and fires the
// wall-clock punctuations that became due, then commits.
func (d *Driver) AdvanceWallClock(dt time.Duration) error {
	d.wall += dt.Milliseconds()
	now := d.wall // the time to run at again after an abort
	d.x.force = d.x.commitEvery > 0
	defer func() { d.x.force = false }()
	return d.step(func() error {
		for _, t := range d.tasks {
			if err := t.Tick(now); err != nil {
				return err
			}
		}
		return nil
	})
}

// InputTopic pipes typed records into a source topic, encoded with the
// given serdes.
type InputTopic[K, V any] struct {
	d     *Driver
	topic string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
}

// NewInputTopic returns a typed handle on topic.
func NewInputTopic[K, V any](d *Driver, topic string, ks serde.Serde[K], vs serde.Serde[V]) *InputTopic[K, V] {
	return &InputTopic[K, V]{d: d, topic: topic, ks: ks, vs: vs}
}

// Pipe encodes key and value and processes the record with timestamp ts
// (milliseconds), then commits. A processing error comes back, with the
// record's effects rolled back.
func (in *InputTopic[K, V]) Pipe(key K, value V, ts int64, headers ...topology.Header) error {
	kb, err := in.ks.Encode(key)
	if err != nil {
		return fmt.Errorf("topologytest: key: %w", err)
	}
	vb, err := in.vs.Encode(value)
	if err != nil {
		return fmt.Errorf("topologytest: value: %w", err)
	}
	return in.d.pipe(in.topic, kb, vb, ts, headers)
}

// PipeBytes processes a record given as raw bytes: the way to feed bytes
// that the topic's serdes would not produce (nil for a Kafka null).
func (in *InputTopic[K, V]) PipeBytes(key, value []byte, ts int64, headers ...topology.Header) error {
	return in.d.pipe(in.topic, key, value, ts, headers)
}

// OutputTopic reads what the topology wrote to a topic, decoded with the
// given serdes.
type OutputTopic[K, V any] struct {
	d     *Driver
	topic string
	ks    serde.Serde[K]
	vs    serde.Serde[V]
	pos   int
}

// NewOutputTopic returns a typed handle on topic.
func NewOutputTopic[K, V any](d *Driver, topic string, ks serde.Serde[K], vs serde.Serde[V]) *OutputTopic[K, V] {
	return &OutputTopic[K, V]{d: d, topic: topic, ks: ks, vs: vs}
}

// ReadRecords returns the records written since the last read, in order.
func (o *OutputTopic[K, V]) ReadRecords() ([]topology.Record[K, V], error) {
	if err := o.d.settle(); err != nil {
		return nil, err
	}
	rs := o.d.outputs[o.topic][o.pos:]
	out := make([]topology.Record[K, V], 0, len(rs))
	for _, r := range rs {
		k, err := o.ks.Decode(r.Key)
		if err != nil {
			return out, fmt.Errorf("topologytest: %s@%d key: %w", o.topic, r.Offset, err)
		}
		rec := topology.Record[K, V]{Key: k, Timestamp: r.Timestamp.UnixMilli(), Tombstone: r.Value == nil}
		if !rec.Tombstone {
			if rec.Value, err = o.vs.Decode(r.Value); err != nil {
				return out, fmt.Errorf("topologytest: %s@%d value: %w", o.topic, r.Offset, err)
			}
		}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, topology.Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, rec)
		o.pos++
	}
	return out, nil
}

// ToMap reads the records written since the last read into the last value
// per key: the topic read as a table, where a tombstone deletes its key.
func ToMap[K comparable, V any](o *OutputTopic[K, V]) (map[K]V, error) {
	m := map[K]V{}
	err := UpdateMap(o, m)
	return m, err
}

// UpdateMap applies the records written since the last read to m, the
// topic read as a table so far: each record sets its key, a tombstone
// deletes it.
func UpdateMap[K comparable, V any](o *OutputTopic[K, V], m map[K]V) error {
	rs, err := o.ReadRecords()
	for _, r := range rs {
		if r.Tombstone {
			delete(m, r.Key)
		} else {
			m[r.Key] = r.Value
		}
	}
	return err
}

// KeyValueStore returns the named store of the topology, typed by the
// materialization that declared it. Reads see the committed state.
func KeyValueStore[K, V any](d *Driver, m topology.Materialization[K, V]) (*topology.KV[K, V], error) {
	if err := d.settle(); err != nil {
		return nil, err
	}
	tk := d.byStore[m.Name()]
	if tk == nil {
		return nil, fmt.Errorf("topologytest: no store %q", m.Name())
	}
	return m.View(tk.Store(m.Name())), nil
}

// WindowStore returns the named window or session store of the topology
// (made by a windowed aggregation), typed by its materialization. Reads see
// the committed state: the windows not yet expired.
func WindowStore[K, V any](d *Driver, m topology.Materialization[K, V]) (*topology.WindowStore[K, V], error) {
	if err := d.settle(); err != nil {
		return nil, err
	}
	tk := d.byStore[m.Name()]
	if tk == nil {
		return nil, fmt.Errorf("topologytest: no store %q", m.Name())
	}
	return m.WindowView(tk.Store(m.Name())), nil
}

// Watermark returns the watermark of the task that owns the named store.
func (d *Driver) Watermark(storeName string) (int64, error) {
	if err := d.settle(); err != nil {
		return 0, err
	}
	tk := d.byStore[storeName]
	if tk == nil {
		return 0, fmt.Errorf("topologytest: no store %q", storeName)
	}
	return tk.Watermark(), nil
}

// StoreEntries counts the entries of the named store (any kind), index
// entries included: how much state it holds.
func (d *Driver) StoreEntries(name string) (int, error) {
	if err := d.settle(); err != nil {
		return 0, err
	}
	tk := d.byStore[name]
	if tk == nil {
		return 0, fmt.Errorf("topologytest: no store %q", name)
	}
	n := 0
	err := tk.Store(name).Range(nil, nil, func(_, _ []byte) error { n++; return nil })
	return n, err
}
