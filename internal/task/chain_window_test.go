package task

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// windowJoinTopology puts the stateful operators whose input takes typed
// chains after one source: tumbling windows with a late-records stream
// (whose results therefore leave by the erased path), sessions that retract
// as they merge, and a left join with a table read from a topic. Records go wrong on the way:
// "x" does not decode, 13 panics in the windows' adder, 21 in the joiner.
func windowJoinTopology() *topology.Topology {
	t := topology.New()
	s := topology.From(t, "in", serde.String, serde.Int64Text, topology.DeadLetter("dlq"),
		topology.Watermarks(window.BoundedOutOfOrderness(5*time.Millisecond)))
	ws := topology.WindowedBy(topology.GroupByKey(s), window.Tumbling(10*time.Millisecond), topology.EmitFinal())
	sums := topology.AggregateWindows(ws, func() int64 { return 100 }, func(_ string, v, sum int64) int64 {
		if v == 13 {
			panic("thirteen")
		}
		return sum + v
	}, topology.Materialized("tumbling", serde.String, serde.Int64))
	topology.To(topology.ToStream(sums), "tumbling", topology.WindowedSerde(serde.String), serde.Int64Text)
	topology.To(topology.LateRecords(ws), "late", serde.String, serde.Int64Text)
	sessions := topology.WindowedBy(topology.GroupByKey(s), window.InactivityGap(4*time.Millisecond), topology.EmitEveryUpdate())
	topology.To(topology.ToStream(topology.CountWindows(sessions, topology.Materialized("sessions", serde.String, serde.Int64))),
		"sessions", topology.WindowedSerde(serde.String), serde.Int64Text)
	rows := topology.TableFrom(t, "rows", topology.Materialized("rows", serde.String, serde.String))
	joined := topology.LeftJoinTable(s, rows, func(_ string, v int64, row string, ok bool) string {
		if v == 21 {
			panic("twenty-one")
		}
		return fmt.Sprintf("%d/%s/%v", v, row, ok)
	})
	topology.To(joined, "joined", serde.String, serde.String)
	return t
}

// windowJoinRecords are the input of windowJoinTopology: rows first, then
// keys k0–k2 on "in" with a header each, in time order but for a few
// records a little behind and one far behind (late for its window).
func windowJoinRecords() []*kgo.Record {
	var recs []*kgo.Record
	for i, kv := range [][2]string{{"k0", "a"}, {"k1", "b"}, {"k1", ""}} {
		r := &kgo.Record{Topic: "rows", Key: []byte(kv[0]), Offset: int64(i), Timestamp: time.UnixMilli(900)}
		if kv[1] != "" {
			r.Value = []byte(kv[1])
		}
		recs = append(recs, r)
	}
	ts := []int64{1000, 1003, 1001, 1008, 1012, 1004, 1013, 1020, 1016, 1024, 1031, 1002, 1033, 1040, 1052, 1047, 1060}
	vals := []string{"1", "2", "5", "13", "x", "7", "21", "30", "8", "4", "6", "9", "10", "11", "12", "14", "15"}
	for i, v := range vals {
		recs = append(recs, &kgo.Record{
			Topic: "in", Key: []byte("k" + strconv.Itoa(i%3)), Value: []byte(v), Offset: int64(i),
			Timestamp: time.UnixMilli(ts[i]), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(v)}},
		})
	}
	return recs
}

// runWindowJoin runs windowJoinRecords through windowJoinTopology
// (runPlan), committing every four records; erased takes the typed chains
// out of the plan first, and tamper, if set, changes it.
func runWindowJoin(t *testing.T, erased bool, tamper func(*exec.Plan)) chainRun {
	t.Helper()
	return runPlan(t, planOf(t, windowJoinTopology(), erased, tamper), windowJoinRecords(), 4, false)
}

// TestTypedWindowsAndJoinsMatchTheErasedPath: windows and a stream–table
// join reached by a typed chain produce what the erased path produces,
// record for record (late records with their headers, retractions,
// joined values), and blame the same failures on the same nodes with the
// same classes.
func TestTypedWindowsAndJoinsMatchTheErasedPath(t *testing.T) {
	typed, erased := runWindowJoin(t, false, nil), runWindowJoin(t, true, nil)
	if !typed.direct || erased.direct {
		t.Fatalf("typed chain linked: %v with the chains, %v without", typed.direct, erased.direct)
	}
	if d := diffRuns(typed, erased); d != "" {
		t.Fatalf("typed chains and the erased path differ: typed chains %s", d)
	}
	want := []string{
		`processing in tumbling at in/3: dead-letter (panic: thirteen)`,
		`deserialization in SOURCE at in/4: dead-letter`,
		`processing in LEFTJOIN at in/6: dead-letter (panic: twenty-one)`,
	}
	checkActions(t, typed.actions, want)
	topics := perTopic(typed.out)
	for _, topic := range []string{"late", "tumbling", "sessions", "joined", "dlq"} {
		if topics[topic] == 0 {
			t.Errorf("nothing reached %s: %v", topic, topics)
		}
	}
}

