package topology

import (
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/ops"
)

// Record is a typed record of the Processor API. Timestamp is in
// milliseconds since the epoch.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp int64
	Headers   []Header
	// Tombstone marks a delete of Key (a Kafka null value; Value is then
	// the zero value): what a table's deletes become in a stream.
	Tombstone bool
}

// value is r's value as the runtime carries it.
func (r Record[K, V]) value() any {
	if r.Tombstone {
		return exec.Tombstone
	}
	return r.Value
}

// recordOf types an exec.Record.
func recordOf[K, V any](r exec.Record) Record[K, V] {
	rec := Record[K, V]{Key: r.Key.(K), Timestamp: r.Timestamp, Headers: headersOf(r.Headers)}
	if r.Value == exec.Tombstone {
		rec.Tombstone = true
	} else {
		rec.Value = r.Value.(V)
	}
	return rec
}

// Processor is user code in the low-level Processor API: one instance per
// task, called from the task's goroutine only.
type Processor[KIn, VIn, KOut, VOut any] interface {
	// Init is called once when the task opens; open stores here.
	Init(ctx *ProcessorContext[KOut, VOut]) error
	// Process handles one record. A returned error stops the instance
	// without committing the record.
	Process(r Record[KIn, VIn]) error
	// Close is called when the task closes.
	Close() error
}

// PunctuationType selects the clock of a punctuation.
type PunctuationType int

const (
	// StreamTime punctuations follow the largest record timestamp seen by
	// the task: deterministic under replay.
	StreamTime PunctuationType = iota
	// WallClockTime punctuations follow the system clock.
	WallClockTime
)

// ProcessorContext is what a Processor sees of its task.
type ProcessorContext[KOut, VOut any] struct {
	pc ops.ProcessContext
}

// StateContext is what Open needs of the processor that opens a store,
// a keyed state or its timers: the task it runs in. A *ProcessorContext
// of any output types is one, handed to the processor's Init; no other
// type can be.
type StateContext interface {
	processContext() *ops.ProcessContext
}

func (c *ProcessorContext[KOut, VOut]) processContext() *ops.ProcessContext { return &c.pc }

// Watermark is the event-time watermark the current record is judged
// against: that of the input partition it came from (through a repartition
// topic, of the one it was first read from), never below the task's; in
// OnTimer, the task's, window.NoWatermark until every input has reported.
// No more records at or below it are expected. Watermarks
// cross repartition topics only in topologies with windowed state
// (windows, stream joins, timers); elsewhere a task downstream of a
// repartition sees none.
func (c *ProcessorContext[KOut, VOut]) Watermark() int64 { return c.pc.Exec().Watermark() }

// Forward passes r to every child.
func (c *ProcessorContext[KOut, VOut]) Forward(r Record[KOut, VOut]) error {
	return c.pc.Exec().Forward(exec.Record{Key: r.Key, Value: r.value(), Timestamp: r.Timestamp, Headers: execHeaders(r.Headers)})
}

// ForwardTo passes r to the named child only.
func (c *ProcessorContext[KOut, VOut]) ForwardTo(child string, r Record[KOut, VOut]) error {
	return c.pc.Exec().ForwardTo(child, exec.Record{Key: r.Key, Value: r.value(), Timestamp: r.Timestamp, Headers: execHeaders(r.Headers)})
}

// Schedule calls fn every interval of the chosen clock, with the time that
// triggered it, until cancel is called or the task closes.
func (c *ProcessorContext[KOut, VOut]) Schedule(interval time.Duration, typ PunctuationType, fn func(ts int64) error) (cancel func()) {
	return c.pc.Exec().Schedule(interval, exec.PunctuationType(typ), fn)
}

// RecordMetadata returns the input topic, partition and offset of the
// record being processed; ok is false inside a punctuation.
func (c *ProcessorContext[KOut, VOut]) RecordMetadata() (topic string, partition int32, offset int64, ok bool) {
	return c.pc.Exec().RecordMeta()
}

// TaskID names the task ("<sub-topology>_<partition>").
func (c *ProcessorContext[KOut, VOut]) TaskID() string { return c.pc.Exec().TaskID() }

// StreamTime is the largest record timestamp the task has seen, the record
// being processed included.
func (c *ProcessorContext[KOut, VOut]) StreamTime() int64 { return c.pc.Exec().StreamTime() }

// StoreSpec is a store a processor declares it uses: a Materialization made
// by Materialized, a keyed state made by ValueState,
// ListState, MapState, ReducingState or AggregatingState, or the timers
// made by Timers.
type StoreSpec interface {
	Name() string
	register(t *Topology) bool
}

// Process runs user processors made by supplier (one per task) on s, with
// access to the named stores. The result's key may differ from the input's,
// so a stateful operator downstream repartitions.
func Process[KIn, VIn, KOut, VOut any](s Stream[KIn, VIn], name string, supplier func() Processor[KIn, VIn, KOut, VOut], stores ...StoreSpec) Stream[KOut, VOut] {
	t := s.t
	if name == "" {
		t.errorf(ErrMissingName, "a processor must be named")
	}
	if supplier == nil {
		t.errorf(ErrNilFunction, "Process(%q) needs a supplier", name)
	}
	var names []string
	var timers []ops.TimerStore[KIn]
	for _, st := range stores {
		if !st.register(t) {
			continue
		}
		names = append(names, st.Name())
		switch ts := st.(type) {
		case TimerSpec[KIn]:
			timers = append(timers, ts.store())
		case interface{ timerKeyType() string }:
			t.errorf(ErrTypeMismatch, "processor %q: timers %q are keyed by %s, not by the processor's input key type", name, st.Name(), ts.timerKeyType())
		}
	}
	n := t.add(&exec.Node{
		Name:   t.name(name, "PROCESSOR"),
		Kind:   exec.KindProcessor,
		Stores: names,
		New: func() exec.Processor {
			p := supplier()
			ctx := &ProcessorContext[KOut, VOut]{}
			cfg := ops.ProcConfig[KIn]{
				Name:    name,
				Ctx:     &ctx.pc,
				Init:    func() error { return p.Init(ctx) },
				Process: func(r exec.Record) error { return p.Process(recordOf[KIn, VIn](r)) },
				Close:   func() error { return p.Close() },
				Timers:  timers,
			}
			if tp, ok := p.(interface{ OnTimer(Timer[KIn]) error }); ok {
				cfg.OnTimer = func(tm ops.Timer[KIn]) error { return tp.OnTimer(timerOf(tm)) }
			}
			return ops.NewProc(cfg)
		},
	}, s.n)
	return Stream[KOut, VOut]{t: t, n: n, keyChanged: true}
}
