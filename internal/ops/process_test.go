package ops

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// taskCtx is the part of a task's context the Processor API runtime uses;
// any other method panics (the embedded interface is nil).
type taskCtx struct {
	exec.Context
	stores map[string]*store.Staged
}

func (c *taskCtx) Store(name string) *store.Staged { return c.stores[name] }

// TestProcWithoutTimers: a processor without timers is handed each call
// and listens to no time.
func TestProcWithoutTimers(t *testing.T) {
	var calls []string
	pc := &ProcessContext{}
	p := NewProc(ProcConfig[string]{
		Name:    "p",
		Ctx:     pc,
		Init:    func() error { calls = append(calls, fmt.Sprintf("init %t", pc.Exec() != nil)); return nil },
		Process: func(r exec.Record) error { calls = append(calls, fmt.Sprint("process ", r.Key)); return nil },
		Close:   func() error { calls = append(calls, "close"); return nil },
	})
	if _, ok := p.(exec.WatermarkListener); ok {
		t.Error("a processor without timers listens to watermarks")
	}
	if _, ok := p.(exec.ProcessingTimeListener); ok {
		t.Error("a processor without timers listens to processing time")
	}
	if _, ok := p.(exec.AbortListener); ok {
		t.Error("a processor without timers listens to aborts")
	}
	if err := p.Init(&taskCtx{}); err != nil {
		t.Fatal(err)
	}
	p.Process(exec.Record{Key: "k"})
	p.Close()
	if want := []string{"init true", "process k", "close"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %q, want %q", calls, want)
	}
}

func TestProcTimersWithoutOnTimer(t *testing.T) {
	p := NewProc(ProcConfig[string]{
		Name:   "p",
		Ctx:    &ProcessContext{},
		Init:   func() error { return nil },
		Timers: []TimerStore[string]{{Name: "t", Keys: serde.String}},
	})
	err := p.Init(&taskCtx{stores: map[string]*store.Staged{"t": store.NewStaged("t", store.NewMemory())}})
	if err == nil || err.Error() != `topology: processor "p" has timers but no OnTimer method` {
		t.Fatalf("Init: %v", err)
	}
}

// TestProcFiresTimers: a processor with two timer stores registers timers
// for keys of every length in Init; the watermark and the wall clock fire
// them, store by store in the order declared, each in time order; an abort
// makes every service the processor holds find its timers again.
func TestProcFiresTimers(t *testing.T) {
	stores := map[string]*store.Staged{"a": pebbleStaged(t), "b": pebbleStaged(t)}
	keys := testkeys.All()
	var fired []string
	pc := &ProcessContext{}
	p := NewProc(ProcConfig[string]{
		Name: "p",
		Ctx:  pc,
		Init: func() error {
			a, b := TimersIn(pc, "a", serde.String), TimersIn(pc, "b", serde.String)
			if TimersIn(pc, "a", serde.String) != a {
				return fmt.Errorf("two services for one timer store")
			}
			for i, k := range keys {
				if err := a.Register(EventTime, k, int64(i%3)); err != nil {
					return err
				}
				if err := b.Register(EventTime, k, 0); err != nil {
					return err
				}
			}
			return b.Register(ProcessingTime, "wall", 50)
		},
		Timers:  []TimerStore[string]{{Name: "a", Keys: serde.String}, {Name: "b", Keys: serde.String}},
		OnTimer: func(tm Timer[string]) error { fired = append(fired, tm.String()); return nil },
	})
	if err := p.Init(&taskCtx{stores: stores}); err != nil {
		t.Fatal(err)
	}
	for _, st := range stores {
		commit(t, st)
	}
	wl, pl, al := p.(exec.WatermarkListener), p.(exec.ProcessingTimeListener), p.(exec.AbortListener)

	if err := wl.OnWatermark(0); err != nil {
		t.Fatal(err)
	}
	var want []string
	var inA, inB []string
	for i, k := range keys {
		if i%3 == 0 {
			inA = append(inA, k)
		}
		inB = append(inB, k)
	}
	slices.Sort(inA)
	slices.Sort(inB)
	for _, k := range inA {
		want = append(want, Timer[string]{Key: k, Time: 0}.String())
	}
	for _, k := range inB {
		want = append(want, Timer[string]{Key: k, Time: 0}.String())
	}
	if !slices.Equal(fired, want) {
		t.Fatalf("watermark 0 fired %d timers, want %d: store a's, then b's, each in key order", len(fired), len(want))
	}

	// Abort: the stores go back to the committed timers, and both
	// services, bounds raised by the firing, find them again.
	for _, st := range stores {
		st.Abort()
	}
	al.OnAbort()
	fired = nil
	if err := wl.OnWatermark(0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fired, want) {
		t.Fatalf("the replay after the abort fired %d timers, want %d", len(fired), len(want))
	}

	fired = nil
	if err := pl.OnProcessingTime(49); err != nil || len(fired) != 0 {
		t.Fatalf("wall clock 49: %q %v", fired, err)
	}
	if err := pl.OnProcessingTime(50); err != nil || !slices.Equal(fired, []string{"wall@50/1"}) {
		t.Fatalf("wall clock 50: %q %v", fired, err)
	}
	fired = nil
	if err := wl.OnWatermark(2); err != nil || len(fired) != len(keys)-len(inA) {
		t.Fatalf("watermark 2 fired %d, want %d: %v", len(fired), len(keys)-len(inA), err)
	}
}
