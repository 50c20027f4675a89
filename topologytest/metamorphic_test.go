package topologytest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// The metamorphic checker: the same input through the same topology, run
// the ways a deployment may run it — a commit after every record, every
// few records or only at the end; with and without fold.updates; with one
// partition or several (several tasks per sub-topology, whose writes to an
// internal topic interleave); with internal topics delivered in shuffled
// but legal orders (topologytest.ShuffleInternal, which also stands for
// several stream threads: a thread runs whole tasks, so threads change
// only how tasks' writes interleave) — must give the same final tables,
// and the same stream per key wherever the topology's output does not
// depend on arrival order.

// mInput is one input record; a nil value is a tombstone.
type mInput struct {
	topic string
	key   []byte
	value []byte
	ts    int64
}

// streamClass says across which runs a scenario's per-key output streams
// must be equal (finals are compared across all runs).
type streamClass int

const (
	noStreams streamClass = iota // only finals: emission timing depends on commits
	sameOrder                    // unfolded runs that deliver in one order: one partition, no shuffle
	orderFree                    // every unfolded run
)

// scenario is a topology with its input, and how to read its outputs.
type scenario struct {
	name    string
	build   func() *topology.Topology
	input   func(rng *rand.Rand) []mInput
	tables  []string // output topics read as tables: last value per key
	streams []string // output topics read as multisets of records
	class   streamClass
	// empty, if set, is a value a table's row may have that means the
	// same as no row: an aggregate back at its initial value. Folding
	// (like Kafka Streams' record cache) never forwards a row that
	// came and went within one commit, so its group never appears.
	empty string
	// eventTime: a watermark is per input partition, so what is late, and
	// which windows have closed when the input ends, depends on how the
	// input is partitioned (as in Flink and Kafka Streams): runs are
	// compared only with runs of as many partitions.
	eventTime bool
}

// variant is one way to run a scenario.
type variant struct {
	name       string
	opts       func(seed uint64) []topologytest.Option
	fold       bool
	partitions int
	shuffled   bool
}

func variants() []variant {
	o := func(opts ...topologytest.Option) func(uint64) []topologytest.Option {
		return func(uint64) []topologytest.Option { return opts }
	}
	return []variant{
		{name: "base", opts: o(), partitions: 1},
		{name: "every7", opts: o(topologytest.CommitEvery(7)), partitions: 1},
		{name: "at-end", opts: o(topologytest.CommitEvery(0)), partitions: 1},
		{name: "fold", opts: o(topologytest.FoldUpdates()), fold: true, partitions: 1},
		{name: "fold-every5", opts: o(topologytest.FoldUpdates(), topologytest.CommitEvery(5)), fold: true, partitions: 1},
		{name: "p3", opts: o(topologytest.Partitions(3)), partitions: 3},
		{name: "p3-every4", opts: o(topologytest.Partitions(3), topologytest.CommitEvery(4)), partitions: 3},
		{name: "p3-fold-at-end", opts: o(topologytest.Partitions(3), topologytest.FoldUpdates(), topologytest.CommitEvery(0)), fold: true, partitions: 3},
		{name: "p1-shuffled", opts: func(s uint64) []topologytest.Option {
			return []topologytest.Option{topologytest.ShuffleInternal(s)}
		}, partitions: 1, shuffled: true},
		{name: "p3-shuffled", opts: func(s uint64) []topologytest.Option {
			return []topologytest.Option{topologytest.Partitions(3), topologytest.ShuffleInternal(s)}
		}, partitions: 3, shuffled: true},
		{name: "p3-shuffled-every3-fold", opts: func(s uint64) []topologytest.Option {
			return []topologytest.Option{topologytest.Partitions(3), topologytest.ShuffleInternal(s + 1), topologytest.CommitEvery(3), topologytest.FoldUpdates()}
		}, fold: true, partitions: 3, shuffled: true},
	}
}

// mRun is what one run wrote: per output topic, its final (sorted
// "key=value" of the table, or the sorted records of a stream) and each
// key's stream of values.
type mRun struct {
	final   map[string][]string
	perKey  map[string]map[string][]string
	variant variant
}

