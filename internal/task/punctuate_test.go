package task

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// ticker counts records per key in a store and, on every punctuation,
// forwards the clock that fired and the time it fired at.
type ticker struct {
	ctx   *topology.ProcessorContext[string, int64]
	store topology.Materialization[string, int64]
	kv    *topology.KV[string, int64]
}

func (p *ticker) Init(ctx *topology.ProcessorContext[string, int64]) error {
	p.ctx, p.kv = ctx, p.store.Open(ctx)
	ctx.Schedule(10*time.Millisecond, topology.StreamTime, func(ts int64) error {
		return ctx.Forward(topology.Record[string, int64]{Key: "stream", Value: ts, Timestamp: ts})
	})
	ctx.Schedule(time.Second, topology.WallClockTime, func(ts int64) error {
		return ctx.Forward(topology.Record[string, int64]{Key: "wall", Value: ts, Timestamp: ts})
	})
	return nil
}

func (p *ticker) Process(r topology.Record[string, string]) error {
	n, _, err := p.kv.Get(r.Key)
	if err != nil {
		return err
	}
	return p.kv.Put(r.Key, n+1)
}

func (p *ticker) Close() error { return nil }

func TestPunctuation(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	st := topology.KeyValueStore("ticks", serde.String, serde.Int64, topology.InMemory())
	out := topology.Process(in, "ticker", func() topology.Processor[string, string, string, int64] { return &ticker{store: st} }, st)
	topology.To(out, "out", serde.String, serde.Int64Text)
	d := &discard{keep: []*kgo.Record{}}
	tk := startTask(t, plan(t, tp), 0, Config{AppID: "p", Send: d.send})
	fired := func() (got []string) {
		for _, r := range d.keep {
			if r.Topic == "out" {
				got = append(got, string(r.Key)+"@"+string(r.Value))
			}
		}
		d.keep = d.keep[:0]
		return got
	}
	// Stream time: the first record sets the schedule; 100 → 105 is not
	// due, 112 passes 110 and fires once, 135 fires once more (no
	// catch-up burst).
	for _, ts := range []int64{100, 105, 112, 111, 135} {
		if err := tk.Process(&kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(ts)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := fired(); len(got) != 2 || got[0] != "stream@112" || got[1] != "stream@135" {
		t.Fatalf("stream-time punctuations: %v", got)
	}
	// Wall clock: only the loop's clock drives it.
	for _, now := range []int64{1_000, 1_500, 2_000, 2_100, 3_000} {
		if err := tk.Punctuate(exec.WallClockTime, now); err != nil {
			t.Fatal(err)
		}
	}
	if got := fired(); len(got) != 2 || got[0] != "wall@2000" || got[1] != "wall@3000" {
		t.Fatalf("wall-clock punctuations: %v", got)
	}
	if n, _, _ := tk.stores["ticks"].Get([]byte("k")); n == nil {
		t.Fatal("store not written by the user processor")
	}
}

// TestAbortReturnsPunctuations: a punctuation that fired in an aborted
// transaction fires again when its records are processed again (issue 15,
// defect 4: the schedule had moved on, so the replay skipped it).
func TestAbortReturnsPunctuations(t *testing.T) {
	for _, skip := range []bool{false, true} {
		tp := topology.New()
		in := topology.From(tp, "in", serde.String, serde.String)
		st := topology.KeyValueStore("ticks", serde.String, serde.Int64, topology.InMemory())
		out := topology.Process(in, "ticker", func() topology.Processor[string, string, string, int64] { return &ticker{store: st} }, st)
		topology.To(out, "out", serde.String, serde.Int64Text)
		d := &discard{keep: []*kgo.Record{}}
		tk := startTask(t, plan(t, tp), 0, Config{AppID: "p", Send: d.send, SkipAbortHooks: skip})
		pipe := func(ts int64) {
			t.Helper()
			if err := tk.Process(&kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(ts)}); err != nil {
				t.Fatal(err)
			}
		}
		fired := func() (n int) {
			for _, r := range d.keep {
				if r.Topic == "out" && string(r.Key) == "stream" {
					n++
				}
			}
			d.keep = d.keep[:0]
			return n
		}
		pipe(100) // anchors the schedule: due at 110
		if err := errors.Join(tk.Flush(), tk.Commit()); err != nil {
			t.Fatal(err)
		}
		pipe(112)
		if n := fired(); n != 1 {
			t.Fatalf("fired %d times at 112, want 1", n)
		}
		tk.Abort()
		pipe(112) // the replay
		if n := fired(); skip && n != 0 {
			t.Fatalf("with the hooks skipped the replay fired %d times; the control shows nothing", n)
		} else if !skip && n != 1 {
			t.Fatalf("the replay fired %d times, want 1, as the aborted run did", n)
		}
	}
}
