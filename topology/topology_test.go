package topology_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

func TestBuildReportsEveryMistake(t *testing.T) {
	tp := topology.New()
	a := topology.From(tp, "a", serde.String, serde.String)
	topology.From(tp, "a", serde.String, serde.String)                                                          // read twice
	topology.From[string, string](tp, "b", nil, serde.String)                                                   // missing serde
	topology.Filter(a, nil)                                                                                     // nil function
	topology.Count(topology.GroupByKey(a), topology.Materialized[string, int64]("", serde.String, serde.Int64)) // unnamed store
	topology.Count(topology.GroupByKey(a), topology.Materialized("dup", serde.String, serde.Int64))
	topology.Count(topology.GroupByKey(a), topology.Materialized("dup", serde.String, serde.Int64)) // duplicate store
	topology.Repartition(a, "bad name!", serde.String, serde.String)                                // invalid topic name
	_, err := tp.Build()
	if err == nil {
		t.Fatal("Build accepted a broken topology")
	}
	for _, want := range []error{
		topology.ErrDuplicateTopic, topology.ErrMissingSerde, topology.ErrNilFunction,
		topology.ErrMissingName, topology.ErrDuplicateName, topology.ErrInvalidTopicName,
	} {
		if !errors.Is(err, want) {
			t.Errorf("Build error does not wrap %v:\n%v", want, err)
		}
	}
}

func TestBuildNeedsASource(t *testing.T) {
	if _, err := topology.New().Build(); !errors.Is(err, topology.ErrNoSource) {
		t.Fatalf("got %v, want ErrNoSource", err)
	}
}

func TestKeyChangeRepartitionsBeforeAggregation(t *testing.T) {
	tp := topology.New()
	lines := topology.From(tp, "lines", serde.String, serde.String)
	words := topology.FlatMapValues(lines, strings.Fields)
	counts := topology.Count(
		topology.GroupBy(words, func(_, w string) string { return w }, topology.Grouped("words", serde.String, serde.String)),
		topology.Materialized("counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), "out", serde.String, serde.Int64Text)
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	plan := b.Plan()
	if len(plan.Subs) != 2 {
		t.Fatalf("got %d sub-topologies, want 2:\n%s", len(plan.Subs), b.Describe())
	}
	if topics, internal := plan.Subs[1].SourceTopics(); len(topics) != 1 || topics[0] != "words-repartition" || !internal[0] {
		t.Errorf("sub-topology 1 reads %v %v, want the internal words-repartition", topics, internal)
	}
	if plan.StoreSub["counts"] != 1 {
		t.Errorf("store counts in sub-topology %d, want 1", plan.StoreSub["counts"])
	}
	d := b.Describe()
	for _, want := range []string{"Sub-topology: 0", "Sub-topology: 1", "<application.id>-words-repartition", "counts (pebble"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
}

// TestOnlyACountsOwnRepartitionCombines: Count marks the repartition it
// creates as combining (exec.Node.Combine); other aggregations, windowed
// counts and a repartition the user made, which other nodes may read, stay
// unmarked.
func TestOnlyACountsOwnRepartitionCombines(t *testing.T) {
	rekey := func(tp *topology.Topology) topology.Stream[string, string] {
		return topology.SelectKey(topology.From(tp, "in", serde.String, serde.String), func(_, v string) string { return v })
	}
	m := topology.Materialized("s", serde.String, serde.Int64)
	for _, c := range []struct {
		name  string
		build func(*topology.Topology)
		want  bool
	}{
		{"count", func(tp *topology.Topology) { topology.Count(topology.GroupByKey(rekey(tp)), m) }, true},
		{"aggregate", func(tp *topology.Topology) {
			topology.Aggregate(topology.GroupByKey(rekey(tp)), func() int64 { return 0 }, func(_, _ string, n int64) int64 { return n + 1 }, m)
		}, false},
		{"windowed count", func(tp *topology.Topology) {
			topology.CountWindows(topology.WindowedBy(topology.GroupByKey(rekey(tp)), window.Tumbling(time.Minute)), m)
		}, false},
		{"the user's repartition", func(tp *topology.Topology) {
			s := topology.Repartition(rekey(tp), "mine", serde.String, serde.String)
			topology.Count(topology.GroupByKey(s), m)
			topology.To(s, "out", serde.String, serde.String)
		}, false},
	} {
		tp := topology.New()
		c.build(tp)
		b, err := tp.Build()
		if err != nil {
			t.Fatal(err)
		}
		sinks, combining := 0, 0
		for _, sub := range b.Plan().Subs {
			for _, n := range sub.Nodes {
				if n.Internal && len(n.Topics) == 1 && strings.HasSuffix(n.Topics[0], "-repartition") && n.Encode != nil {
					sinks++
					if n.Combine {
						combining++
					}
				}
			}
		}
		if want := map[bool]int{true: 1}[c.want]; sinks != 1 || combining != want {
			t.Errorf("%s: %d repartition sinks, %d combining; want 1 and %d", c.name, sinks, combining, want)
		}
	}
}

func TestNoRepartitionWithoutKeyChange(t *testing.T) {
	tp := topology.New()
	s := topology.From(tp, "in", serde.String, serde.Int64)
	s = topology.MapValues(s, func(v int64) int64 { return v * 2 })
	topology.Reduce(topology.GroupByKey(s), func(a, b int64) int64 { return a + b },
		topology.Materialized("sums", serde.String, serde.Int64, topology.InMemory(), topology.WithoutCache()))
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.Plan().Subs); n != 1 {
		t.Fatalf("got %d sub-topologies, want 1:\n%s", n, b.Describe())
	}
	st := b.Plan().Stores["sums"]
	if !st.InMemory || st.Cache {
		t.Errorf("store options lost: %+v", st)
	}
}

func TestStreamJoinedStoreOptions(t *testing.T) {
	tp := topology.New()
	l := topology.From(tp, "l", serde.String, serde.String)
	r := topology.From(tp, "r", serde.String, serde.String)
	j := topology.JoinStreams(l, r, topology.JoinWindows(time.Minute), func(_, a, b string) string { return a + b },
		topology.StreamJoined[string, string, string]{Name: "j", Key: serde.String, Left: serde.String, Right: serde.String,
			Stores: []topology.StoreOption{topology.InMemory()}})
	topology.To(j, "out", serde.String, serde.String)
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"j-left", "j-right"} {
		if st := b.Plan().Stores[name]; st == nil || !st.InMemory || !st.Windowed {
			t.Errorf("store %s: %+v, want a windowed store in memory", name, st)
		}
	}
}

func TestMergedSourcesShareASubTopology(t *testing.T) {
	tp := topology.New()
	a := topology.From(tp, "a", serde.String, serde.String)
	b := topology.From(tp, "b", serde.String, serde.String)
	topology.To(topology.Merge(a, b), "out", serde.String, serde.String)
	built, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(built.Plan().Subs); n != 1 {
		t.Fatalf("merged sources in %d sub-topologies, want 1", n)
	}
	if topics, _ := built.Plan().Subs[0].SourceTopics(); len(topics) != 2 {
		t.Fatalf("got sources %v", topics)
	}
}

func TestSplitHasADefaultBranch(t *testing.T) {
	tp := topology.New()
	s := topology.From(tp, "in", serde.String, serde.Int64)
	bs, rest := topology.Split(s, func(_ string, v int64) bool { return v < 0 }, func(_ string, v int64) bool { return v == 0 })
	if len(bs) != 2 {
		t.Fatalf("got %d branches, want 2", len(bs))
	}
	topology.To(bs[0], "negative", serde.String, serde.Int64)
	topology.To(bs[1], "zero", serde.String, serde.Int64)
	topology.To(rest, "positive", serde.String, serde.Int64)
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"topic: negative", "topic: zero", "topic: positive"} {
		if !strings.Contains(b.Describe(), want) {
			t.Errorf("Describe lacks %q", want)
		}
	}
}

