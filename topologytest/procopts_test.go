package topologytest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topologytest"
)

// TestProcessorOptionsRunBillingAsSluiceRunDoes: the driver takes the
// processor options the billing example runs with (its registry entry's,
// as `sluice run billing` passes them) and dead-letters as the App does.
func TestProcessorOptionsRunBillingAsSluiceRunDoes(t *testing.T) {
	e, err := examples.Get("billing")
	if err != nil {
		t.Fatal(err)
	}
	params := e.Defaults(nil)
	opts := append(e.Options(params), processor.MaxRecordBytes(1024), processor.ApplicationID("billing"))
	d, err := topologytest.New(e.Build(params), topologytest.Processor(opts...))
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
	dead, _ := topologytest.NewOutputTopic(d, params["dlq"], serde.Bytes, serde.Bytes).ReadRecords()
	var classes []string
	for _, r := range dead {
		for _, h := range r.Headers {
			if h.Key == "sluice.error.class" {
				classes = append(classes, string(h.Value))
			}
		}
	}
	if strings.Join(classes, ",") != "processing,production" {
		t.Errorf("dead-letter classes %v, want processing,production", classes)
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
