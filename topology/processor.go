package topology

import (
	"fmt"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
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
	c      exec.Context
	timers map[string]any // store name → *TimerService[KIn]
}

func (c *ProcessorContext[KOut, VOut]) execContext() exec.Context { return c.c }

// timerService returns the processor's one service for the named timers,
// made by mk the first time.
func (c *ProcessorContext[KOut, VOut]) timerService(name string, mk func() any) any {
	if c.timers == nil {
		c.timers = map[string]any{}
	}
	if s, ok := c.timers[name]; ok {
		return s
	}
	s := mk()
	c.timers[name] = s
	return s
}

// procContext is a *ProcessorContext of any output types.
type procContext interface {
	execContext() exec.Context
	timerService(name string, mk func() any) any
}

// Watermark is the event-time watermark the current record is judged
// against: that of the input partition it came from (through a repartition
// topic, of the one it was first read from), never below the task's; in
// OnTimer, the task's, window.NoWatermark until every input has reported.
// No more records at or below it are expected. Watermarks
// cross repartition topics only in topologies with windowed state
// (windows, stream joins, timers); elsewhere a task downstream of a
// repartition sees none.
func (c *ProcessorContext[KOut, VOut]) Watermark() int64 { return c.c.Watermark() }

// Forward passes r to every child.
func (c *ProcessorContext[KOut, VOut]) Forward(r Record[KOut, VOut]) error {
	return c.c.Forward(exec.Record{Key: r.Key, Value: r.value(), Timestamp: r.Timestamp, Headers: execHeaders(r.Headers)})
}

// ForwardTo passes r to the named child only.
func (c *ProcessorContext[KOut, VOut]) ForwardTo(child string, r Record[KOut, VOut]) error {
	return c.c.ForwardTo(child, exec.Record{Key: r.Key, Value: r.value(), Timestamp: r.Timestamp, Headers: execHeaders(r.Headers)})
}

// Schedule calls fn every interval of the chosen clock, with the time that
// triggered it, until cancel is called or the task closes.
func (c *ProcessorContext[KOut, VOut]) Schedule(interval time.Duration, typ PunctuationType, fn func(ts int64) error) (cancel func()) {
	return c.c.Schedule(interval, exec.PunctuationType(typ), fn)
}

// RecordMetadata returns the input topic, partition and offset of the
// record being processed; ok is false inside a punctuation.
func (c *ProcessorContext[KOut, VOut]) RecordMetadata() (topic string, partition int32, offset int64, ok bool) {
	return c.c.RecordMeta()
}

// TaskID names the task ("<sub-topology>_<partition>").
func (c *ProcessorContext[KOut, VOut]) TaskID() string { return c.c.TaskID() }

// StreamTime is the largest record timestamp the task has seen, the record
// being processed included.
func (c *ProcessorContext[KOut, VOut]) StreamTime() int64 { return c.c.StreamTime() }

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
func Process[KIn, VIn, KOut, VOut any](s Stream[KIn, VIn], name string, supplier func() Processor[KIn, VIn, KOut, VOut], stores ...interface {
	register(*Topology) bool
	Name() string
}) Stream[KOut, VOut] {
	t := s.t
	if name == "" {
		t.errorf(ErrMissingName, "a processor must be named")
	}
	if supplier == nil {
		t.errorf(ErrNilFunction, "Process(%q) needs a supplier", name)
	}
	var names []string
	var timers []TimerSpec[KIn]
	for _, st := range stores {
		if !st.register(t) {
			continue
		}
		names = append(names, st.Name())
		switch ts := st.(type) {
		case TimerSpec[KIn]:
			timers = append(timers, ts)
		case interface{ timerKeyType() string }:
			t.errorf(ErrTypeMismatch, "processor %q: timers %q are keyed by %s, not by the processor's input key type", name, st.Name(), ts.timerKeyType())
		}
	}
	n := t.add(&exec.Node{
		Name:   t.name(name, "PROCESSOR"),
		Kind:   exec.KindProcessor,
		Stores: names,
		New: func() exec.Processor {
			u := &userProc[KIn, VIn, KOut, VOut]{p: supplier(), timers: timers, name: name}
			if len(timers) > 0 {
				// Only a processor with timers listens to time: the
				// others cost the task nothing per record.
				return &timedProc[KIn, VIn, KOut, VOut]{u}
			}
			return u
		},
	}, s.n)
	return Stream[KOut, VOut]{t: t, n: n, keyChanged: true}
}

type userProc[KIn, VIn, KOut, VOut any] struct {
	p       Processor[KIn, VIn, KOut, VOut]
	ctx     ProcessorContext[KOut, VOut]
	name    string
	timers  []TimerSpec[KIn]
	onTimer func(Timer[KIn]) error
}

func (u *userProc[KIn, VIn, KOut, VOut]) Init(c exec.Context) error {
	u.ctx.c = c
	if len(u.timers) > 0 {
		tp, ok := u.p.(interface{ OnTimer(Timer[KIn]) error })
		if !ok {
			return fmt.Errorf("topology: processor %q has timers but no OnTimer method", u.name)
		}
		u.onTimer = tp.OnTimer
	}
	return u.p.Init(&u.ctx)
}

// timedProc is a userProc with timers.
type timedProc[KIn, VIn, KOut, VOut any] struct {
	*userProc[KIn, VIn, KOut, VOut]
}

// OnWatermark fires the event-time timers the watermark reached.
func (u *timedProc[KIn, VIn, KOut, VOut]) OnWatermark(wm int64) error {
	return u.fire(EventTime, wm)
}

// OnProcessingTime fires the processing-time timers the clock reached.
func (u *timedProc[KIn, VIn, KOut, VOut]) OnProcessingTime(now int64) error {
	return u.fire(ProcessingTimeDomain, now)
}

// OnAbort returns the timer services to the committed state
// (exec.AbortListener).
func (u *timedProc[KIn, VIn, KOut, VOut]) OnAbort() {
	for _, s := range u.ctx.timers {
		s.(interface{ forget() }).forget()
	}
}

func (u *userProc[KIn, VIn, KOut, VOut]) fire(d TimeDomain, now int64) error {
	for _, spec := range u.timers {
		due, err := spec.Open(&u.ctx).due(d, now)
		if err != nil {
			return err
		}
		for _, tm := range due {
			if err := u.onTimer(tm); err != nil {
				return err
			}
		}
	}
	return nil
}

func (u *userProc[KIn, VIn, KOut, VOut]) Process(r exec.Record) error {
	return u.p.Process(recordOf[KIn, VIn](r))
}

func (u *userProc[KIn, VIn, KOut, VOut]) Close() error { return u.p.Close() }