// TestTypedWindowsAndJoinsNegativeControl: the comparison above catches a
// typed entry of the windows or of the join that loses records, so it
// also shows that those entries are the ones the records take.
func TestTypedWindowsAndJoinsNegativeControl(t *testing.T) {
	// lossy makes the entry of the first node whose name begins with
	// prefix skip every other record.
	lossy := func(prefix string) func(*exec.Plan) {
		return relink(prefix, func(link linker) linker {
			return func(f *exec.Frame, proc exec.Processor, next any) any {
				entry, ok := link(f, proc, next).(func(string, int64) error)
				if !ok {
					return nil
				}
				calls := 0
				return func(k string, v int64) error {
					if calls++; calls%2 == 0 {
						return nil
					}
					return entry(k, v)
				}
			}
		})
	}
	for _, prefix := range []string{"tumbling-window", "sessions-window", "LEFTJOIN-TABLE"} {
		t.Run(prefix, func(t *testing.T) {
			if d := diffRuns(runWindowJoin(t, false, lossy(prefix)), runWindowJoin(t, true, nil)); d == "" {
				t.Fatal("the comparison saw no difference")
			}
		})
	}
}

// windowChainTopology windows one source four ways, so that window results
// take typed chains from each place they are forwarded, and stay erased
// where they must:
//   - "final": tumbling windows that fire at their close, as the watermark
//     passes it, each result a unit of its own; a count of 3 is refused by
//     the sink's serde.
//   - "every": hopping windows that fire at every record, inside the
//     record's chain, which goes on to the source's next child, the sink
//     "echo": it must find the record's timestamp and headers in the
//     frame. A value of 13 panics in the adder, a sum of 21 in the Map
//     after the windows, and the sink's serde refuses a sum of 3.
//   - "sessions": session windows that fire at every record, whose merges
//     retract by the erased path between typed results.
//   - "nilable": tumbling windows whose aggregate, of interface type, is
//     nil when the last record was a multiple of 4: no result then, as a
//     nil change is nothing on the erased path.
//   - "with-late": tumbling windows with a late-records child, whose
//     results stay erased.
//
// extracted takes the records' time with TimestampFrom, whose source is
// not linked: the erased path brings the records to the windows, whose
// results still take the typed chains.
func windowChainTopology(extracted bool) *topology.Topology {
	t := topology.New()
	ws := topology.WindowedSerde(serde.String)
	opts := []topology.SourceOption{topology.DeadLetter("dlq"), topology.Watermarks(window.BoundedOutOfOrderness(20 * time.Millisecond))}
	if extracted {
		opts = append(opts, topology.TimestampFrom(func(_ string, _ int64, ts int64) int64 { return ts }))
	}
	s := topology.From(t, "in", serde.String, serde.Int64Text, opts...)
	g := topology.GroupByKey(s)

	final := topology.CountWindows(topology.WindowedBy(g, window.Tumbling(50*time.Millisecond), topology.EmitFinal()),
		topology.Materialized("final", serde.String, serde.Int64))
	topology.To(topology.ToStream(final), "final", ws, refusesThree)

	every := topology.AggregateWindows(topology.WindowedBy(g, window.Hopping(40*time.Millisecond, 20*time.Millisecond), topology.EmitEveryUpdate()),
		func() int64 { return 0 }, func(_ string, v, sum int64) int64 {
			if v == 13 {
				panic("thirteen")
			}
			return sum + v
		}, topology.Materialized("every", serde.String, serde.Int64))
	topology.To(topology.Map(topology.ToStream(every), func(k topology.Windowed[string], sum int64) (string, int64) {
		if sum == 21 {
			panic("twenty-one")
		}
		return k.Key + "@" + strconv.FormatInt(k.Window.Start, 10), sum
	}), "every", serde.String, refusing(3, "every refused"))
	topology.To(s, "echo", serde.String, serde.Int64Text)

	sessions := topology.CountWindows(topology.WindowedBy(g, window.InactivityGap(15*time.Millisecond), topology.EmitEveryUpdate()),
		topology.Materialized("sessions", serde.String, serde.Int64))
	topology.To(topology.ToStream(sessions), "sessions", ws, serde.Int64Text)

	nilable := topology.AggregateWindows(topology.WindowedBy(g, window.Tumbling(50*time.Millisecond), topology.EmitFinal()),
		func() any { return nil }, func(_ string, v int64, agg any) any {
			if v%4 == 0 {
				return nil
			}
			return v
		}, topology.Materialized("nilable", serde.String, serde.JSON[any]()))
	topology.To(topology.ToStream(nilable), "nilable", ws, serde.JSON[any]())

	lw := topology.WindowedBy(g, window.Tumbling(30*time.Millisecond), topology.EmitFinal())
	topology.To(topology.ToStream(topology.CountWindows(lw, topology.Materialized("with-late", serde.String, serde.Int64))), "with-late", ws, serde.Int64Text)
	topology.To(topology.LateRecords(lw), "late", serde.String, serde.Int64Text)
	return t
}

