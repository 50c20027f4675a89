package task

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// heldTopology has the windows whose runtime holds the windows it opens
// in memory (ops.HoldWindows), each with a trigger that takes another
// way through it:
//
//   - "final": tumbling, EmitFinal, allowed lateness, late records out;
//   - "hop": hopping (each record in four windows), EmitEveryUpdate, so
//     held windows fire as records arrive;
//   - "early": tumbling with an early firing every 5 ms of processing
//     time: every window's first record sets a processing-time timer, so
//     its window leaves memory for the store;
//   - "pair": see pairTrigger.
//
// The adders panic on a record of value 13 that finds its window already
// holding records, so that a record fails after it changed some of its
// windows (a hopping record's earlier ones) and its unit is undone.
func heldTopology() *topology.Topology {
	t := topology.New()
	s := topology.From(t, "in", serde.String, serde.Int64Text, topology.DeadLetter("dlq"),
		topology.Watermarks(window.BoundedOutOfOrderness(4*time.Millisecond)))
	sum := func(_ string, v, acc int64) int64 {
		if v == 13 && acc != 0 {
			panic("thirteen")
		}
		return acc*7 + v // not commutative: a changed order shows
	}
	zero := func() int64 { return 0 }
	out := func(name string, ws topology.WindowedStream[string, int64]) {
		agg := topology.AggregateWindows(ws, zero, sum, topology.Materialized(name, serde.String, serde.Int64))
		topology.To(topology.ToStream(agg), name, topology.WindowedSerde(serde.String), serde.Int64Text)
	}
	g := topology.GroupByKey(s)
	final := topology.WindowedBy(g, window.Tumbling(10*time.Millisecond), topology.EmitFinal(), topology.AllowedLateness(3*time.Millisecond))
	out("final", final)
	topology.To(topology.LateRecords(final), "late", serde.String, serde.Int64Text)
	out("hop", topology.WindowedBy(g, window.Hopping(20*time.Millisecond, 5*time.Millisecond), topology.EmitEveryUpdate()))
	out("early", topology.WindowedBy(g, window.Tumbling(10*time.Millisecond),
		topology.WithTrigger(window.EarlyEveryInterval(5*time.Millisecond))))
	out("pair", topology.WindowedBy(g, window.Tumbling(10*time.Millisecond), topology.AllowedLateness(10*time.Millisecond),
		topology.WithTrigger(pairTrigger{})))
	return t
}

// pairTrigger fires a window at its close if it took one record, and at
// its end if it took more: the windows of one record stay held, those of
// two or more go to the store for their event timer, which is due when
// the window before closes. So held windows close among the store's
// timers and expiries at one time.
type pairTrigger struct{}

func (pairTrigger) OnElement(c window.TriggerContext, _ int64) window.TriggerResult {
	r := window.TriggerResult{EventTimer: c.Close, ProcessingTimer: window.NoTimer}
	if c.Count >= 2 {
		r.EventTimer = c.MaxTimestamp
	}
	return r
}

func (pairTrigger) OnEventTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{Fire: true, EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}

func (pairTrigger) OnProcessingTime(window.TriggerContext) window.TriggerResult {
	return window.TriggerResult{EventTimer: window.NoTimer, ProcessingTimer: window.NoTimer}
}

func (pairTrigger) String() string { return "pairTrigger" }

// heldRecords are n records of keys of every length and UUIDs, a few
// keys hot, with times mostly ahead a little, some behind (late for
// "final" or within its lateness) and now and then a jump that closes
// many windows at once; one value in 17 is 13. Time moves ahead at one
// record in slow only, so that with a slow of 32 a window outlives a
// transaction of hundreds of records.
func heldRecords(n int, seed uint64, slow int) []*kgo.Record {
	r := rand.New(rand.NewPCG(seed, 1))
	keys := testkeys.All()
	ts := int64(1_000)
	var recs []*kgo.Record
	for i := range n {
		rts := ts
		switch x := r.IntN(100); {
		case x >= 3 && x < 15:
			rts = ts - int64(r.IntN(12)) // behind, maybe late
		case i%slow != 0:
		case x < 3:
			ts += 40 // a jump
		default:
			ts += int64(r.IntN(3))
		}
		k := keys[r.IntN(len(keys))]
		if r.IntN(3) == 0 {
			k = keys[r.IntN(4)]
		}
		v := int64(r.IntN(9) + 1)
		if r.IntN(17) == 0 {
			v = 13
		}
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(k), Value: []byte(fmt.Sprint(v)),
			Offset: int64(i), Timestamp: time.UnixMilli(max(rts, 0))})
	}
	return recs
}

// heldRun is what a run committed: its records (changelog records as a
// sorted list per transaction, since a held window reaches the changelog
// at the flush rather than with its record), its failures, and each
// store's engine after every commit.
type heldRun struct {
	out     []string
	log     []string
	actions []string
	engines []string
}

