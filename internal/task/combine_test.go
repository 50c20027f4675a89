package task

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// countTopology counts the words of "in"'s lines (words of every length
// and UUIDs, one a line) through the repartition topic
// app-words-repartition into the store "counts", and writes the counts to
// "out". The grouping panics on the word "poison", so that a line fails
// after its earlier words reached the repartition sink, and its unit is
// undone.
func countTopology() *topology.Topology {
	top := topology.New()
	lines := topology.From(top, "in", serde.Bytes, serde.String)
	words := topology.FlatMapValues(lines, func(l string) []string { return strings.Split(l, "\n") })
	g := topology.GroupBy(words, func(_ []byte, w string) string {
		if w == "poison" {
			panic("poison")
		}
		return w
	}, topology.Grouped("words", serde.String, serde.String))
	c := topology.Count(g, topology.Materialized("counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
	return top
}

// countLines are n lines of 1 to 6 words, drawn from keys of every length
// and UUIDs with a few hot ones; one line in 40 has "poison" after its
// first word.
func countLines(n int, seed uint64) []*kgo.Record {
	rng := rand.New(rand.NewPCG(seed, 11))
	keys := testkeys.All()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		var ws []string
		for range 1 + rng.IntN(6) {
			k := keys[rng.IntN(len(keys))]
			if rng.IntN(3) == 0 {
				k = keys[rng.IntN(4)] // hot
			}
			ws = append(ws, k)
		}
		if rng.IntN(40) == 0 {
			ws = slices.Insert(ws, 1, "poison")
		}
		recs[i] = &kgo.Record{Topic: "in", Value: []byte(strings.Join(ws, "\n")), Offset: int64(i), Timestamp: time.UnixMilli(int64(1000 + i))}
	}
	return recs
}

// countRun is what runCount saw: per transaction, the outputs and the
// changelog records (each sorted), the failures, the counts store's
// engine after each commit, and the records the repartition topic got
// and the combiners saved.
type countRun struct {
	out, log, actions, engines []string
	repartitioned, saved       int64
	combinedCounts             int // repartition records standing for more than one
}

// runCount runs recs through countTopology's two tasks, committing every
// `every` lines: the counting task processes what the first task wrote to
// the repartition topic within the transaction. A transaction numbered in
// abort (by its first line) aborts once, after its flush or, if odd,
// before it, and runs again. combine says whether the repartition sink
// combines; fault, if set, replaces its combiner.
func runCount(t *testing.T, recs []*kgo.Record, every int, abort map[int]bool, combine bool, fault func(combining) combining) countRun {
	t.Helper()
	p := planOf(t, countTopology(), false, func(p *exec.Plan) {
		for _, sub := range p.Subs {
			for _, n := range sub.Nodes {
				n.Combine = n.Combine && combine
			}
		}
	})
	var run countRun
	d := &discard{keep: []*kgo.Record{}}
	cfg := Config{
		AppID: "app", Send: d.send, FoldUpdates: true, DeadLetter: "dlq",
		Errors: map[exec.ErrorClass]exec.ErrorHandler{exec.Processing: func(exec.ErrorContext) exec.Action { return exec.DeadLetter }},
		OnAction: func(ec exec.ErrorContext, a exec.Action) {
			run.actions = append(run.actions, fmt.Sprintf("%s in %s at %d: %s (%v)", ec.Class, ec.Node, ec.Offset, a, ec.Err))
		},
	}
	up, down := startTask(t, p, 0, cfg), startTask(t, p, 1, cfg)
	if len(up.combiners) != map[bool]int{true: 1, false: 0}[combine] {
		t.Fatalf("combine=%v: the task has %d combining sinks", combine, len(up.combiners))
	}
	if fault != nil {
		up.combiners[0].comb = fault(up.combiners[0].comb)
	}
	var repOffset int64
	// deliver has the counting task process what was sent to the
	// repartition topic since from.
	deliver := func(from int) {
		for _, r := range d.keep[from:] {
			if r.Topic != "app-words-repartition" {
				continue
			}
			c := &kgo.Record{Topic: r.Topic, Key: slices.Clone(r.Key), Value: slices.Clone(r.Value), Timestamp: r.Timestamp, Offset: repOffset}
			for _, h := range r.Headers {
				c.Headers = append(c.Headers, kgo.RecordHeader{Key: h.Key, Value: slices.Clone(h.Value)})
			}
			repOffset++
			if err := down.Process(c); err != nil {
				t.Fatal(err)
			}
		}
	}
	aborted := map[int]bool{}
	start, actionsAt, repAt := 0, 0, repOffset
	for i := 0; i < len(recs); i++ {
		sent := len(d.keep)
		if err := up.Process(recs[i]); err != nil {
			t.Fatal(err)
		}
		deliver(sent)
		if (i+1)%every != 0 && i != len(recs)-1 {
			continue
		}
		aborts := abort[start] && !aborted[start]
		if !aborts || start%2 == 0 { // an odd transaction aborts before its flush
			sent := len(d.keep)
			if err := up.Flush(); err != nil {
				t.Fatal(err)
			}
			deliver(sent)
			if err := down.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if aborts {
			aborted[start] = true
			up.Abort()
			down.Abort()
			d.keep, run.actions, i, repOffset = d.keep[:0], run.actions[:actionsAt], start-1, repAt
			continue
		}
		for _, tk := range []*Task{up, down} {
			if err := tk.Commit(); err != nil {
				t.Fatal(err)
			}
			run.saved += tk.TakeSaved()
		}
		var out, log []string
		for _, r := range d.keep {
			switch {
			case strings.HasSuffix(r.Topic, "-changelog"):
				log = append(log, fmt.Sprintf("%s %x=%x", r.Topic, r.Key, r.Value))
			case r.Topic == "app-words-repartition":
				run.repartitioned++
				for _, h := range r.Headers {
					if h.Key == exec.HeaderCount && binary.BigEndian.Uint64(h.Value) > 1 {
						run.combinedCounts++
					}
				}
			default:
				out = append(out, describe([]*kgo.Record{r})...)
			}
		}
		slices.Sort(out)
		slices.Sort(log)
		run.out, run.log = append(run.out, out...), append(run.log, log...)
		run.engines = append(run.engines, fmt.Sprintf("counts after %d: %v", i, engineDump(t, down, "counts")))
		d.keep, start, actionsAt, repAt = d.keep[:0], i+1, len(run.actions), repOffset
	}
	return run
}

func diffCount(a, b countRun) string {
	return diffHeld(heldRun{out: a.out, log: a.log, actions: a.actions, engines: a.engines},
		heldRun{out: b.out, log: b.log, actions: b.actions, engines: b.engines})
}

// countCases are the commit cadences and aborts the comparison runs: a
// line a transaction, a few, many, and all in one, with aborts before and
// after the flush.
var countCases = []struct {
	every int
	abort []int
}{{1, []int{3, 10}}, {7, []int{14, 35, 63}}, {60, []int{60, 180}}, {250, []int{250, 500}}, {1500, []int{0}}}

// TestCombinedCountsMatchUncombined: a count whose repartition sink
// combines gives, transaction by transaction, the outputs, changelog
// records, failures and store contents of one whose sink does not, for
// words of every length and UUIDs, lines that fail half-way, and aborts
// before and after the flush; with fewer repartition records, the saved
// ones counted.
func TestCombinedCountsMatchUncombined(t *testing.T) {
	recs := countLines(1500, 5)
	for _, c := range countCases {
		t.Run(fmt.Sprintf("every=%d", c.every), func(t *testing.T) {
			abort := map[int]bool{}
			for _, a := range c.abort {
				abort[a] = true
			}
			want := runCount(t, recs, c.every, abort, false, nil)
			got := runCount(t, recs, c.every, abort, true, nil)
			if len(want.actions) == 0 || len(want.out) == 0 {
				t.Fatalf("weak input: %d failures, %d outputs", len(want.actions), len(want.out))
			}
			if d := diffCount(want, got); d != "" {
				t.Fatal(d)
			}
			if want.saved != 0 || want.combinedCounts != 0 {
				t.Fatalf("without combining: %d saved, %d combined records", want.saved, want.combinedCounts)
			}
			if got.repartitioned+got.saved != want.repartitioned {
				t.Errorf("combined: %d repartition records and %d saved, want %d in all", got.repartitioned, got.saved, want.repartitioned)
			}
			if c.every > 1 && (got.combinedCounts == 0 || got.repartitioned >= want.repartitioned) {
				t.Errorf("combined: %d repartition records (%d standing for several), uncombined %d: nothing combined", got.repartitioned, got.combinedCounts, want.repartitioned)
			}
		})
	}
}

// Faulty combiners, for the comparison's negative control.
type (
	// keepsUndone: a line that fails leaves its earlier words counted.
	keepsUndone struct{ combining }
	// keepsAborted: an abort leaves the transaction's words to the next.
	keepsAborted struct{ combining }
	// losesWeight: a combined record goes out without its count.
	losesWeight struct{ combining }
)

func (keepsUndone) Rollback() {}
func (keepsAborted) drop()    {}
func (f losesWeight) take(send func(e *combined) error) (int64, error) {
	return f.combining.take(func(e *combined) error {
		e.n = 1
		return send(e)
	})
}

// TestCombinedCountsNegativeControl: each fault of a combiner makes the
// comparison fail.
func TestCombinedCountsNegativeControl(t *testing.T) {
	recs := countLines(600, 5)
	abort := map[int]bool{14: true, 35: true} // after the flush, and before it
	want := runCount(t, recs, 7, abort, false, nil)
	for name, fault := range map[string]func(combining) combining{
		"rollback that does not undo": func(c combining) combining { return keepsUndone{c} },
		"abort that keeps":            func(c combining) combining { return keepsAborted{c} },
		"count left off":              func(c combining) combining { return losesWeight{c} },
	} {
		t.Run(name, func(t *testing.T) {
			got := runCount(t, recs, 7, abort, true, fault)
			if diffCount(want, got) == "" {
				t.Error("the comparison did not see the fault")
			}
		})
	}
}

// TestCommitRefusesCombinedRecords: a commit without the flush that writes
// the combined records fails, rather than lose them.
func TestCommitRefusesCombinedRecords(t *testing.T) {
	p := plan(t, countTopology())
	tk := startTask(t, p, 0, Config{AppID: "app", Send: (&discard{}).send, FoldUpdates: true})
	if err := tk.Process(&kgo.Record{Topic: "in", Value: []byte("a\nb\na"), Timestamp: time.UnixMilli(1)}); err != nil {
		t.Fatal(err)
	}
	if err := tk.Commit(); !errors.Is(err, store.ErrUnflushed) {
		t.Fatalf("commit with combined records held: %v, want ErrUnflushed", err)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := tk.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := tk.TakeSaved(); n != 1 {
		t.Fatalf("saved %d records, want 1 (three words, two keys)", n)
	}
}

// TestCombiningOnlyWhereUpdatesFold: a task combines only with
// FoldUpdates, and not in a plan that uses event time.
func TestCombiningOnlyWhereUpdatesFold(t *testing.T) {
	eventTime := countTopology()
	topology.CountWindows(topology.WindowedBy(topology.GroupByKey(topology.From(eventTime, "other", serde.String, serde.String)), window.Tumbling(time.Minute)),
		topology.Materialized("windowed", serde.String, serde.Int64))
	for _, c := range []struct {
		name string
		top  *topology.Topology
		fold bool
		want int
	}{{"fold", countTopology(), true, 1}, {"no fold", countTopology(), false, 0}, {"event time", eventTime, true, 0}} {
		tk := startTask(t, plan(t, c.top), 0, Config{AppID: "app", Send: (&discard{}).send, FoldUpdates: c.fold})
		if len(tk.combiners) != c.want {
			t.Errorf("%s: %d combining sinks, want %d", c.name, len(tk.combiners), c.want)
		}
	}
}

// TestCountWeights: the counting task adds a record's HeaderCount, takes
// the header off its output, and refuses a malformed one as the record's
// error; an aggregation that is not a count refuses a record standing for
// several.
func TestCountWeights(t *testing.T) {
	rec := func(key string, hs ...kgo.RecordHeader) *kgo.Record {
		return &kgo.Record{Topic: "app-words-repartition", Key: []byte(key), Value: []byte(key), Timestamp: time.UnixMilli(1), Headers: hs}
	}
	weight := func(n uint64) kgo.RecordHeader {
		return kgo.RecordHeader{Key: exec.HeaderCount, Value: binary.BigEndian.AppendUint64(nil, n)}
	}
	d := &discard{keep: []*kgo.Record{}}
	tk := startTask(t, plan(t, countTopology()), 1, Config{AppID: "app", Send: d.send})
	for _, r := range []*kgo.Record{rec("a", weight(5)), rec("a"), rec("b", kgo.RecordHeader{Key: "h", Value: []byte("x")}, weight(2))} {
		if err := tk.Process(r); err != nil {
			t.Fatal(err)
		}
	}
	got := outputs(d)
	if want := []string{"a=5", "a=6", "b=2"}; !slices.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for _, bad := range []kgo.RecordHeader{{Key: exec.HeaderCount, Value: []byte{1}}, weight(0), weight(1 << 63)} {
		if err := tk.Process(rec("c", bad)); err == nil || !strings.Contains(err.Error(), exec.HeaderCount) {
			t.Errorf("header %x: %v, want an error naming the header", bad.Value, err)
		}
	}
	if got := outputs(d); len(got) != 0 {
		t.Errorf("malformed counts forwarded %v", got)
	}

	// Headers: only the count's is taken off.
	if err := tk.Process(rec("b", kgo.RecordHeader{Key: "h", Value: []byte("x")}, weight(2))); err != nil {
		t.Fatal(err)
	}
	outs := 0
	for _, r := range d.keep {
		if r.Topic == "out" {
			outs++
			if len(r.Headers) != 1 || r.Headers[0].Key != "h" {
				t.Errorf("output headers %v, want h alone", r.Headers)
			}
		}
	}
	if outs != 1 {
		t.Errorf("%d outputs of the count, want 1", outs)
	}

	agg := topology.New()
	words := topology.GroupBy(topology.From(agg, "in", serde.Bytes, serde.String), func(_ []byte, w string) string { return w },
		topology.Grouped("words", serde.String, serde.String))
	topology.Aggregate(words, func() string { return "" }, func(_, w, a string) string { return a + w }, topology.Materialized("cat", serde.String, serde.String))
	at := startTask(t, plan(t, agg), 1, Config{AppID: "app", Send: d.send})
	if err := at.Process(rec("a", weight(2))); err == nil || !strings.Contains(err.Error(), "not a count") {
		t.Errorf("an aggregate took a record standing for 2: %v", err)
	}
	if err := at.Process(rec("a", weight(1))); err != nil {
		t.Errorf("an aggregate refused a record standing for itself: %v", err)
	}
}

// TestCombinedRecordStaysUnderTheLimit: a record that would make its key's
// combined record too large — the value of the key's first record with
// this one's headers, though the record alone is small enough — is
// refused as its own error, dead-lettered here, and the flush writes what
// was combined before it.
func TestCombinedRecordStaysUnderTheLimit(t *testing.T) {
	top := topology.New()
	lines := topology.From(top, "in", serde.Bytes, serde.String)
	byFirst := topology.GroupBy(lines, func(_ []byte, l string) string { w, _, _ := strings.Cut(l, " "); return w },
		topology.Grouped("words", serde.String, serde.String))
	topology.To(topology.ToStream(topology.Count(byFirst, topology.Materialized("counts", serde.String, serde.Int64))), "out", serde.String, serde.Int64Text)
	d := &discard{keep: []*kgo.Record{}}
	var actions []string
	tk := startTask(t, plan(t, top), 0, Config{
		AppID: "app", Send: d.send, FoldUpdates: true, DeadLetter: "dlq", MaxRecordBytes: 200,
		Errors: map[exec.ErrorClass]exec.ErrorHandler{exec.Production: func(exec.ErrorContext) exec.Action { return exec.DeadLetter }},
		OnAction: func(ec exec.ErrorContext, a exec.Action) {
			actions = append(actions, fmt.Sprintf("%s %s: %v", ec.Class, a, ec.Err))
		},
	})
	// Key "w". Alone, with its count, each record is at most 121 bytes;
	// combined, the third makes 1+100+61+20 = 182 (the first's value, its
	// own headers), the fourth would make 1+100+81+20 = 202.
	for i, r := range []struct {
		line string
		hs   []kgo.RecordHeader
	}{{"w " + strings.Repeat("x", 98), nil}, {"w", nil}, {"w", []kgo.RecordHeader{{Key: "h", Value: make([]byte, 60)}}}, {"w", []kgo.RecordHeader{{Key: "h", Value: make([]byte, 80)}}}} {
		if err := tk.Process(&kgo.Record{Topic: "in", Value: []byte(r.line), Offset: int64(i), Timestamp: time.UnixMilli(1), Headers: r.hs}); err != nil {
			t.Fatal(err)
		}
	}
	if len(actions) != 1 || !strings.Contains(actions[0], "record too large") {
		t.Fatalf("actions %q, want the fourth record refused as too large", actions)
	}
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range d.keep {
		if r.Topic == "app-words-repartition" {
			got = append(got, describe([]*kgo.Record{r})...)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0], exec.HeaderCount+"=\x00\x00\x00\x00\x00\x00\x00\x03") {
		t.Fatalf("repartition records %q, want one standing for the first three", got)
	}
	if err := tk.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestInputCountHeaderIsNotAWeight: a sluice.count header that came with
// an input record is not taken for the combining sink's, combined or not.
func TestInputCountHeaderIsNotAWeight(t *testing.T) {
	for _, fold := range []bool{true, false} {
		d := &discard{keep: []*kgo.Record{}}
		up := startTask(t, plan(t, countTopology()), 0, Config{AppID: "app", Send: d.send, FoldUpdates: fold})
		forged := []kgo.RecordHeader{{Key: exec.HeaderCount, Value: binary.BigEndian.AppendUint64(nil, 1000)}, {Key: "h", Value: []byte("x")}, {Key: exec.HeaderCount, Value: []byte{9}}}
		if err := up.Process(&kgo.Record{Topic: "in", Value: []byte("a\na"), Timestamp: time.UnixMilli(1), Headers: forged}); err != nil {
			t.Fatal(err)
		}
		if err := up.Flush(); err != nil {
			t.Fatal(err)
		}
		down := startTask(t, plan(t, countTopology()), 1, Config{AppID: "app", Send: d.send, FoldUpdates: fold})
		for _, r := range slices.Clone(d.keep) {
			if r.Topic == "app-words-repartition" {
				if err := down.Process(r); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := down.Flush(); err != nil {
			t.Fatal(err)
		}
		var last string
		for _, r := range d.keep {
			if r.Topic == "out" {
				last = string(r.Value)
			}
		}
		if last != "2" {
			t.Errorf("fold=%v: count %q, want 2", fold, last)
		}
	}
}