// windowChainRecords are windowChainTopology's input: twelve keys spread
// over testkeys' lengths and UUIDs, out of order by up to 60 ms (so some
// are late), each with a header, one value that does not decode.
func windowChainRecords() []*kgo.Record {
	keys := spreadKeys(12)
	var recs []*kgo.Record
	for i := range 600 {
		v := strconv.Itoa(i % 17)
		if i == 250 {
			v = "x"
		}
		ts := int64(10_000 + 2*i - (i*7919)%61)
		recs = append(recs, &kgo.Record{
			Topic: "in", Key: []byte(keys[(i*7)%len(keys)]), Value: []byte(v), Offset: int64(i),
			Timestamp: time.UnixMilli(ts), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}},
		})
	}
	return recs
}

// spreadKeys is n of testkeys' keys, spread over its lengths and UUIDs.
func spreadKeys(n int) []string {
	all := testkeys.All()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = all[i*len(all)/n]
	}
	return keys
}

// runWindowChain runs windowChainRecords through windowChainTopology
// (runPlan), committing every seven records; erased and tamper as in
// runWindowJoin.
func runWindowChain(t *testing.T, extracted, erased bool, tamper func(*exec.Plan)) chainRun {
	t.Helper()
	return runPlan(t, planOf(t, windowChainTopology(extracted), erased, tamper), windowChainRecords(), 7, false)
}

// TestTypedWindowsMatchTheErasedPath: window results sent down typed
// chains, at the close and at every record, produce what the erased path
// produces, record for record (timestamps and headers included, of the
// results and of the records that share their chain), and blame the same
// failures on the same nodes with the same classes; whether a typed chain
// or the erased path brings the records to the windows.
func TestTypedWindowsMatchTheErasedPath(t *testing.T) {
	for _, extracted := range []bool{false, true} {
		t.Run("extracted="+strconv.FormatBool(extracted), func(t *testing.T) {
			typed, erased := runWindowChain(t, extracted, false, nil), runWindowChain(t, extracted, true, nil)
			if typed.direct == extracted || erased.direct {
				t.Fatalf("typed chain linked from the source: %v with the chains, %v without", typed.direct, erased.direct)
			}
			if d := diffRuns(typed, erased); d != "" {
				t.Fatalf("typed chains and the erased path differ: typed chains %s", d)
			}
			topics := perTopic(typed.out)
			for _, topic := range []string{"final", "every", "echo", "sessions", "nilable", "with-late", "late", "dlq"} {
				if topics[topic] == 0 {
					t.Errorf("nothing reached %s: %v", topic, topics)
				}
			}
			var refused, refusedEvery, panicked, panickedMap bool
			for _, a := range typed.actions {
				refused = refused || strings.HasPrefix(a, "production in SINK") && strings.HasSuffix(a, "(value: refused)")
				refusedEvery = refusedEvery || strings.HasPrefix(a, "production in SINK") && strings.HasSuffix(a, "(value: every refused)")
				panicked = panicked || strings.HasPrefix(a, "processing in every") && strings.Contains(a, "thirteen")
				panickedMap = panickedMap || strings.HasPrefix(a, "processing in MAP") && strings.Contains(a, "twenty-one")
			}
			if !refused || !refusedEvery || !panicked || !panickedMap {
				t.Errorf("failures\n%s\nwant a refused result at a close and inside a record, a panic in the adder and one in the Map after it",
					strings.Join(typed.actions, "\n"))
			}
		})
	}
}

// TestTypedWindowsNegativeControl: the comparison above catches typed
// window results that are lost, whichever path brings the records to the
// windows (so the results take the chain on both), and a window that
// leaves the record's frame changed for the source's next child, as a
// send that did not give the frame back would.
func TestTypedWindowsNegativeControl(t *testing.T) {
	controls := map[string]func(*exec.Plan){
		"lossy final": relink("final-window", func(link linker) linker {
			return func(f *exec.Frame, proc exec.Processor, next any) any {
				emit := next.(func(topology.Windowed[string], exec.ChangeOf[int64]) error)
				n := 0
				return link(f, proc, func(k topology.Windowed[string], ch exec.ChangeOf[int64]) error {
					if n++; n%2 == 0 {
						return nil
					}
					return emit(k, ch)
				})
			}
		}),
		// The window's entry leaves the frame as a result's chain
		// left it, without the record's headers.
		"frame left changed": relink("every-window", func(link linker) linker {
			return func(f *exec.Frame, proc exec.Processor, next any) any {
				entry := link(f, proc, next).(func(string, int64) error)
				return func(k string, v int64) error {
					err := entry(k, v)
					f.Headers = nil
					return err
				}
			}
		}),
	}
	for name, tamper := range controls {
		for _, extracted := range []bool{false, true} {
			if extracted && name == "frame left changed" {
				continue // the window's entry runs only from a linked source
			}
			t.Run(name+"/extracted="+strconv.FormatBool(extracted), func(t *testing.T) {
				if d := diffRuns(runWindowChain(t, extracted, false, tamper), runWindowChain(t, extracted, true, nil)); d == "" {
					t.Fatal("the comparison saw no difference")
				}
			})
		}
	}
}
