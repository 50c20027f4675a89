package topologytest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// errorTopology reads int64 values (the bytes "bad" do not decode), keeps a
// per-key count in a store, fails on 13 (error) and 666 (panic), and writes
// strings whose serde rejects the value 7 (invalid UTF-8 on encode).
func errorTopology() (*topology.Topology, topology.Materialization[string, int64]) {
	tp := topology.New()
	st := topology.KeyValueStore("counts", serde.String, serde.Int64)
	in := topology.From(tp, "in", serde.String, serde.Int64Text)
	out := topology.Process(in, "check", func() topology.Processor[string, int64, string, string] { return &checker{st: st} }, st)
	topology.To(out, "out", serde.String, serde.String)
	return tp, st
}

type checker struct {
	st  topology.Materialization[string, int64]
	kv  *topology.KV[string, int64]
	ctx *topology.ProcessorContext[string, string]
}

func (c *checker) Init(ctx *topology.ProcessorContext[string, string]) error {
	c.ctx, c.kv = ctx, c.st.Open(ctx)
	return nil
}

func (c *checker) Process(r topology.Record[string, int64]) error {
	n, _, _ := c.kv.Get(r.Key)
	if err := c.kv.Put(r.Key, n+1); err != nil {
		return err
	}
	switch r.Value {
	case 13:
		return errors.New("unlucky")
	case 666:
		panic("the devil")
	case 99:
		// What a store read returns when its local copy is damaged
		// (processor/corrupt_test.go damages a real Pebble store).
		return fmt.Errorf("read counts: %w", &store.CorruptedError{Dir: "counts", Err: errors.New("checksum mismatch")})
	}
	v := fmt.Sprint(r.Value)
	if r.Value == 7 {
		v = "\xff" // String refuses to encode it: a production error in the sink
	}
	return c.ctx.Forward(topology.Record[string, string]{Key: r.Key, Value: v, Timestamp: r.Timestamp})
}

func (c *checker) Close() error { return nil }

// TestCorruptedStoreIgnoresThePolicy: a damaged store is not the record's
// fault, so no policy may drop or dead-letter the record: the task stops
// with the store's error, for the instance to wipe and restore the store
// and process the record again.
func TestCorruptedStoreIgnoresThePolicy(t *testing.T) {
	for _, action := range []topology.Action{topology.Fail, topology.Continue, topology.DeadLetterIt} {
		t.Run(action.String(), func(t *testing.T) {
			tp, st := errorTopology()
			d, err := topologytest.New(tp, topologytest.ApplicationID("app"), topologytest.OnError(topology.Processing, topology.Always(action)))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			in := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64Text)
			dlq := topologytest.NewOutputTopic(d, "app-dlq", serde.Bytes, serde.Bytes)
			kv, _ := topologytest.KeyValueStore(d, st)
			if err := in.Pipe("k", 1, 1); err != nil {
				t.Fatal(err)
			}
			if err := in.Pipe("k", 99, 2); !errors.Is(err, store.ErrCorrupted) {
				t.Fatalf("Pipe of a record whose store is damaged returned %v under %v, want store.ErrCorrupted", err, action)
			}
			if dead, _ := dlq.ReadRecords(); len(dead) != 0 {
				t.Errorf("dead letters under %v: %+v", action, dead)
			}
			if n, _, _ := kv.Get("k"); n != 1 {
				t.Errorf("store count %d, want 1 (the failed record's write rolled back)", n)
			}
		})
	}
}

