package task

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// chainTopology puts every operator that takes part in typed chains after
// a source, with a node of two children, an erased node (Branch) and a
// repartition, so that chains end at sinks and at erased nodes. Records go
// wrong on the way: "x" does not decode, 13 panics in Map, and 21 becomes
// a value its sink's serde refuses.
func chainTopology() *topology.Topology {
	t := topology.New()
	refusing := serde.Funcs(func(s string) ([]byte, error) {
		if s == "refuse" {
			return nil, errors.New("refused")
		}
		return []byte(s), nil
	}, func(b []byte) (string, error) { return string(b), nil })
	s := topology.From(t, "in", serde.String, serde.Int64Text, topology.DeadLetter("dlq"))
	s = topology.Peek(s, func(string, int64) {})
	s = topology.Filter(s, func(_ string, v int64) bool { return v%5 != 0 })
	s = topology.Map(s, func(k string, v int64) (string, int64) {
		if v == 13 {
			panic("thirteen")
		}
		return k + "!", v * 2
	})
	s = topology.FlatMapValues(s, func(v int64) []int64 { return []int64{v, v + 1} })
	s = topology.SelectKey(s, func(k string, v int64) string { return k + strconv.FormatInt(v%3, 10) })
	text := topology.MapValues(s, func(v int64) string {
		if v == 42 {
			return "refuse"
		}
		return strconv.FormatInt(v, 10)
	})
	topology.To(text, "out", serde.String, refusing)
	topology.To(topology.MapValues(text, func(v string) int64 { return int64(len(v)) }), "lens", serde.String, serde.Int64Text)
	branches := topology.Branch(s, func(_ string, v int64) bool { return v%2 == 0 })
	topology.To(topology.Filter(branches[0], func(string, int64) bool { return true }), "even", serde.String, serde.Int64Text)
	topology.Repartition(topology.FlatMap(s, func(k string, v int64) []topology.KeyValue[int64, string] {
		return []topology.KeyValue[int64, string]{{Key: v, Value: k}}
	}), "byvalue", serde.Int64, serde.String)
	return t
}

type chainRun struct {
	out     []string // every record produced, as text
	actions []string // every failed record: class, node kind, offset
	direct  bool     // the source's typed chain was linked
	// linked are the topics whose sources' typed chains were linked
	// (runPlan).
	linked map[string]bool
}

// runChain runs records through sub-topology 0 of chainTopology; erased
// takes the typed chains out of the plan first.
func runChain(t *testing.T, erased bool, recs []*kgo.Record) chainRun {
	t.Helper()
	p := plan(t, chainTopology())
	if erased {
		for _, n := range p.Subs[0].Nodes {
			n.Typed = nil
		}
	}
	var run chainRun
	d := &discard{keep: []*kgo.Record{}}
	deadLetter := func(exec.ErrorContext) exec.Action { return exec.DeadLetter }
	tk := startTask(t, p, 0, Config{
		AppID: "app", Send: d.send,
		Errors: map[exec.ErrorClass]exec.ErrorHandler{exec.Processing: deadLetter, exec.Production: deadLetter},
		OnAction: func(ec exec.ErrorContext, a exec.Action) {
			kind, _, _ := strings.Cut(ec.Node, "-")
			run.actions = append(run.actions, fmt.Sprintf("%s in %s at %d: %s (%v)", ec.Class, kind, ec.Offset, a, ec.Err))
		},
	})
	run.direct = tk.sources["in"].direct != nil
	for _, r := range recs {
		if err := tk.Process(r); err != nil {
			t.Fatal(err)
		}
	}
	run.out = describe(d.keep)
	return run
}

