package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
)

// The runtime of the Processor API (topology.Process): an exec.Processor
// that hands each record to a user's processor and fires its timers. The
// user's processor, its records and its context are topology's typed
// types; this runtime is given them as functions.

// ProcessContext is the runtime side of a user processor's context
// (topology.ProcessorContext): the task's context, and the processor's
// timer services by store name, made on first use, so that the services
// the processor opens in Init are the ones its timers fire from.
type ProcessContext struct {
	exec   exec.Context
	timers map[string]forgetter
}

// forgetter is a *Timers of any key type.
type forgetter interface{ Forget() }

// Exec is the task's context; nil before the processor's Init.
func (c *ProcessContext) Exec() exec.Context { return c.exec }

// TimersIn returns c's one timer service for the timer store name, keyed
// with ks, made the first time. Every caller for one name must use one key
// type (topology.Process checks that the timers it is given are keyed like
// the processor's input).
func TimersIn[K any](c *ProcessContext, name string, ks serde.Serde[K]) *Timers[K] {
	if c.timers == nil {
		c.timers = map[string]forgetter{}
	}
	if s, ok := c.timers[name]; ok {
		return s.(*Timers[K])
	}
	s := NewTimers(c.exec.Store(name), ks)
	c.timers[name] = s
	return s
}

// TimerStore names a processor's timer store and its key serde.
type TimerStore[K any] struct {
	Name string
	Keys serde.Serde[K]
}

// ProcConfig is what a user processor's runtime is given.
type ProcConfig[K any] struct {
	// Name is the processor's name, for errors.
	Name string
	// Ctx is the context the user's processor was (or will be) handed;
	// the runtime sets its task context before calling Init.
	Ctx *ProcessContext
	// Init, Process and Close are the user's processor's.
	Init    func() error
	Process func(exec.Record) error
	Close   func() error
	// Timers are the processor's timer stores; OnTimer, nil if the
	// processor has no OnTimer method, is called for each timer that
	// comes due.
	Timers  []TimerStore[K]
	OnTimer func(Timer[K]) error
}

// NewProc returns the exec.Processor that runs a user processor. Only a
// processor with timers listens to time (exec.WatermarkListener,
// exec.ProcessingTimeListener, exec.AbortListener): the others cost the
// task nothing per record.
func NewProc[K any](cfg ProcConfig[K]) exec.Processor {
	p := &proc[K]{cfg: cfg}
	if len(cfg.Timers) > 0 {
		return &timedProc[K]{p}
	}
	return p
}

type proc[K any] struct {
	cfg ProcConfig[K]
}

func (p *proc[K]) Init(c exec.Context) error {
	p.cfg.Ctx.exec = c
	if len(p.cfg.Timers) > 0 && p.cfg.OnTimer == nil {
		return fmt.Errorf("topology: processor %q has timers but no OnTimer method", p.cfg.Name)
	}
	return p.cfg.Init()
}

func (p *proc[K]) Process(r exec.Record) error { return p.cfg.Process(r) }

func (p *proc[K]) Close() error { return p.cfg.Close() }

// timedProc is a proc with timers.
type timedProc[K any] struct {
	*proc[K]
}

// OnWatermark fires the event-time timers the watermark reached.
func (p *timedProc[K]) OnWatermark(wm int64) error { return p.fire(EventTime, wm) }

// OnProcessingTime fires the processing-time timers the clock reached.
func (p *timedProc[K]) OnProcessingTime(now int64) error { return p.fire(ProcessingTime, now) }

// OnAbort returns the timer services to the committed state
// (exec.AbortListener).
func (p *timedProc[K]) OnAbort() {
	for _, s := range p.cfg.Ctx.timers {
		s.Forget()
	}
}

// fire calls OnTimer for each timer of clock d due at now, store by store
// in the order the processor declared them, each store's in time order.
func (p *timedProc[K]) fire(d Domain, now int64) error {
	for _, ts := range p.cfg.Timers {
		due, err := TimersIn(p.cfg.Ctx, ts.Name, ts.Keys).Due(d, now)
		if err != nil {
			return err
		}
		for _, tm := range due {
			if err := p.cfg.OnTimer(tm); err != nil {
				return err
			}
		}
	}
	return nil
}
