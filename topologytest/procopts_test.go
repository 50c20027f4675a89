package topologytest_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestProcessorOptionsRunBillingAsSluiceRunDoes: the driver takes the
// processor options the billing example runs with (its registry entry's,
// as `sluice run billing` passes them) and dead-letters exactly what the
// driver's own (deprecated) options do: both classes, the same records.
func TestProcessorOptionsRunBillingAsSluiceRunDoes(t *testing.T) {
	e, err := examples.Get("billing")
	if err != nil {
		t.Fatal(err)
	}
	params := e.Defaults(nil)
	run := func(opts ...topologytest.Option) []*kgo.Record {
		d, err := topologytest.New(e.Build(params), opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		bills := topologytest.NewInputTopic(d, params["input"], serde.Bytes, examples.BillSerde)
		for i, b := range []examples.Bill{
			{BillID: "zero", Account: "acme", AmountCents: 0, TS: 1},                    // processing
			{BillID: strings.Repeat("x", 2000), Account: "acme", AmountCents: 5, TS: 2}, // production
			{BillID: "ok", Account: "acme", AmountCents: 7, TS: 3},
		} {
			if err := bills.Pipe([]byte("acme"), b, int64(i)); err != nil {
				t.Fatal(err)
			}
		}
		return topologytest.Outputs(d)[params["dlq"]]
	}
	got := run(topologytest.Processor(append(e.Options(params), processor.MaxRecordBytes(1024))...))
	want := run(topologytest.DeadLetterTopic(params["dlq"]), topologytest.MaxRecordBytes(1024),
		topologytest.OnError(topology.Processing, topology.Always(topology.DeadLetterIt)),
		topologytest.OnError(topology.Production, topology.Always(topology.DeadLetterIt)))
	if len(want) != 2 {
		t.Fatalf("the deprecated options dead-lettered %d records, want 2", len(want))
	}
	if len(got) != len(want) {
		t.Fatalf("%d dead letters, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i].Key, want[i].Key) || !bytes.Equal(got[i].Value, want[i].Value) || !reflect.DeepEqual(got[i].Headers, want[i].Headers) {
			t.Errorf("dead letter %d: %q %q %v, want %q %q %v", i, got[i].Key, got[i].Value, got[i].Headers, want[i].Key, want[i].Value, want[i].Headers)
		}
	}
}

// TestProcessorOptionsWithoutMeaningAreRefused: options that need a
// cluster make New fail instead of being dropped silently.
func TestProcessorOptionsWithoutMeaningAreRefused(t *testing.T) {
	for name, o := range map[string]processor.Opt{
		"Brokers":        processor.Brokers("k:9092"),
		"StateDir":       processor.StateDir(t.TempDir()),
		"CommitInterval": processor.CommitInterval(time.Second),
		"InstanceID":     processor.InstanceID("i"),
	} {
		_, err := topologytest.New(examples.WordCount("lines", "counts", "dlq"),
			topologytest.Processor(processor.ApplicationID("x"), o))
		if err == nil || !strings.Contains(err.Error(), "no meaning without a cluster") {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	d, err := topologytest.New(examples.WordCount("lines", "counts", "dlq"),
		topologytest.Processor(processor.ApplicationID("x"), processor.FoldUpdates(true), processor.IdleTimeout(time.Second)))
	if err != nil {
		t.Fatalf("options with a meaning: %v", err)
	}
	d.Close()
}
