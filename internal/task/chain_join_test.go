package task

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// joinChainTopology is an outer stream join whose left side a typed chain
// reaches (a source, then MapValues), with its stores on Pebble or in
// memory. Records go wrong on the way: "x" does not decode, the left
// value 11 panics in the joiner at the second right record it joins,
// after it joined the first, and a right value "refuse" makes joined
// values that the sink's serde refuses.
func joinChainTopology(stores ...topology.StoreOption) *topology.Topology {
	t := topology.New()
	wm := topology.Watermarks(window.BoundedOutOfOrderness(5 * time.Millisecond))
	l := topology.MapValues(topology.From(t, "in", serde.String, serde.Int64Text, topology.DeadLetter("dlq"), wm),
		func(v int64) int64 { return v * 10 })
	r := topology.From(t, "in2", serde.String, serde.String, topology.DeadLetter("dlq"), wm)
	j := topology.OuterJoinStreams(l, r, topology.JoinWindows(20*time.Millisecond),
		func(_ string, lv int64, lok bool, rv string, rok bool) string {
			if lv == 110 && rv == "r20" { // (joined: a panic at the watermark, with no record, stops the task)
				panic("eleven")
			}
			return fmt.Sprintf("%d/%v|%s/%v", lv, lok, rv, rok)
		},
		topology.StreamJoined[string, int64, string]{Name: "j", Key: serde.String, Left: serde.Int64Text, Right: serde.String, Stores: stores})
	refusing := serde.Funcs(func(s string) ([]byte, error) {
		if strings.Contains(s, "|refuse/") {
			return nil, fmt.Errorf("refused %s", s)
		}
		return []byte(s), nil
	}, func(b []byte) (string, error) { return string(b), nil })
	topology.To(j, "out", serde.String, refusing)
	return t
}

// joinChainRecords alternate between the join's two topics, keys k0–k2,
// a little out of order in time, each with a header, so that the records
// of one side join those of the other that came before them: those of the
// right side first, then, once the sides swap, those of the left. Keys
// of one record join nothing. The last records, far ahead, take the
// watermark past every record, so that the outer join emits the ones
// that joined nothing.
func joinChainRecords() []*kgo.Record {
	var recs []*kgo.Record
	for i := range 40 {
		key := "k" + strconv.Itoa(i%3)
		if i%7 == 4 {
			key = "u" + strconv.Itoa(i) // a key of one record, which joins nothing
		}
		r := &kgo.Record{Topic: "in", Key: []byte(key), Offset: int64(i / 2),
			Timestamp: time.UnixMilli(int64(1000 + 4*i - 6*(i%4))), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}}}
		switch {
		case (i%2 == 1) != (i >= 20): // from the 20th, the sides swap
			r.Topic, r.Value = "in2", []byte("r"+strconv.Itoa(i))
		case i == 8:
			r.Value = []byte("x")
		default:
			r.Value = []byte(strconv.Itoa(i / 2))
		}
		if i == 15 {
			r.Value = []byte("refuse")
		}
		recs = append(recs, r)
	}
	return append(recs, &kgo.Record{Topic: "in", Key: []byte("k9"), Value: []byte("1"), Offset: 20, Timestamp: time.UnixMilli(5000)},
		&kgo.Record{Topic: "in2", Key: []byte("k9"), Value: []byte("end"), Offset: 20, Timestamp: time.UnixMilli(5000)})
}

// TestTypedStreamJoinsMatchTheErasedPath: a stream join's sides in a typed
// chain produce what the erased path produces, record for record (joined
// records at their own timestamps, with the headers of the record that
// joined; the outer join's unjoined records), and blame the same failures
// on the same nodes with the same classes; with the stores on Pebble and
// in memory.
func TestTypedStreamJoinsMatchTheErasedPath(t *testing.T) {
	for _, inMemory := range []bool{false, true} {
		t.Run("in-memory="+strconv.FormatBool(inMemory), func(t *testing.T) {
			var stores []topology.StoreOption
			if inMemory {
				stores = append(stores, topology.InMemory())
			}
			run := func(erased bool, tamper func(*exec.Plan)) chainRun {
				return runPlan(t, planOf(t, joinChainTopology(stores...), erased, tamper), joinChainRecords(), 4, false)
			}
			typed, erased := run(false, nil), run(true, nil)
			if !typed.linked["in"] || erased.linked["in"] {
				t.Fatalf("typed chain linked: %v with the chains, %v without", typed.linked["in"], erased.linked["in"])
			}
			if d := diffRuns(typed, erased); d != "" {
				t.Fatalf("typed chains and the erased path differ: typed chains %s", d)
			}
			checkActions(t, typed.actions, []string{
				`deserialization in SOURCE at in/4: dead-letter`,
				`production in SINK at in2/7: continue (value: refused`,
				`processing in j at in/11: dead-letter (panic: eleven)`,
			})
			joined, unjoined := 0, 0
			for _, o := range typed.out {
				switch {
				case !strings.HasPrefix(o, "out "):
				case strings.Contains(o, "/true|") && strings.Contains(o, "/true\""):
					joined++
				default:
					unjoined++
				}
			}
			if joined < 10 || unjoined < 4 {
				t.Errorf("%d records joined and %d went out unjoined, want 10 and 4 at least:\n%s", joined, unjoined, strings.Join(typed.out, "\n"))
			}
			// Negative controls: the comparison catches a join side's
			// typed entry whose joined records lose their timestamps,
			// and one that loses every other joined record.
			controls := map[string]func(next any, f *exec.Frame) any{
				"the record's timestamp": func(next any, f *exec.Frame) any {
					emit := next.(func(string, string) error)
					return func(k, v string) error {
						f.Timestamp = 0
						return emit(k, v)
					}
				},
				"every other joined record": func(next any, _ *exec.Frame) any {
					emit := next.(func(string, string) error)
					n := 0
					return func(k, v string) error {
						if n++; n%2 == 0 {
							return nil
						}
						return emit(k, v)
					}
				},
			}
			for name, wrap := range controls {
				tamper := relink("j-join-left", func(link linker) linker { // the left side joins from the 20th record on
					return func(f *exec.Frame, proc exec.Processor, next any) any {
						return link(f, proc, wrap(next, f))
					}
				})
				if d := diffRuns(run(false, tamper), erased); d == "" {
					t.Errorf("control %q: the comparison saw no difference", name)
				}
			}
		})
	}
}