func runScenario(sc scenario, v variant, seed uint64, in []mInput) (mRun, error) {
	d, err := topologytest.New(sc.build(), v.opts(seed)...)
	if err != nil {
		return mRun{}, err
	}
	defer d.Close()
	topics := map[string]*topologytest.InputTopic[[]byte, []byte]{}
	for _, r := range in {
		it := topics[r.topic]
		if it == nil {
			it = topologytest.NewInputTopic(d, r.topic, serde.Bytes, serde.Bytes)
			topics[r.topic] = it
		}
		if err := it.PipeBytes(r.key, r.value, r.ts); err != nil {
			return mRun{}, err
		}
	}
	if err := d.Commit(); err != nil {
		return mRun{}, err
	}
	run := mRun{final: map[string][]string{}, perKey: map[string]map[string][]string{}, variant: v}
	read := func(topic string) ([]topology.Record[[]byte, []byte], error) {
		return topologytest.NewOutputTopic(d, topic, serde.Bytes, serde.Bytes).ReadRecords()
	}
	for _, topic := range append(slices.Clone(sc.tables), sc.streams...) {
		rs, err := read(topic)
		if err != nil {
			return mRun{}, err
		}
		table := slices.Contains(sc.tables, topic)
		last := map[string]string{}
		keys := map[string][]string{}
		var all []string
		for _, r := range rs {
			k, val := strconv.Quote(string(r.Key)), "<tombstone>"
			if !r.Tombstone {
				val = strconv.Quote(string(r.Value))
			}
			keys[k] = append(keys[k], val)
			if table {
				if r.Tombstone || sc.empty != "" && val == strconv.Quote(sc.empty) {
					delete(last, k)
				} else {
					last[k] = val
				}
			} else {
				all = append(all, fmt.Sprintf("%s=%s@%d", k, val, r.Timestamp))
			}
		}
		for k, val := range last {
			all = append(all, k+"="+val)
		}
		slices.Sort(all)
		run.final[topic], run.perKey[topic] = all, keys
	}
	return run, nil
}

// checkMetamorphic runs sc under every variant and returns how the runs
// disagree, nil if they do not.
func checkMetamorphic(sc scenario, seed uint64) error {
	in := sc.input(rand.New(rand.NewPCG(seed, 3)))
	var runs []mRun
	for _, v := range variants() {
		r, err := runScenario(sc, v, seed, in)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", sc.name, v.name, err)
		}
		runs = append(runs, r)
	}
	var errs []error
	for _, topic := range sc.tables {
		if len(runs[0].final[topic]) == 0 {
			errs = append(errs, fmt.Errorf("%s: weak input: %s has no results", sc.name, topic))
		}
	}
	for i, r := range runs {
		base := runs[0]
		if sc.eventTime {
			base = runs[slices.IndexFunc(runs, func(b mRun) bool { return b.variant.partitions == r.variant.partitions })]
		}
		if i == 0 || base.variant.name == r.variant.name {
			continue
		}
		for topic, want := range base.final {
			if d := diffSorted(want, r.final[topic]); d != "" {
				errs = append(errs, fmt.Errorf("%s: %s: final %s differs from %s:\n%s", sc.name, r.variant.name, topic, base.variant.name, d))
			}
		}
		comparable := !r.variant.fold && (sc.class == orderFree ||
			sc.class == sameOrder && r.variant.partitions == 1 && !r.variant.shuffled)
		if !comparable {
			continue
		}
		for topic, keys := range base.perKey {
			for k, want := range keys {
				if got := r.perKey[topic][k]; !slices.Equal(want, got) {
					errs = append(errs, fmt.Errorf("%s: %s: stream of key %s in %s differs from %s:\n  got  %v\n  want %v", sc.name, r.variant.name, k, topic, base.variant.name, got, want))
					break
				}
			}
			if len(keys) != len(r.perKey[topic]) {
				errs = append(errs, fmt.Errorf("%s: %s: %d keys in %s, base has %d", sc.name, r.variant.name, len(r.perKey[topic]), topic, len(keys)))
			}
		}
	}
	return errors.Join(errs...)
}

