package task

import (
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
	for _, r := range d.keep {
		var hs []string
		for _, h := range r.Headers {
			if !strings.HasPrefix(h.Key, "sluice.error.message") {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
		}
		run.out = append(run.out, fmt.Sprintf("%s %q=%q @%d %v", r.Topic, r.Key, r.Value, r.Timestamp.UnixMilli(), hs))
	}
	return run
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
	if len(typed.actions) != len(want) {
		t.Fatalf("failures\n%s\nwant\n%s", strings.Join(typed.actions, "\n"), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(typed.actions[i], w) {
			t.Errorf("failure %d: %s, want %s…", i, typed.actions[i], w)
		}
	}
	// 1, 2, 7 and 8 pass: two values each, each to out, lens and the
	// repartition topic, the even ones to even; 21 is dead-lettered whole.
	topics := map[string]int{}
	for _, o := range typed.out {
		topic, _, _ := strings.Cut(o, " ")
		topics[topic]++
	}
	if w := map[string]int{"out": 8, "lens": 8, "app-byvalue-repartition": 8, "even": 4, "dlq": 3}; !maps.Equal(topics, w) {
		t.Errorf("records per topic %v, want %v", topics, w)
	}
}
