package processor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

type unlucky struct {
	ctx *topology.ProcessorContext[string, int64]
}

func (u *unlucky) Init(ctx *topology.ProcessorContext[string, int64]) error { u.ctx = ctx; return nil }
func (u *unlucky) Close() error                                             { return nil }
func (u *unlucky) Process(r topology.Record[string, int64]) error {
	if r.Value == 13 {
		return errors.New("unlucky number")
	}
	return u.ctx.Forward(r)
}

func unluckyTopology(in, out string) *topology.Topology {
	t := topology.New()
	s := topology.From(t, in, serde.String, serde.Int64Text)
	p := topology.Process(s, "unlucky", func() topology.Processor[string, int64, string, int64] { return &unlucky{} })
	topology.To(p, out, serde.String, serde.Int64Text)
	return t
}

// TestErrorPoliciesUnderExactlyOnce: with dead-lettering, bad records land
// in the dead-letter topic in the same transactions as the good ones'
// outputs; with the default (fail) for processing errors, the instance stops
// and the bad record's offset is never committed.
func TestErrorPoliciesUnderExactlyOnce(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out := uniq(t, "nums"), uniq(t, "out")
	cl := setup(t, addrs, 1, in, out)
	for _, v := range []string{"1", "13", "x", "2"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	run := func(appID string, wait func(*processor.App) bool, opts ...processor.Opt) error {
		app, err := processor.New(unluckyTopology(in, out), append(opts, processor.ApplicationID(appID),
			processor.Brokers(addrs...), processor.StateDir(t.TempDir()))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntil(app, wait); err != nil {
			return err
		}
		f := app.Stats().Failures()
		if f[processor.FailureKey{Class: topology.Processing, Action: topology.DeadLetterIt}] != 1 ||
			f[processor.FailureKey{Class: topology.Deserialization, Action: topology.DeadLetterIt}] != 1 {
			t.Errorf("failure counts %v", f)
		}
		return nil
	}

	dl := uniq(t, "dl")
	if err := run(dl, func(a *processor.App) bool { return a.Stats().Processed.Load() >= 4 },
		processor.OnError(topology.Processing, topology.Always(topology.DeadLetterIt))); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	outs, err := readback.ReadCommitted(rctx, addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || string(outs[0].Value) != "1" || string(outs[1].Value) != "2" {
		t.Errorf("outputs %v", outs)
	}
	dead, err := readback.ReadCommitted(rctx, addrs, dl+"-dlq")
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 2 || string(dead[0].Value) != "13" || string(dead[1].Value) != "x" {
		t.Fatalf("dead letters %v", dead)
	}

	fail := uniq(t, "fail")
	err = run(fail, func(*processor.App) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "processing error in unlucky") {
		t.Fatalf("Run with a failing record returned %v", err)
	}
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, fail)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(in, 0); ok && o.At > 1 {
		t.Errorf("committed offset %d: the failing record (offset 1) was committed", o.At)
	}
}
