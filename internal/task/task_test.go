package task

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// discard is a sender that drops records, counting them; benchmarks and
// task tests use it to drive a task with no broker.
type discard struct {
	n       int
	offsets int64
	keep    []*kgo.Record
}

func (d *discard) send(r *kgo.Record, promise func(*kgo.Record, error)) {
	d.n++
	if d.keep != nil {
		d.keep = append(d.keep, r)
	}
	if promise != nil {
		r.Offset = d.offsets
		d.offsets++
		promise(r, nil)
	}
}

// plan builds top.
func plan(tb testing.TB, top *topology.Topology) *exec.Plan {
	tb.Helper()
	built, err := top.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return exec.BuiltPlan(built)
}

// startTask opens and initialises the task of partition 0 of sub-topology
// sub, in a temporary state directory unless cfg names one; it is closed
// when the test ends.
func startTask(tb testing.TB, p *exec.Plan, sub int, cfg Config) *Task {
	tb.Helper()
	if cfg.StateDir == "" {
		cfg.StateDir = tb.TempDir()
	}
	t, err := New(ID{sub, 0}, p.Subs[sub], p, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { t.Close() })
	if err := t.Init(); err != nil {
		tb.Fatal(err)
	}
	return t
}

func wordcountTask(tb testing.TB, sub int, d *discard) *Task {
	tb.Helper()
	return startTask(tb, plan(tb, wordCount()), sub, Config{AppID: "bench", Send: d.send})
}