// mKeys are keys of every encoded length from 0 to 130 bytes (in steps, and
// around 127/128 where varint lengths grow) and a 36-byte UUID.
func mKeys() [][]byte {
	keys := [][]byte{[]byte("6f1c2a4e-8b3d-4c5f-9a7e-0d1b2c3d4e5f")}
	for _, n := range []int{0, 1, 2, 3, 7, 8, 15, 16, 31, 63, 126, 127, 128, 129, 130} {
		keys = append(keys, []byte(strings.Repeat(string(rune('a'+n%26)), n)))
	}
	return keys
}

// events are stream records: keys from mKeys, values naming a group, and
// timestamps rising with jitter, some records out of order by more than
// the sources' 10 ms bound.
func events(topic string, n int) func(*rand.Rand) []mInput {
	return func(rng *rand.Rand) []mInput {
		keys := mKeys()
		var in []mInput
		for i := range n {
			ts := 1000 + int64(i)*5 - rng.Int64N(50)
			g := fmt.Sprintf("g%d%s", rng.IntN(5), strings.Repeat("x", rng.IntN(3)*60))
			in = append(in, mInput{topic, keys[rng.IntN(len(keys))], []byte(g), ts})
		}
		return in
	}
}

var bound = topology.Watermarks(window.BoundedOutOfOrderness(10 * time.Millisecond))

func windowKey(w topology.Windowed[string], _ int64) string {
	return fmt.Sprintf("%s@%d-%d", w.Key, w.Window.Start, w.Window.End)
}