// describe renders records as text: topic, key, value (null for a
// tombstone), timestamp and headers (but error messages); changelog records
// are left out, as the stores' business.
func describe(recs []*kgo.Record) []string {
	var out []string
	for _, r := range recs {
		if strings.HasSuffix(r.Topic, "-changelog") {
			continue
		}
		var hs []string
		for _, h := range r.Headers {
			if !strings.HasPrefix(h.Key, "sluice.error.message") {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
		}
		value := strconv.Quote(string(r.Value))
		if r.Value == nil {
			value = "null"
		}
		out = append(out, fmt.Sprintf("%s %q=%s @%d %v", r.Topic, r.Key, value, r.Timestamp.UnixMilli(), hs))
	}
	return out
}

// TestTypedChainsMatchTheErasedPath: a task that runs its records through
// typed chains produces what the erased path produces, record for record,
// and blames the same failures on the same nodes with the same classes.
func TestTypedChainsMatchTheErasedPath(t *testing.T) {
	var recs []*kgo.Record
	for i, v := range []string{"1", "2", "5", "x", "13", "7", "21", "30", "8"} {
		recs = append(recs, &kgo.Record{
			Topic: "in", Key: []byte("k" + strconv.Itoa(i%3)), Value: []byte(v), Offset: int64(i),
			Timestamp: time.UnixMilli(int64(1000 + i)), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(v)}},
		})
	}
	typed, erased := runChain(t, false, recs), runChain(t, true, recs)
	if !typed.direct || erased.direct {
		t.Fatalf("typed chain linked: %v with the chains, %v without", typed.direct, erased.direct)
	}
	if !slices.Equal(typed.out, erased.out) {
		t.Errorf("typed chains produced\n%s\nthe erased path\n%s", strings.Join(typed.out, "\n"), strings.Join(erased.out, "\n"))
	}
	if !slices.Equal(typed.actions, erased.actions) {
		t.Errorf("typed chains failed\n%s\nthe erased path\n%s", strings.Join(typed.actions, "\n"), strings.Join(erased.actions, "\n"))
	}
	want := []string{
		`deserialization in SOURCE at 3: dead-letter (value: serde: cannot decode`,
		`processing in MAP at 4: dead-letter (panic: thirteen)`,
		`production in SINK at 6: dead-letter (value: refused)`,
	}
	checkActions(t, typed.actions, want)
	// 1, 2, 7 and 8 pass: two values each, each to out, lens and the
	// repartition topic, the even ones to even; 21 is dead-lettered whole.
	if topics, w := perTopic(typed.out), map[string]int{"out": 8, "lens": 8, "app-byvalue-repartition": 8, "even": 4, "dlq": 3}; !maps.Equal(topics, w) {
		t.Errorf("records per topic %v, want %v", topics, w)
	}
}

// refusesThree is a serde of int64s as text that refuses to encode 3.
var refusesThree = refusing(3, "refused")

// refusing is a serde of int64s as text that refuses to encode n, with
// the error text msg.
func refusing(n int64, msg string) serde.Serde[int64] {
	return serde.Funcs(func(v int64) ([]byte, error) {
		if v == n {
			return nil, errors.New(msg)
		}
		return strconv.AppendInt(nil, v, 10), nil
	}, func(b []byte) (int64, error) { return strconv.ParseInt(string(b), 10, 64) })
}

// aggTopology puts the aggregations that take part in typed chains after a
// source that fans out, with a table node that does not (FilterTable), and
// a table read from a topic, whose input is erased but whose held updates
// go out typed, deletes included. Records go wrong on the way: "x" does not
// decode, 13 panics in Aggregate's adder (right after a flush, where the
// running node must not be the folding node the flush left), and a third
// count of a key is a value its sink's serde refuses.
func aggTopology() *topology.Topology {
	t := topology.New()
	s := topology.From(t, "in", serde.String, serde.Int64Text, topology.DeadLetter("dlq"))
	counts := topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), "counts", serde.String, refusesThree)
	topology.To(topology.ToStream(topology.FilterTable(counts, func(_ string, n int64) bool { return n%2 == 0 })), "even-counts", serde.String, serde.Int64Text)
	sums := topology.Aggregate(topology.GroupByKey(s), func() int64 { return 100 }, func(_ string, v, sum int64) int64 {
		if v == 13 {
			panic("thirteen")
		}
		return sum + v
	}, topology.Materialized("sums", serde.String, serde.Int64))
	topology.To(topology.ToStream(sums), "sums", serde.String, serde.Int64Text)
	rows := topology.TableFrom(t, "rows", topology.Materialized("rows", serde.String, serde.String))
	topology.To(topology.ToStream(rows), "rows-out", serde.String, serde.String)
	return t
}

// aggRecords are the input of aggTopology: keys k0–k2 on "in", with a
// header each, and upserts and deletes on "rows". Two records on "in" have
// a header of the name a count's repartition records carry their weight
// in (exec.HeaderCount), one well formed, one not: from a user's topic, it
// is the user's, and weighs nothing.
func aggRecords() []*kgo.Record {
	var recs []*kgo.Record
	for i, v := range []string{"1", "2", "5", "13", "x", "7", "21", "30", "8", "4", "6"} {
		r := &kgo.Record{
			Topic: "in", Key: []byte("k" + strconv.Itoa(i%3)), Value: []byte(v), Offset: int64(i),
			Timestamp: time.UnixMilli(int64(1000 + i)), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(v)}},
		}
		switch i {
		case 1:
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: exec.HeaderCount, Value: binary.BigEndian.AppendUint64(nil, 5)})
		case 2:
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: exec.HeaderCount, Value: []byte("abc")})
		}
		recs = append(recs, r)
	}
	for i, kv := range [][2]string{{"a", "1"}, {"b", "1"}, {"a", ""}, {"b", "2"}, {"c", "1"}, {"c", ""}, {"b", ""}} {
		r := &kgo.Record{Topic: "rows", Key: []byte(kv[0]), Offset: int64(i), Timestamp: time.UnixMilli(int64(2000 + i))}
		if kv[1] != "" {
			r.Value = []byte(kv[1])
		}
		recs = append(recs, r)
	}
	return recs
}