// runHeld runs recs through heldTopology's task, committing every `every`
// records and ticking the wall clock 1 ms a record; the transactions
// numbered in abort (by their first record) abort once, after their
// flush or, if odd, before it, and are processed again. hold says whether
// windows are held in memory; tamper, if set, changes the plan.
func runHeld(t *testing.T, recs []*kgo.Record, every int, abort map[int]bool, hold bool, tamper func(*exec.Plan)) heldRun {
	t.Helper()
	defer func(was bool) { ops.HoldWindows = was }(ops.HoldWindows)
	ops.HoldWindows = hold
	p := planOf(t, heldTopology(), false, tamper)
	var run heldRun
	d := &discard{keep: []*kgo.Record{}}
	deadLetter := func(exec.ErrorContext) exec.Action { return exec.DeadLetter }
	tk := startTask(t, p, 0, Config{
		AppID: "app", Send: d.send,
		Errors: map[exec.ErrorClass]exec.ErrorHandler{exec.Processing: deadLetter},
		OnAction: func(ec exec.ErrorContext, a exec.Action) {
			run.actions = append(run.actions, fmt.Sprintf("%s in %s at %d: %s (%v)", ec.Class, ec.Node, ec.Offset, a, ec.Err))
		},
	})
	aborted := map[int]bool{}
	start, actionsAt := 0, 0
	for i := 0; i < len(recs); i++ {
		if err := tk.Process(recs[i]); err != nil {
			t.Fatal(err)
		}
		if err := tk.Tick(int64(1_000_000 + i)); err != nil {
			t.Fatal(err)
		}
		if (i+1)%every != 0 && i != len(recs)-1 {
			continue
		}
		aborts := abort[start] && !aborted[start]
		if !aborts || start%2 == 0 { // an odd transaction aborts before its flush
			if err := tk.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if aborts {
			aborted[start] = true
			tk.Abort()
			d.keep, run.actions, i = d.keep[:0], run.actions[:actionsAt], start-1
			continue
		}
		if err := tk.Commit(); err != nil {
			t.Fatal(err)
		}
		var log []string
		for _, r := range d.keep {
			if strings.HasSuffix(r.Topic, "-changelog") {
				log = append(log, fmt.Sprintf("%s %x=%x", r.Topic, r.Key, r.Value))
			}
		}
		slices.Sort(log)
		run.log = append(run.log, log...)
		run.out = append(run.out, describe(d.keep)...)
		for _, name := range tk.Stores() {
			run.engines = append(run.engines, fmt.Sprintf("%s after %d: %v", name, i, engineDump(t, tk, name)))
		}
		d.keep, start, actionsAt = d.keep[:0], i+1, len(run.actions)
	}
	return run
}

// engineDump is a store's engine, for comparing runs.
func engineDump(t *testing.T, tk *Task, name string) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := tk.Engine(name).Range(nil, nil, func(k, v []byte) error {
		m[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// diffHeld says how two runs differ ("" if they do not).
func diffHeld(a, b heldRun) string {
	for _, c := range []struct {
		what string
		a, b []string
	}{{"results", a.out, b.out}, {"changelog", a.log, b.log}, {"failures", a.actions, b.actions}, {"engines", a.engines, b.engines}} {
		if !slices.Equal(c.a, c.b) {
			i := 0
			for i < min(len(c.a), len(c.b)) && c.a[i] == c.b[i] {
				i++
			}
			at := func(x []string) string {
				if i < len(x) {
					return x[i]
				}
				return "(end)"
			}
			return fmt.Sprintf("%s differ at %d of %d/%d: %s against %s", c.what, i, len(c.a), len(c.b), at(c.a), at(c.b))
		}
	}
	return ""
}

// heldCases are the commit cadences and aborts the comparison runs:
// transactions of a few records (windows mostly in the store), of many
// (mostly held), one for all, and aborts before and after the flush.
var heldCases = []struct {
	every, slow int
	abort       []int
}{
	{1, 1, nil}, {7, 1, []int{14, 35, 63}}, {60, 1, []int{60, 180}}, {250, 1, []int{250, 500}}, {2000, 1, []int{0}},
	// Windows outlive transactions: holding pauses and resumes
	// (pace; checked by hand that it does, in this case).
	{100, 32, []int{700, 1101}},
}

// TestHeldWindowsMatchTheStore: windows held in memory give what the store
// alone gives, record for record, with the same changelog records in each
// transaction, the same failures and the same engines after every commit,
// whatever the commit cadence, across aborts and records undone; in both
// layouts of the window stores.
func TestHeldWindowsMatchTheStore(t *testing.T) {
	defer func(was bool) { ops.WindowsByStart = was }(ops.WindowsByStart)
	for _, byStart := range []bool{true, false} {
		ops.WindowsByStart = byStart
		t.Run(fmt.Sprintf("byStart=%v", byStart), heldMatchesStore)
	}
}

// heldMatchesStore is TestHeldWindowsMatchTheStore in one layout of the
// stores (ops.WindowsByStart).
func heldMatchesStore(t *testing.T) {
	for _, c := range heldCases {
		t.Run(fmt.Sprintf("every=%d,slow=%d", c.every, c.slow), func(t *testing.T) {
			n := 2000
			if c.slow > 1 {
				n = 6000 // transactions enough to pause and resume
			}
			recs := heldRecords(n, 7, c.slow)
			if c.every == 1 {
				recs = recs[:500] // a commit a record: each a Pebble write
			}
			abort := map[int]bool{}
			for _, a := range c.abort {
				abort[a] = true
			}
			held, stored := runHeld(t, recs, c.every, abort, true, nil), runHeld(t, recs, c.every, abort, false, nil)
			if d := diffHeld(held, stored); d != "" {
				t.Fatalf("held windows and the store: %s", d)
			}
			topics := perTopic(held.out)
			for _, topic := range []string{"final", "hop", "early", "pair", "late", "dlq"} {
				if topics[topic] == 0 {
					t.Errorf("nothing reached %s: %v", topic, topics)
				}
			}
			if len(held.log) == 0 {
				t.Error("no changelog record")
			}
		})
	}
}

// faultyHolder is a window runtime whose holding has a fault: "rollback"
// does not undo a failed record's changes, "spill" drops the held windows
// instead of writing them to the store, "drop" keeps them across an abort.
type faultyHolder struct {
	exec.Processor
	fault string
}

func (f *faultyHolder) holder() exec.Holder { return f.Processor.(exec.Holder) }
func (f *faultyHolder) OnWatermark(wm int64) error {
	return f.Processor.(exec.WatermarkListener).OnWatermark(wm)
}
func (f *faultyHolder) OnProcessingTime(now int64) error {
	return f.Processor.(exec.ProcessingTimeListener).OnProcessingTime(now)
}
func (f *faultyHolder) OnAbort() { f.Processor.(exec.AbortListener).OnAbort() }
func (f *faultyHolder) Mark()    { f.holder().Mark() }
func (f *faultyHolder) Held() int {
	return f.holder().Held()
}
func (f *faultyHolder) Rollback() {
	if f.fault != "rollback" {
		f.holder().Rollback()
	}
}
func (f *faultyHolder) Spill() error {
	if f.fault == "spill" {
		f.holder().Drop()
		return nil
	}
	return f.holder().Spill()
}
func (f *faultyHolder) Drop() {
	if f.fault != "drop" {
		f.holder().Drop()
	}
}

// TestHeldWindowsNegativeControl: the comparison above catches each fault
// of holding: a record's changes not undone, held windows lost at the
// flush, held windows kept across an abort. The faulty runtime wraps the
// "final" and "hop" windows, reached by the erased path (the typed entry
// needs the runtime itself); the erased path gives what the typed one
// does (TestTypedWindowsAndJoinsMatchTheErasedPath).
func TestHeldWindowsNegativeControl(t *testing.T) {
	recs := heldRecords(2000, 7, 1)
	// Aborted after the flush (14) and before it (35, 63), where held
	// windows are still held.
	abort := map[int]bool{14: true, 35: true, 63: true}
	faulty := func(fault string) func(*exec.Plan) {
		return func(p *exec.Plan) {
			for _, sub := range p.Subs {
				for _, n := range sub.Nodes {
					if !strings.HasPrefix(n.Name, "final-window") && !strings.HasPrefix(n.Name, "hop-window") {
						continue
					}
					n.Typed = nil
					inner := n.New
					n.New = func() exec.Processor { return &faultyHolder{Processor: inner(), fault: fault} }
				}
			}
		}
	}
	stored := runHeld(t, recs, 7, abort, false, nil)
	if d := diffHeld(runHeld(t, recs, 7, abort, true, faulty("")), stored); d != "" {
		t.Fatalf("the wrapper without a fault changed the run: %s", d)
	}
	for _, fault := range []string{"rollback", "spill", "drop"} {
		t.Run(fault, func(t *testing.T) {
			if d := diffHeld(runHeld(t, recs, 7, abort, true, faulty(fault)), stored); d == "" {
				t.Fatal("the comparison saw no difference")
			}
		})
	}
}

// TestCommitRefusesHeldWindows: a commit without the flush that spills
// the held windows fails, rather than commit a transaction that lost
// them.
func TestCommitRefusesHeldWindows(t *testing.T) {
	tk := startTask(t, planOf(t, heldTopology(), false, nil), 0, Config{AppID: "app", Send: (&discard{}).send})
	if err := tk.Process(heldRecords(1, 1, 1)[0]); err != nil {
		t.Fatal(err)
	}
	if err := tk.Commit(); err == nil {
		t.Fatal("a commit with windows held and not spilled succeeded")
	}
	if err := errors.Join(tk.Flush(), tk.Commit()); err != nil {
		t.Fatal(err)
	}
	if n := len(engineDump(t, tk, "final")); n == 0 {
		t.Fatal("the spilled window is not in the engine")
	}
}