func metamorphicScenarios() []scenario {
	groupByValue := func(s topology.Stream[[]byte, []byte]) topology.GroupedStream[string, string] {
		return topology.GroupBy(topology.MapValues(s, func(v []byte) string { return string(v) }),
			func(_ []byte, v string) string { return v }, topology.Grouped("by-group", serde.String, serde.String))
	}
	return []scenario{{
		name: "count",
		build: func() *topology.Topology {
			t := topology.New()
			c := topology.Count(groupByValue(topology.From(t, "in", serde.Bytes, serde.Bytes)), topology.Materialized("counts", serde.String, serde.Int64))
			topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
			return t
		},
		input: events("in", 300), tables: []string{"out"}, class: orderFree,
	}, {
		// Lines of several words, counted per word: with fold.updates
		// the repartition sink combines a transaction's words by key
		// (exec.Node.Combine), which must not change a final count.
		name: "word-count",
		build: func() *topology.Topology {
			t := topology.New()
			words := topology.FlatMapValues(topology.From(t, "in", serde.Bytes, serde.Bytes), func(v []byte) []string { return strings.Split(string(v), "|") })
			c := topology.Count(topology.GroupBy(words, func(_ []byte, w string) string { return w }, topology.Grouped("by-word", serde.String, serde.String)),
				topology.Materialized("word-counts", serde.String, serde.Int64))
			topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
			return t
		},
		input: func(rng *rand.Rand) []mInput {
			keys := mKeys()
			var in []mInput
			for i := range 300 {
				var ws []string
				for range 1 + rng.IntN(5) {
					ws = append(ws, string(keys[rng.IntN(len(keys))]))
				}
				in = append(in, mInput{"in", keys[rng.IntN(len(keys))], []byte(strings.Join(ws, "|")), 1000 + int64(i)})
			}
			return in
		},
		tables: []string{"out"}, class: orderFree,
	}, {
		name: "aggregate",
		build: func() *topology.Topology {
			t := topology.New()
			a := topology.Aggregate(groupByValue(topology.From(t, "in", serde.Bytes, serde.Bytes)),
				func() string { return "" },
				func(_ string, v string, agg string) string { return strconv.Itoa(len(agg) + len(v)) },
				topology.Materialized("lengths", serde.String, serde.String))
			topology.To(topology.ToStream(a), "out", serde.String, serde.String)
			return t
		},
		input: events("in", 300), tables: []string{"out"}, class: sameOrder,
	}, {
		name: "table-aggregate",
		build: func() *topology.Topology {
			t := topology.New()
			rows := topology.TableFrom(t, "rows", topology.Materialized("rows", serde.Bytes, serde.String))
			byGroup := topology.ReduceTable(
				topology.GroupTableBy(rows, func(_ []byte, v string) (string, int64) {
					g, n, _ := strings.Cut(v, ":")
					x, _ := strconv.ParseInt(n, 10, 64)
					return g, x
				}, topology.Grouped("rows-by-group", serde.String, serde.Int64)),
				func(a, b int64) int64 { return a + b }, func(a, b int64) int64 { return a - b },
				topology.Materialized("sums", serde.String, serde.Int64))
			topology.To(topology.ToStream(byGroup), "out", serde.String, serde.Int64Text)
			return t
		},
		input: func(rng *rand.Rand) []mInput {
			keys := mKeys()
			var in []mInput
			for i := range 300 {
				var v []byte
				if rng.IntN(6) != 0 {
					v = fmt.Appendf(nil, "g%d:%d", rng.IntN(4), rng.IntN(100))
				}
				in = append(in, mInput{"rows", keys[rng.IntN(len(keys))], v, int64(1000 + i)})
			}
			return in
		},
		tables: []string{"out"}, class: sameOrder, empty: "0",
	}, {
		name: "table-table-join",
		build: func() *topology.Topology {
			t := topology.New()
			l := topology.TableFrom(t, "left", topology.Materialized("left", serde.Bytes, serde.String))
			r := topology.TableFrom(t, "right", topology.Materialized("right", serde.Bytes, serde.String))
			j := topology.JoinTables(l, r, func(_ []byte, a, b string) string { return a + "|" + b })
			topology.To(topology.ToStream(j), "out", serde.Bytes, serde.String)
			return t
		},
		input: func(rng *rand.Rand) []mInput {
			keys := mKeys()
			var in []mInput
			for i := range 300 {
				topic := []string{"left", "right"}[rng.IntN(2)]
				var v []byte
				if rng.IntN(5) != 0 {
					v = fmt.Appendf(nil, "%s%d", topic[:1], i)
				}
				in = append(in, mInput{topic, keys[rng.IntN(len(keys))], v, int64(1000 + i)})
			}
			return in
		},
		tables: []string{"out"}, class: orderFree,
	}, {
		name: "windowed-count",
		build: func() *topology.Topology {
			t := topology.New()
			ws := topology.WindowedBy(groupByValue(topology.From(t, "in", serde.Bytes, serde.Bytes, bound)),
				window.Tumbling(50*time.Millisecond), topology.AllowedLateness(15*time.Millisecond))
			c := topology.CountWindows(ws, topology.Materialized("wcounts", serde.String, serde.Int64))
			topology.To(topology.Map(topology.ToStream(c), func(w topology.Windowed[string], n int64) (string, int64) { return windowKey(w, n), n }),
				"out", serde.String, serde.Int64Text)
			topology.To(topology.LateRecords(ws), "late", serde.String, serde.String)
			return t
		},
		input: events("in", 300), tables: []string{"out"}, streams: []string{"late"}, class: noStreams, eventTime: true,
	}, {
		name: "windowed-count-final",
		build: func() *topology.Topology {
			t := topology.New()
			ws := topology.WindowedBy(groupByValue(topology.From(t, "in", serde.Bytes, serde.Bytes, bound)),
				window.Tumbling(50*time.Millisecond), topology.AllowedLateness(15*time.Millisecond), topology.EmitFinal())
			c := topology.CountWindows(ws, topology.Materialized("wcounts", serde.String, serde.Int64))
			topology.To(topology.Map(topology.ToStream(c), func(w topology.Windowed[string], n int64) (string, int64) { return windowKey(w, n), n }),
				"out", serde.String, serde.Int64Text)
			return t
		},
		input: events("in", 300), tables: []string{"out"}, class: orderFree, eventTime: true,
	}, {
		name: "session-aggregate",
		build: func() *topology.Topology {
			t := topology.New()
			ws := topology.WindowedBy(groupByValue(topology.From(t, "in", serde.Bytes, serde.Bytes, bound)),
				window.InactivityGap(20*time.Millisecond), topology.AllowedLateness(10*time.Millisecond))
			s := topology.AggregateSessions(ws, func() int64 { return 0 },
				func(_ string, v string, n int64) int64 { return n + int64(len(v)) },
				func(_ string, a, b int64) int64 { return a + b },
				topology.Materialized("sessions", serde.String, serde.Int64))
			// The windowed key as it is: a merged session's retraction is a
			// tombstone of its key, which a Map would drop.
			topology.To(topology.ToStream(s), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
			return t
		},
		input: events("in", 300), tables: []string{"out"}, class: noStreams, eventTime: true,
	}, {
		name: "stream-stream-join",
		build: func() *topology.Topology {
			t := topology.New()
			orders := topology.From(t, "orders", serde.Bytes, serde.Bytes, bound)
			// Payments are re-keyed: the join reads one side through a
			// repartition topic, from several writers.
			payments := topology.SelectKey(topology.From(t, "payments", serde.Bytes, serde.Bytes, bound),
				func(_ []byte, v []byte) []byte { k, _, _ := strings.Cut(string(v), "/"); return []byte(k) })
			j := topology.LeftJoinStreams(orders, payments,
				topology.JoinWindowsBetween(0, 30*time.Millisecond).WithGrace(10*time.Millisecond),
				func(_ []byte, o, p []byte, ok bool) string {
					if !ok {
						return string(o) + "+unpaid"
					}
					return string(o) + "+" + string(p)
				},
				topology.StreamJoined[[]byte, []byte, []byte]{Name: "op", Key: serde.Bytes, Left: serde.Bytes, Right: serde.Bytes})
			topology.To(j, "out", serde.Bytes, serde.String)
			return t
		},
		input: func(rng *rand.Rand) []mInput {
			keys := mKeys()
			var in []mInput
			for i := range 300 {
				k := keys[rng.IntN(len(keys))]
				if rng.IntN(2) == 0 {
					in = append(in, mInput{"orders", k, fmt.Appendf(nil, "o%d", i), 1000 + int64(i)*5 - rng.Int64N(40)})
				} else {
					// The payment's key is random: its value names the order key.
					in = append(in, mInput{"payments", keys[rng.IntN(len(keys))], fmt.Appendf(nil, "%s/p%d", k, i), 1000 + int64(i)*5 - rng.Int64N(40)})
				}
			}
			return in
		},
		streams: []string{"out"}, class: noStreams, eventTime: true,
	}, {
		// A foreign-key join: subscriptions and responses cross
		// repartition topics, and a left row whose foreign key moves
		// while a response is in flight must not join a stale partner
		// (the response's value hash).
		name: "fk-join",
		build: func() *topology.Topology {
			t := topology.New()
			orders := topology.TableFrom(t, "orders", topology.Materialized("orders", serde.Bytes, serde.String))
			customers := topology.TableFrom(t, "customers", topology.Materialized("customers", serde.String, serde.String))
			j := topology.LeftJoinTablesByForeignKey(orders, customers,
				func(o string) string { c, _, _ := strings.Cut(o, ":"); return c },
				func(o, c string, ok bool) string {
					if !ok {
						c = "-"
					}
					return o + "|" + c
				},
				topology.ForeignKeyJoined[string]{Name: "oc", Result: serde.String})
			topology.To(topology.ToStream(j), "out", serde.Bytes, serde.String)
			return t
		},
		input: func(rng *rand.Rand) []mInput {
			keys := mKeys()
			var in []mInput
			for i := range 300 {
				if rng.IntN(3) == 0 {
					var v []byte
					if rng.IntN(5) != 0 {
						v = fmt.Appendf(nil, "tier%d", rng.IntN(3))
					}
					in = append(in, mInput{"customers", fmt.Appendf(nil, "c%d", rng.IntN(6)), v, int64(1000 + i)})
					continue
				}
				var v []byte
				if rng.IntN(6) != 0 {
					v = fmt.Appendf(nil, "c%d:%d", rng.IntN(6), i)
				}
				in = append(in, mInput{"orders", keys[rng.IntN(len(keys))], v, int64(1000 + i)})
			}
			return in
		},
		tables: []string{"out"}, class: noStreams,
	}}
}

// TestMetamorphic runs every scenario under every variant (more seeds
// with SLUICE_SOAK=1).
func TestMetamorphic(t *testing.T) {
	seeds := uint64(2)
	if os.Getenv("SLUICE_SOAK") != "" {
		seeds = 20
	}
	for _, sc := range metamorphicScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			for seed := range seeds {
				if err := checkMetamorphic(sc, seed); err != nil {
					t.Fatalf("seed %d:\n%v", seed, err)
				}
			}
		})
	}
}
