package task

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// windowJoinTopology puts the stateful operators whose input takes typed
// chains but whose output does not (windows, whose results the watermark
// fires) or does (a stream–table join) after one source: tumbling windows
// with a late-records stream, sessions that retract as they merge, and a
// left join with a table read from a topic. Records go wrong on the way:
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