func TestEveryErrorClassUnderEveryPolicy(t *testing.T) {
	type bad struct {
		name  string
		class topology.ErrorClass
		value []byte
	}
	for _, b := range []bad{
		{"undecodable", topology.Deserialization, []byte("bad")},
		{"error", topology.Processing, []byte("13")},
		{"panic", topology.Processing, []byte("666")},
		{"unencodable", topology.Production, []byte("7")},
	} {
		for _, action := range []topology.Action{topology.Fail, topology.Continue, topology.DeadLetterIt} {
			t.Run(b.name+"/"+action.String(), func(t *testing.T) {
				tp, st := errorTopology()
				d, err := topologytest.New(tp, topologytest.ApplicationID("app"), topologytest.OnError(b.class, topology.Always(action)))
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				in := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64Text)
				out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
				dlq := topologytest.NewOutputTopic(d, "app-dlq", serde.Bytes, serde.Bytes)
				kv, _ := topologytest.KeyValueStore(d, st)

				if err := in.Pipe("k", 1, 1); err != nil {
					t.Fatal(err)
				}
				err = in.PipeBytes([]byte("k"), b.value, 2)
				if (action == topology.Fail) != (err != nil) {
					t.Fatalf("Pipe returned %v under %v", err, action)
				}
				if err := in.Pipe("k", 2, 3); err != nil {
					t.Fatal(err)
				}
				// The bad record left no trace: one count per good record, and
				// only their outputs.
				if n, _, _ := kv.Get("k"); n != 2 {
					t.Errorf("store count %d, want 2 (the bad record's write rolled back)", n)
				}
				rs, _ := out.ReadRecords()
				if len(rs) != 2 || rs[0].Value != "1" || rs[1].Value != "2" {
					t.Errorf("outputs %+v", rs)
				}
				dead, _ := dlq.ReadRecords()
				if action != topology.DeadLetterIt {
					if len(dead) != 0 {
						t.Errorf("dead letters under %v: %+v", action, dead)
					}
					return
				}
				if len(dead) != 1 || string(dead[0].Key) != "k" || string(dead[0].Value) != string(b.value) {
					t.Fatalf("dead letters %+v, want the original record once", dead)
				}
				hs := map[string]string{}
				for _, h := range dead[0].Headers {
					hs[h.Key] = string(h.Value)
				}
				if hs["sluice.error.class"] != string(b.class) || hs["sluice.source.topic"] != "in" || hs["sluice.source.offset"] != "1" || hs["sluice.error.message"] == "" {
					t.Errorf("headers %v", hs)
				}
			})
		}
	}
}

func TestDeserializationDefaultsToDeadLetterAndNodesOverride(t *testing.T) {
	tp := topology.New()
	var seen []topology.ErrorContext
	in := topology.From(tp, "in", serde.String, serde.Int64Text, topology.DeadLetter("in-dlq"))
	m := topology.MapValues(in, func(v int64) int64 {
		if v == 0 {
			panic("division by zero")
		}
		return 100 / v
	})
	m = topology.OnError(m, func(ec topology.ErrorContext) topology.Action {
		seen = append(seen, ec)
		return topology.Continue
	})
	topology.To(m, "out", serde.String, serde.Int64Text)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	input := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64Text)
	if err := input.PipeBytes([]byte("k"), []byte("x"), 1); err != nil {
		t.Fatalf("an undecodable record stopped the driver: %v", err)
	}
	if err := input.Pipe("k", 0, 2); err != nil {
		t.Fatalf("the operator's own handler did not apply: %v", err)
	}
	if err := input.Pipe("k", 4, 3); err != nil {
		t.Fatal(err)
	}
	if dead, _ := topologytest.NewOutputTopic(d, "in-dlq", serde.Bytes, serde.Bytes).ReadRecords(); len(dead) != 1 {
		t.Errorf("source dead-letter topic got %d records, want 1", len(dead))
	}
	if len(seen) != 1 || seen[0].Class != topology.Processing || seen[0].Offset != 1 {
		t.Errorf("handler saw %+v", seen)
	}
	if rs, _ := topologytest.NewOutputTopic(d, "out", serde.String, serde.Int64Text).ReadRecords(); len(rs) != 1 || rs[0].Value != 25 {
		t.Errorf("outputs %+v", rs)
	}
}

// TestCausesAreReachable: the causes sluice finds itself are exported by
// topology, so a handler (or the caller of Run) can tell them apart with
// errors.Is.
func TestCausesAreReachable(t *testing.T) {
	var seen []topology.ErrorContext
	record := func(ec topology.ErrorContext) topology.Action {
		seen = append(seen, ec)
		return topology.Continue
	}
	tp, _ := errorTopology()
	d, err := topologytest.New(tp, topologytest.MaxRecordBytes(64),
		topologytest.OnError(topology.Deserialization, record), topologytest.OnError(topology.Production, record))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64Text)
	if err := in.Pipe("k", 1, -1); err != nil { // a negative timestamp
		t.Fatal(err)
	}
	if err := in.Pipe(strings.Repeat("k", 100), 1, 1); err != nil { // its output is over 64 bytes
		t.Fatal(err)
	}
	if len(seen) != 2 {
		t.Fatalf("handled %d failures, want 2: %+v", len(seen), seen)
	}
	if seen[0].Class != topology.Deserialization || !errors.Is(seen[0].Err, topology.ErrInvalidTimestamp) {
		t.Errorf("negative timestamp: %s %v, want a deserialization error matching topology.ErrInvalidTimestamp", seen[0].Class, seen[0].Err)
	}
	if seen[1].Class != topology.Production || !errors.Is(seen[1].Err, topology.ErrRecordTooLarge) {
		t.Errorf("oversized output: %s %v, want a production error matching topology.ErrRecordTooLarge", seen[1].Class, seen[1].Err)
	}
}
