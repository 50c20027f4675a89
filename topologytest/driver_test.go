package topologytest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

func TestBillingWithoutABroker(t *testing.T) {
	d, err := topologytest.New(examples.Billing("bills", "accepted", "totals", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	bills := topologytest.NewInputTopic(d, "bills", serde.Bytes, examples.BillSerde)
	accepted := topologytest.NewOutputTopic(d, "accepted", serde.String, serde.JSON[examples.AcceptedBill]())
	totals := topologytest.NewOutputTopic(d, "totals", serde.String, serde.JSON[examples.Totals]())
	dlq := topologytest.NewOutputTopic(d, "dlq", serde.Bytes, serde.Bytes)

	b1 := examples.Bill{BillID: "b1", Account: "acme", AmountCents: 500, TS: 1}
	b2 := examples.Bill{BillID: "b2", Account: "acme", AmountCents: 200, TS: 2}
	for _, step := range []func() error{
		func() error { return bills.Pipe([]byte("acme"), b1, 1) },       // keyed by account
		func() error { return bills.Pipe([]byte("b2"), b2, 2) },         // re-keyed
		func() error { return bills.Pipe([]byte("b2"), b2, 3) },         // a retry: dropped
		func() error { return bills.PipeBytes(nil, []byte(`{"x"`), 4) }, // malformed: dead-lettered
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	acc, err := accepted.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	if len(acc) != 2 || acc[0].Value.BillID != "b1" || acc[1].Value.BillID != "b2" || acc[1].Value.Offset != 1 {
		t.Fatalf("accepted: %+v", acc)
	}
	tot, _ := topologytest.ToMap(totals)
	if got := tot["acme"]; got.Count != 2 || got.SumCents != 700 || got.MinCents != 200 || got.LastBillID != "b2" {
		t.Fatalf("totals: %+v", got)
	}
	dead, _ := dlq.ReadRecords()
	if len(dead) != 1 || string(dead[0].Value) != `{"x"` {
		t.Fatalf("dead letters: %+v", dead)
	}
	hs := map[string]string{}
	for _, h := range dead[0].Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs["sluice.source.topic"] != "bills" || hs["sluice.source.offset"] != "3" || hs["sluice.error.class"] != "deserialization" {
		t.Errorf("dead-letter headers: %v", hs)
	}
	seen, err := topologytest.KeyValueStore(d, topology.KeyValueStore("seen-bills", serde.String, serde.Int64))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := seen.Get("b2"); !ok {
		t.Error("seen-bills lacks b2")
	}
}

// failing fails on the value "boom" after writing to its store, so the
// write must be rolled back.
type failing struct {
	ctx   *topology.ProcessorContext[string, int64]
	store topology.Materialization[string, int64]
	kv    *topology.KV[string, int64]
}

func (p *failing) Init(ctx *topology.ProcessorContext[string, int64]) error {
	p.ctx, p.kv = ctx, p.store.Open(ctx)
	ctx.Schedule(time.Minute, topology.WallClockTime, func(ts int64) error {
		return ctx.Forward(topology.Record[string, int64]{Key: "tick", Value: ts, Timestamp: ts})
	})
	return nil
}

func (p *failing) Process(r topology.Record[string, string]) error {
	if err := p.kv.Put(r.Key, 1); err != nil {
		return err
	}
	if r.Value == "boom" {
		return errors.New("boom")
	}
	return p.ctx.Forward(topology.Record[string, int64]{Key: r.Key, Value: 1, Timestamp: r.Timestamp})
}

func (p *failing) Close() error { return nil }

func TestErrorsRollBackAndWallClockIsManual(t *testing.T) {
	tp := topology.New()
	st := topology.KeyValueStore("seen", serde.String, serde.Int64)
	in := topology.From(tp, "in", serde.String, serde.String)
	out := topology.Process(in, "p", func() topology.Processor[string, string, string, int64] { return &failing{store: st} }, st)
	topology.To(out, "out", serde.String, serde.Int64)
	start := time.UnixMilli(1_000_000)
	d, err := topologytest.New(tp, topologytest.WallClock(start))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	input := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	output := topologytest.NewOutputTopic(d, "out", serde.String, serde.Int64)
	kv, _ := topologytest.KeyValueStore(d, st)

	if err := input.Pipe("a", "boom", 1); err == nil {
		t.Fatal("the processing error was swallowed")
	}
	if _, ok, _ := kv.Get("a"); ok {
		t.Error("the failed record's store write survived")
	}
	if err := input.Pipe("b", "fine", 2); err != nil {
		t.Fatal(err)
	}
	// The minute-long schedule started with the driver: 30 s is not due,
	// 90 s more is, and fires once.
	if err := d.AdvanceWallClock(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if rs, _ := output.ReadRecords(); len(rs) != 1 || rs[0].Key != "b" {
		t.Fatalf("outputs before the punctuation is due: %+v", rs)
	}
	if err := d.AdvanceWallClock(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	rs, _ := output.ReadRecords()
	if len(rs) != 1 || rs[0].Key != "tick" || rs[0].Value != start.UnixMilli()+120_000 {
		t.Fatalf("outputs: %+v", rs)
	}
	if err := topologytest.NewInputTopic(d, "nope", serde.String, serde.String).Pipe("k", "v", 0); !errors.Is(err, topologytest.ErrUnknownTopic) {
		t.Errorf("pipe to an unknown topic: %v", err)
	}
}

func TestAggregations(t *testing.T) {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.Int64)
	sums := topology.Reduce(topology.GroupByKey(in), func(a, b int64) int64 { return a + b },
		topology.Materialized("sums", serde.String, serde.Int64, topology.InMemory()))
	topology.To(topology.ToStream(sums), "sums", serde.String, serde.Int64)
	maxes := topology.Aggregate(topology.GroupBy(in, func(k string, _ int64) string { return k[:1] }, topology.Grouped("by-initial", serde.String, serde.Int64)),
		func() int64 { return -1 }, func(_ string, v, m int64) int64 { return max(v, m) },
		topology.Materialized("maxes", serde.String, serde.Int64, topology.WithoutCache()))
	topology.To(topology.ToStream(maxes), "maxes", serde.String, serde.Int64)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	input := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64)
	for i, kv := range []struct {
		k string
		v int64
	}{{"ab", 3}, {"ac", 5}, {"ab", 4}, {"b", 1}} {
		if err := input.Pipe(kv.k, kv.v, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := topologytest.ToMap(topologytest.NewOutputTopic(d, "sums", serde.String, serde.Int64))
	m, _ := topologytest.ToMap(topologytest.NewOutputTopic(d, "maxes", serde.String, serde.Int64))
	if s["ab"] != 7 || s["ac"] != 5 || s["b"] != 1 {
		t.Errorf("sums %v", s)
	}
	if m["a"] != 5 || m["b"] != 1 {
		t.Errorf("maxes %v", m)
	}
}

func TestBillingDeadLettersEveryClass(t *testing.T) {
	d, err := topologytest.New(examples.Billing("bills", "accepted", "totals", "dlq"),
		// What `sluice run billing` sets (examples' Options), for the driver.
		topologytest.DeadLetterTopic("dlq"), topologytest.MaxRecordBytes(1024),
		topologytest.OnError(topology.Processing, topology.Always(topology.DeadLetterIt)),
		topologytest.OnError(topology.Production, topology.Always(topology.DeadLetterIt)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	bills := topologytest.NewInputTopic(d, "bills", serde.Bytes, examples.BillSerde)
	huge := strings.Repeat("x", 2000)
	for i, b := range []examples.Bill{
		{BillID: "zero", Account: "acme", AmountCents: 0, TS: 1}, // refused by the totals: processing
		{BillID: huge, Account: "acme", AmountCents: 5, TS: 2},   // accepted record too large: production
		{BillID: "ok", Account: "acme", AmountCents: 7, TS: 3},
		{BillID: "zero", Account: "acme", AmountCents: 9, TS: 4}, // not a duplicate: "zero" was rolled back
	} {
		if err := bills.Pipe([]byte("acme"), b, int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	dead, _ := topologytest.NewOutputTopic(d, "dlq", serde.Bytes, serde.Bytes).ReadRecords()
	var classes []string
	for _, r := range dead {
		for _, h := range r.Headers {
			if h.Key == "sluice.error.class" {
				classes = append(classes, string(h.Value))
			}
		}
	}
	if strings.Join(classes, ",") != "processing,production" {
		t.Errorf("dead-letter classes %v", classes)
	}
	acc, _ := topologytest.NewOutputTopic(d, "accepted", serde.String, serde.JSON[examples.AcceptedBill]()).ReadRecords()
	if len(acc) != 2 || acc[0].Value.BillID != "ok" || acc[1].Value.BillID != "zero" {
		t.Errorf("accepted %+v", acc)
	}
	tot, _ := topologytest.ToMap(topologytest.NewOutputTopic(d, "totals", serde.String, serde.JSON[examples.Totals]()))
	if tot["acme"].Count != 2 || tot["acme"].SumCents != 16 {
		t.Errorf("totals %+v", tot["acme"])
	}
}