// runAgg runs aggRecords through aggTopology (runPlan), flushing every
// three records; erased takes the typed chains out of the plan first, and
// tamper, if set, changes it.
func runAgg(t *testing.T, erased, fold bool, tamper func(*exec.Plan)) chainRun {
	t.Helper()
	return runPlan(t, planOf(t, aggTopology(), erased, tamper), aggRecords(), 3, fold)
}

// planOf is tp's plan; erased takes the typed chains out of it, and
// tamper, if set, changes it.
func planOf(t *testing.T, tp *topology.Topology, erased bool, tamper func(*exec.Plan)) *exec.Plan {
	t.Helper()
	p := plan(t, tp)
	if erased {
		for _, sub := range p.Subs {
			for _, n := range sub.Nodes {
				n.Typed = nil
			}
		}
	}
	if tamper != nil {
		tamper(p)
	}
	return p
}

// runPlan runs recs through the tasks of partition 0 of p's
// sub-topologies, each record through the tasks that read its topic,
// flushing and committing every n records. Processing failures are
// dead-lettered (to "dlq", where a source names none), production
// failures (also at a flush, with no input record) skipped.
func runPlan(t *testing.T, p *exec.Plan, recs []*kgo.Record, n int, fold bool) chainRun {
	t.Helper()
	run := chainRun{linked: map[string]bool{}}
	d := &discard{keep: []*kgo.Record{}}
	deadLetter := func(exec.ErrorContext) exec.Action { return exec.DeadLetter }
	skip := func(exec.ErrorContext) exec.Action { return exec.Continue }
	var tasks []*Task
	for i := range p.Subs {
		tasks = append(tasks, startTask(t, p, i, Config{
			AppID: "app", Send: d.send, FoldUpdates: fold, DeadLetter: "dlq",
			Errors: map[exec.ErrorClass]exec.ErrorHandler{exec.Processing: deadLetter, exec.Production: skip},
			OnAction: func(ec exec.ErrorContext, a exec.Action) {
				kind, _, _ := strings.Cut(ec.Node, "-")
				run.actions = append(run.actions, fmt.Sprintf("%s in %s at %s/%d: %s (%v)", ec.Class, kind, ec.Topic, ec.Offset, a, ec.Err))
			},
		}))
	}
	for _, tk := range tasks {
		for topic, src := range tk.sources {
			run.linked[topic] = run.linked[topic] || src.direct != nil
		}
	}
	run.direct = run.linked["in"]
	for i, r := range recs {
		for _, tk := range tasks {
			if tk.sources[r.Topic] == nil {
				continue
			}
			if err := tk.Process(r); err != nil {
				t.Fatal(err)
			}
		}
		if i%n == n-1 {
			for _, tk := range tasks {
				if err := tk.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := tk.Commit(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	run.out = describe(d.keep)
	return run
}

// checkActions fails t unless the failures got are those want begins,
// in order.
func checkActions(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("failures\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("failure %d: %s, want %s…", i, got[i], w)
		}
	}
}

// perTopic counts the records of out (describe's) by topic.
func perTopic(out []string) map[string]int {
	topics := map[string]int{}
	for _, o := range out {
		topic, _, _ := strings.Cut(o, " ")
		topics[topic]++
	}
	return topics
}

// linker is exec.Typed's Link.
type linker = func(f *exec.Frame, proc exec.Processor, next any) any

// relink replaces the Link of the first node whose name begins with prefix
// by what wrap makes of it, for a negative control.
func relink(prefix string, wrap func(linker) linker) func(*exec.Plan) {
	return func(p *exec.Plan) {
		for _, sub := range p.Subs {
			for _, n := range sub.Nodes {
				if !strings.HasPrefix(n.Name, prefix) || n.Typed == nil {
					continue
				}
				typed := *n.Typed
				typed.Link = wrap(typed.Link)
				n.Typed = &typed
				return
			}
		}
		panic("no node " + prefix)
	}
}

// diffRuns says how two runs differ ("" if they do not).
func diffRuns(a, b chainRun) string {
	var d []string
	if !slices.Equal(a.out, b.out) {
		d = append(d, fmt.Sprintf("produced\n%s\nagainst\n%s", strings.Join(a.out, "\n"), strings.Join(b.out, "\n")))
	}
	if !slices.Equal(a.actions, b.actions) {
		d = append(d, fmt.Sprintf("failed\n%s\nagainst\n%s", strings.Join(a.actions, "\n"), strings.Join(b.actions, "\n")))
	}
	return strings.Join(d, "\n")
}

// TestTypedAggregationsMatchTheErasedPath: aggregations in typed chains,
// and held updates forwarded through them, produce what the erased path
// produces, record for record (deletes of a table as tombstones, headers
// and timestamps of the last update included), and blame the same failures
// on the same nodes with the same classes; with folding and without.
func TestTypedAggregationsMatchTheErasedPath(t *testing.T) {
	for _, fold := range []bool{false, true} {
		t.Run("fold="+strconv.FormatBool(fold), func(t *testing.T) {
			typed, erased := runAgg(t, false, fold, nil), runAgg(t, true, fold, nil)
			if !typed.direct || erased.direct {
				t.Fatalf("typed chain linked: %v with the chains, %v without", typed.direct, erased.direct)
			}
			if d := diffRuns(typed, erased); d != "" {
				t.Fatalf("typed chains and the erased path differ: typed chains %s", d)
			}
			// Each key's third count is refused: as its record is
			// processed, or at the flush that forwards it.
			want := []string{
				`processing in sums at in/3: dead-letter (panic: thirteen)`,
				`deserialization in SOURCE at in/4: dead-letter`,
				`production in SINK at in/8: continue (value: refused)`,
				`production in SINK at in/9: continue (value: refused)`,
				`production in SINK at in/10: continue (value: refused)`,
			}
			if fold {
				want = []string{
					`processing in sums at in/3: dead-letter (panic: thirteen)`,
					`deserialization in SOURCE at in/4: dead-letter`,
					`production in SINK at /0: continue (value: refused)`,
					`production in SINK at /0: continue (value: refused)`,
					`production in SINK at /0: continue (value: refused)`,
				}
			}
			if len(typed.actions) != len(want) {
				t.Fatalf("failures\n%s\nwant\n%s", strings.Join(typed.actions, "\n"), strings.Join(want, "\n"))
			}
			for i, w := range want {
				if !strings.HasPrefix(typed.actions[i], w) {
					t.Errorf("failure %d: %s, want %s…", i, typed.actions[i], w)
				}
			}
			tombstones := 0
			for _, o := range typed.out {
				if strings.HasPrefix(o, "rows-out ") && strings.Contains(o, "=null") {
					tombstones++
				}
			}
			if tombstones == 0 {
				t.Errorf("no deletes reached rows-out:\n%s", strings.Join(typed.out, "\n"))
			}
		})
	}
}

// TestTypedAggregationsNegativeControl: the comparison above catches a
// typed aggregation that loses updates, and a typed ToStream that turns
// deletes into upserts.
func TestTypedAggregationsNegativeControl(t *testing.T) {
	// tamperNode makes the entry of the first node whose name begins with
	// prefix pass its output through skip.
	tamperNode := func(prefix string, skip func(next any) any) func(*exec.Plan) {
		return relink(prefix, func(link linker) linker {
			return func(f *exec.Frame, proc exec.Processor, next any) any {
				return link(f, proc, skip(next))
			}
		})
	}
	controls := map[string]func(*exec.Plan){
		// The count's output chain drops every other change.
		"lossy count": tamperNode("counts-aggregate", func(next any) any {
			emit := next.(func(string, exec.ChangeOf[int64]) error)
			n := 0
			return func(k string, ch exec.ChangeOf[int64]) error {
				if n++; n%2 == 0 {
					return nil
				}
				return emit(k, ch)
			}
		}),
		// The table's deletes reach ToStream as upserts of an empty
		// value.
		"deletes as upserts": tamperNode("rows-table-source", func(next any) any {
			emit := next.(func(string, exec.ChangeOf[string]) error)
			return func(k string, ch exec.ChangeOf[string]) error {
				ch.HasNew = true
				return emit(k, ch)
			}
		}),
	}
	for name, tamper := range controls {
		t.Run(name, func(t *testing.T) {
			if d := diffRuns(runAgg(t, false, true, tamper), runAgg(t, true, true, nil)); d == "" {
				t.Fatal("the comparison saw no difference")
			}
		})
	}
}