func TestTaskStagesUntilCommit(t *testing.T) {
	d := &discard{keep: []*kgo.Record{}}
	tk := wordcountTask(t, 1, d)
	rec := func(w string, off int64) *kgo.Record {
		return &kgo.Record{Topic: "bench-counts-repartition", Key: []byte(w), Value: []byte(w), Offset: off, Timestamp: time.UnixMilli(off)}
	}
	for i, w := range []string{"a", "b", "a"} {
		if err := tk.Process(rec(w, int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	eng := tk.engines["counts"]
	if _, ok, _ := eng.Get([]byte("a")); ok {
		t.Fatal("a staged write reached the engine before the commit")
	}
	tk.Flush()
	// The cache folds a's two updates: two changelog records, plus three
	// output updates.
	var changelog, out int
	for _, r := range d.keep {
		switch r.Topic {
		case "bench-counts-changelog":
			changelog++
		case "counts":
			out++
		}
	}
	if changelog != 2 || out != 3 {
		t.Fatalf("got %d changelog and %d output records, want 2 and 3", changelog, out)
	}
	if err := tk.Commit(); err != nil {
		t.Fatal(err)
	}
	if cp, _ := eng.Checkpoint(); cp != 1 {
		t.Errorf("checkpoint %d, want 1 (the last changelog offset)", cp)
	}
	if _, ok, _ := eng.Get([]byte("a")); !ok {
		t.Fatal("committed write missing from the engine")
	}
	// An aborted period leaves the engine and stream time as committed.
	if err := tk.Process(rec("c", 10)); err != nil {
		t.Fatal(err)
	}
	tk.Abort()
	if _, ok, _ := tk.stores["counts"].Get([]byte("c")); ok {
		t.Error("aborted write still visible")
	}
	if tk.streamTime != 2 {
		t.Errorf("stream time %d after abort, want 2", tk.streamTime)
	}
}

func TestDecodeErrorGoesToDeadLetter(t *testing.T) {
	d := &discard{keep: []*kgo.Record{}}
	tk := wordcountTask(t, 0, d)
	if err := tk.Process(&kgo.Record{Topic: "lines", Value: []byte{0xff, 0xfe}, Partition: 0, Offset: 7}); err != nil {
		t.Fatal(err)
	}
	if len(d.keep) != 1 || d.keep[0].Topic != "dlq" {
		t.Fatalf("got %v, want one dead-letter record", d.keep)
	}
	hs := map[string]string{}
	for _, h := range d.keep[0].Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs["sluice.source.offset"] != "7" || hs["sluice.error.class"] != "deserialization" {
		t.Errorf("headers %v", hs)
	}
}

// BenchmarkFusedStateless is one line through wordcount's first
// sub-topology: decode, split, re-key, encode to the repartition topic.
func BenchmarkFusedStateless(b *testing.B) {
	d := &discard{}
	tk := wordcountTask(b, 0, d)
	r := &kgo.Record{Topic: "lines", Value: []byte("the quick brown fox jumps over the lazy dog"), Timestamp: time.UnixMilli(1)}
	b.ReportAllocs()
	for b.Loop() {
		if err := tk.Process(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFusedCount is one word through wordcount's counting
// sub-topology on Pebble, with a commit every 1000 records.
func BenchmarkFusedCount(b *testing.B) {
	d := &discard{}
	tk := wordcountTask(b, 1, d)
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		w := []byte(fmt.Sprintf("w%d", i%300))
		recs[i] = &kgo.Record{Topic: "bench-counts-repartition", Key: w, Value: w, Timestamp: time.UnixMilli(int64(i))}
	}
	processCommitting(b, tk, recs)
}

// wordCount is the wordcount example's topology (the examples package
// depends on the runtime, so it cannot be imported here).
func wordCount() *topology.Topology {
	t := topology.New()
	lines := topology.From(t, "lines", serde.Bytes, serde.String, topology.DeadLetter("dlq"))
	words := topology.FlatMapValues(lines, func(l string) []string { return strings.Fields(strings.ToLower(l)) })
	counts := topology.Count(
		topology.GroupBy(words, func(_ []byte, w string) string { return w }, topology.Grouped("counts", serde.String, serde.String)),
		topology.Materialized("counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), "counts", serde.String, serde.Int64Text)
	return t
}

// BenchmarkFusedCountManyKeys is the count scenario of `sluice bench` as one
// of its 8 tasks sees it: keys drawn from 12,500, a commit every 6,250
// records, so most keys are read from the engine, not the stage.
func BenchmarkFusedCountManyKeys(b *testing.B) {
	d := &discard{}
	tk := wordcountTask(b, 1, d)
	recs := make([]*kgo.Record, 6_250)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range recs {
		w := []byte(fmt.Sprintf("%08d", r.IntN(12_500)))
		recs[i] = &kgo.Record{Topic: "bench-counts-repartition", Key: w, Value: w, Timestamp: time.UnixMilli(int64(i))}
	}
	processCommitting(b, tk, recs)
}

// BenchmarkFusedMapFilter is one record through the bench's stateless
// line: bytes in, MapValues, Filter, bytes out.
func BenchmarkFusedMapFilter(b *testing.B) {
	top := topology.New()
	s := topology.From(top, "in", serde.Bytes, serde.Bytes)
	s = topology.MapValues(s, func(v []byte) []byte { return v[:len(v)-1] })
	s = topology.Filter(s, func(k, _ []byte) bool { return len(k) > 0 })
	topology.To(s, "out", serde.Bytes, serde.Bytes)
	d := &discard{}
	tk := startTask(b, plan(b, top), 0, Config{AppID: "bench", Send: d.send})
	r := &kgo.Record{Topic: "in", Key: []byte("00012345"), Value: make([]byte, 100), Timestamp: time.UnixMilli(1)}
	b.ReportAllocs()
	for b.Loop() {
		if err := tk.Process(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFusedCountFromSource is the count scenario of `sluice bench` as
// one of its 8 tasks sees it, from its `From` source to its sink: keys drawn
// from 12,500, 100-byte values, a flush and commit every 12,500 records
// (what a 100 ms transaction holds at about a million records a second),
// with folded updates (the bench's exactly_once) and without (its
// at_least_once).
func BenchmarkFusedCountFromSource(b *testing.B) {
	for _, fold := range []bool{true, false} {
		b.Run("fold="+strconv.FormatBool(fold), func(b *testing.B) {
			top := topology.New()
			s := topology.From(top, "in", serde.String, serde.Bytes)
			c := topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.String, serde.Int64))
			topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
			d := &discard{}
			tk := startTask(b, plan(b, top), 0, Config{AppID: "bench", Send: d.send, FoldUpdates: fold})
			recs := make([]*kgo.Record, 12_500)
			r := rand.New(rand.NewPCG(1, 2))
			val := make([]byte, 100)
			for i := range recs {
				k := []byte(fmt.Sprintf("%08d", r.IntN(12_500)))
				recs[i] = &kgo.Record{Topic: "in", Key: k, Value: val, Timestamp: time.UnixMilli(int64(i))}
			}
			processCommitting(b, tk, recs)
		})
	}
}

// processCommitting processes recs over and over, flushing and committing
// after each round.
func processCommitting(b *testing.B, tk *Task, recs []*kgo.Record) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := tk.Process(recs[i%len(recs)]); err != nil {
			b.Fatal(err)
		}
		if i++; i%len(recs) == 0 {
			if err := tk.Flush(); err != nil {
				b.Fatal(err)
			}
			if err := tk.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
}
