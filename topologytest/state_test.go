package topologytest_test

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// setter sets the record's key to the record's value in a value state; the
// value "-" only passes time.
type setter struct {
	spec topology.ValueSpec[string, string]
	v    *topology.KeyedValue[string, string]
}

func (s *setter) Init(ctx *topology.ProcessorContext[string, string]) error {
	s.v = s.spec.Open(ctx)
	return nil
}

func (s *setter) Process(r topology.Record[string, string]) error {
	if r.Value == "-" {
		return nil
	}
	return s.v.Set(r.Key, r.Value)
}

func (s *setter) Close() error { return nil }

func TestKeyedState(t *testing.T) {
	spec := topology.ValueState("last", serde.String, serde.String, topology.StateTTL(100*time.Millisecond))
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	topology.Process(in, "p", func() topology.Processor[string, string, string, string] { return &setter{spec: spec} }, spec)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	if _, err := topologytest.KeyedState(d, topology.ValueState("nope", serde.String, serde.String)); err == nil || !strings.Contains(err.Error(), `no store "nope"`) {
		t.Errorf("an unknown state: %v", err)
	}
	last, err := topologytest.KeyedState(d, spec)
	if err != nil {
		t.Fatal(err)
	}
	pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.String)
	get := func(k string) string {
		t.Helper()
		v, ok, err := last.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "<none>"
		}
		return v
	}
	for _, s := range []struct {
		key, value string
		ts         int64
		want       string // k's value as the view reads it afterwards
	}{
		{"k", "a", 1000, "a"},
		{"j", "b", 1099, "a"}, // the clock at 1099: k is live until 1100
		// The task's stream time is 1100, but the state was not touched:
		// its clock, which the view goes by, is still 1099.
		{"x", "-", 1100, "a"},
		{"j", "c", 1100, "<none>"}, // the clock at 1100: k expired
	} {
		if err := pipe.Pipe(s.key, s.value, s.ts); err != nil {
			t.Fatal(err)
		}
		if got := get("k"); got != s.want {
			t.Errorf("after %s=%s @%d: k is %s, want %s", s.key, s.value, s.ts, got, s.want)
		}
	}
	if got := get("j"); got != "c" {
		t.Errorf("j is %s, want c", got)
	}
	// The view did not delete the expired entry it read.
	raw, err := topologytest.KeyValueStore(d, topology.KeyValueStore("last", serde.Bytes, serde.Bytes))
	if err != nil {
		t.Fatal(err)
	}
	want := append(binary.BigEndian.AppendUint64([]byte{2}, 1000), 'a') // timed, written at 1000
	if b, ok, err := raw.Get([]byte("vk")); err != nil || !ok || string(b) != string(want) {
		t.Errorf("k's stored entry: %q, %t, %v; want %q, kept", b, ok, err, want)
	}
}