// TestTimeStoreForRepartitionWriters: a sub-topology that writes a
// repartition topic in a plan with windows, and has no windowed store,
// gets a store of its own for its time state, named after that topic; a
// user store of that name is refused.
func TestTimeStoreForRepartitionWriters(t *testing.T) {
	build := func(userStore string) (*topology.Built, error) {
		tp := topology.New()
		in := topology.From(tp, "clicks", serde.String, serde.String)
		g := topology.GroupBy(in, func(_ string, v string) string { return v }, topology.Grouped("by-user", serde.String, serde.String))
		topology.CountWindows(topology.WindowedBy(g, window.Tumbling(time.Second)), topology.Materialized("per-user", serde.String, serde.Int64))
		if userStore != "" {
			topology.Count(topology.GroupByKey(in), topology.Materialized(userStore, serde.String, serde.Int64))
		}
		return tp.Build()
	}
	b, err := build("")
	if err != nil {
		t.Fatal(err)
	}
	p := b.Plan()
	if got := p.Subs[0].TimeStore; got != "by-user-repartition-time" {
		t.Fatalf("sub-topology 0 keeps its time in %q, want by-user-repartition-time", got)
	}
	if st := p.Stores["by-user-repartition-time"]; st == nil || !st.TimeState || st.Windowed || p.StoreSub[st.Name] != 0 {
		t.Fatalf("time store %+v", st)
	}
	if got := p.Subs[1].TimeStore; got != "per-user" {
		t.Fatalf("sub-topology 1 keeps its time in %q, want its windowed store per-user", got)
	}
	if !strings.Contains(b.Describe(), "by-user-repartition-time (pebble, time state, cache=true, sub-topology 0, changelog <application.id>-by-user-repartition-time-changelog)") {
		t.Errorf("Describe does not show the time store:\n%s", b.Describe())
	}
	if _, err := build("by-user-repartition-time"); !errors.Is(err, topology.ErrDuplicateName) {
		t.Errorf("a user store named like the time store: %v, want ErrDuplicateName", err)
	}

	// Without event time no watermark travels, and nothing is added.
	tp := topology.New()
	in := topology.From(tp, "clicks", serde.String, serde.String)
	topology.Count(topology.GroupBy(in, func(_ string, v string) string { return v }, topology.Grouped("by-user", serde.String, serde.String)),
		topology.Materialized("per-user", serde.String, serde.Int64))
	b, err = tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.Plan().Stores); n != 1 {
		t.Errorf("a plan without event time has %d stores, want 1", n)
	}
}
