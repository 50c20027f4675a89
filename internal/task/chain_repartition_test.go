package task

import (
	"encoding/binary"
	"maps"
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

// The repartition topics of repartitionTopology, as the tasks of
// application "app" read them.
const (
	byValueTopic = "app-by-value-repartition"
	throughTopic = "app-through-repartition"
	ownTopic     = "app-own-repartition"
)

// repartitionTopology reads three repartition topics, whose sources start
// typed chains but for deletes:
//   - "by-value", grouped by key after it: a count whose sink's serde
//     refuses 30 (so a key's count stays at 29 after it), a sum whose
//     adder panics at 13, and tumbling and sliding windows closed by the
//     watermarks the topic carries. The topic is no count's own, so a
//     header of the name a count's weight has (exec.HeaderCount) weighs
//     nothing there.
//   - "own", a count's own (GroupBy), where a record may stand for
//     several: the count adds its weight, and refuses a weight that is
//     not 8 bytes.
//   - "through" (Repartition): a Filter and a MapValues that pass deletes
//     on to a sink, as tombstones, and panic at 11.
func repartitionTopology() *topology.Topology {
	t := topology.New()
	s := topology.From(t, "in", serde.String, serde.Int64Text, topology.DeadLetter("dlq"))
	g := topology.GroupByKey(topology.Repartition(topology.SelectKey(s, func(k string, v int64) string { return strconv.FormatInt(v%5, 10) + k }),
		"by-value", serde.String, serde.Int64Text))
	topology.To(topology.ToStream(topology.Count(g, topology.Materialized("counts", serde.String, serde.Int64))),
		"counts", serde.String, refusing(30, "refused"))
	sums := topology.Aggregate(g, func() int64 { return 0 }, func(_ string, v, sum int64) int64 {
		if v == 13 {
			panic("thirteen")
		}
		return sum + v
	}, topology.Materialized("sums", serde.String, serde.Int64))
	topology.To(topology.ToStream(sums), "sums", serde.String, serde.Int64Text)
	ws := topology.CountWindows(topology.WindowedBy(g, window.Tumbling(50*time.Millisecond), topology.EmitFinal()),
		topology.Materialized("windows", serde.String, serde.Int64))
	topology.To(topology.ToStream(ws), "windows", topology.WindowedSerde(serde.String), serde.Int64Text)
	sliding := topology.CountWindows(topology.WindowedBy(g, window.Sliding(30*time.Millisecond), topology.EmitFinal()),
		topology.Materialized("sliding", serde.String, serde.Int64))
	topology.To(topology.ToStream(sliding), "sliding", topology.WindowedSerde(serde.String), serde.Int64Text)

	own := topology.Count(topology.GroupBy(s, func(k string, _ int64) string { return k }, topology.Grouped("own", serde.String, serde.Int64Text)),
		topology.Materialized("own-counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(own), "own-counts", serde.String, serde.Int64Text)

	through := topology.Repartition(s, "through", serde.String, serde.Int64Text)
	kept := topology.Filter(through, func(_ string, v int64) bool { return v%4 != 0 })
	topology.To(topology.MapValues(kept, func(v int64) int64 {
		if v == 11 {
			panic("eleven")
		}
		return v * 10
	}), "through-out", serde.String, serde.Int64Text)
	return t
}

// repartitionRecords are repartitionTopology's input: a few records on
// "in", then what its repartition topics may hold, written as a writer
// would and worse. Twelve keys of testkeys' lengths and UUIDs; deletes
// (no value); values that do not decode; records that stand for three
// (sluice.count), and on the count's own topic one whose weight is not 8
// bytes; each with its writer's watermark (sluice.wm) and a header of its
// own; the writer's watermark announcements every 40 records.
func repartitionRecords() []*kgo.Record {
	keys := spreadKeys(12)
	var recs []*kgo.Record
	for i := range 40 {
		recs = append(recs, &kgo.Record{
			Topic: "in", Key: []byte(keys[i%len(keys)]), Value: []byte(strconv.Itoa(i % 17)), Offset: int64(i),
			Timestamp: time.UnixMilli(int64(5_000 + i)), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}},
		})
	}
	wm := func(ms int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(ms)) }
	for _, topic := range []string{byValueTopic, throughTopic, ownTopic} {
		for i := range 500 {
			ts := int64(10_000 + 2*i - (i*7919)%31)
			r := &kgo.Record{
				Topic: topic, Key: []byte(keys[(i*7)%len(keys)]), Value: []byte(strconv.Itoa(i % 17)), Offset: int64(i),
				Timestamp: time.UnixMilli(ts),
				Headers: []kgo.RecordHeader{
					{Key: exec.HeaderRecordWatermark, Value: wm(ts - 40)},
					{Key: "h", Value: []byte(strconv.Itoa(i))},
				},
			}
			switch {
			case i%40 == 39:
				r.Key = nil
				r.Value = append(wm(int64(10_000+2*i-40)), 0)
				r.Headers = []kgo.RecordHeader{{Key: exec.HeaderWatermark, Value: []byte("0")}}
			case i%23 == 5:
				r.Value = nil
			case i%97 == 50:
				r.Value = []byte("x")
			case i%31 == 7:
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: exec.HeaderCount, Value: binary.BigEndian.AppendUint64(nil, 3)})
			case i%131 == 17:
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: exec.HeaderCount, Value: []byte{3}})
			}
			recs = append(recs, r)
		}
	}
	return recs
}

// runRepartition runs repartitionRecords through repartitionTopology
// (runPlan), committing every nine records; erased and tamper as in
// runWindowJoin.
func runRepartition(t *testing.T, erased bool, tamper func(*exec.Plan)) chainRun {
	t.Helper()
	return runPlan(t, planOf(t, repartitionTopology(), erased, tamper), repartitionRecords(), 9, false)
}

// TestTypedRepartitionSourcesMatchTheErasedPath: records of repartition
// topics that start typed chains produce what the erased path produces,
// record for record, deletes included (which take the erased path), and
// blame the same failures on the same nodes with the same classes.
// Windows ignore deletes.
func TestTypedRepartitionSourcesMatchTheErasedPath(t *testing.T) {
	typed, erased := runRepartition(t, false, nil), runRepartition(t, true, nil)
	for _, topic := range []string{"in", byValueTopic, throughTopic, ownTopic} {
		if !typed.linked[topic] || erased.linked[topic] {
			t.Fatalf("%s linked: %v with the chains, %v without", topic, typed.linked[topic], erased.linked[topic])
		}
	}
	if d := diffRuns(typed, erased); d != "" {
		t.Fatalf("typed chains and the erased path differ: typed chains %s", d)
	}
	topics := perTopic(typed.out)
	for _, topic := range []string{byValueTopic, throughTopic, ownTopic, "counts", "sums", "windows", "sliding", "own-counts", "through-out", "dlq"} {
		if topics[topic] == 0 {
			t.Errorf("nothing reached %s: %v", topic, topics)
		}
	}
	deletes := 0
	for _, o := range typed.out {
		if strings.HasPrefix(o, "through-out ") && strings.Contains(o, "=null ") {
			deletes++
		}
	}
	if deletes == 0 {
		t.Error("no delete went through the Filter to its sink")
	}
	// The count on its own topic adds each record's weight; a header of
	// that name weighs nothing on the others.
	want, got := ownCounts(repartitionRecords()), lastOwnCounts(t, typed.out)
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Errorf("own-counts end at %v, want %v", got, want)
	}
	for _, a := range typed.actions {
		if strings.Contains(a, "standing for") {
			t.Errorf("a weight was read where it weighs nothing: %s", a)
		}
	}
	// Deletes reach the windows, which ignore them as aggregations do.
	for _, a := range typed.actions {
		if strings.HasPrefix(a, "processing in windows") || strings.HasPrefix(a, "processing in sliding") {
			t.Errorf("the windows failed: %s", a)
		}
	}
	failures := map[string]bool{
		"deserialization in by": false, "deserialization in through": false, "processing in own": false,
		"processing in sums": false, "processing in MAPVALUES": false, "production in SINK": false,
	}
	for _, a := range typed.actions {
		for w := range failures {
			failures[w] = failures[w] || strings.HasPrefix(a, w)
		}
	}
	for w, seen := range failures {
		if !seen {
			t.Errorf("failures\n%s\nwant one beginning %q", strings.Join(typed.actions, "\n"), w)
		}
	}
}

// ownCounts is what the count on its own topic must end at, from the
// topic's records: each record that is not a watermark announcement, a
// delete or a value that does not decode adds its weight, unless its
// weight is malformed.
func ownCounts(recs []*kgo.Record) map[string]int64 {
	counts := map[string]int64{}
	for _, r := range recs {
		if r.Topic != ownTopic || r.Value == nil || string(r.Value) == "x" || r.Headers[0].Key == exec.HeaderWatermark {
			continue
		}
		w := int64(1)
		for _, h := range r.Headers {
			if h.Key == exec.HeaderCount {
				if len(h.Value) != 8 {
					w = 0
				} else {
					w = int64(binary.BigEndian.Uint64(h.Value))
				}
			}
		}
		if w > 0 {
			counts[string(r.Key)] += w
		}
	}
	return counts
}

// lastOwnCounts is the last count of each key on "own-counts" in out
// (describe's).
func lastOwnCounts(t *testing.T, out []string) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	for _, o := range out {
		rest, ok := strings.CutPrefix(o, "own-counts ")
		if !ok {
			continue
		}
		qk, err := strconv.QuotedPrefix(rest)
		if err != nil {
			t.Fatal(err)
		}
		qv, err := strconv.QuotedPrefix(rest[len(qk)+1:])
		if err != nil {
			t.Fatal(err)
		}
		k, _ := strconv.Unquote(qk)
		v, _ := strconv.Unquote(qv)
		if counts[k], err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	return counts
}

// TestTypedRepartitionSourcesNegativeControl: the comparison above catches
// a repartition source's typed entry that loses records, so it also shows
// that the records take it.
func TestTypedRepartitionSourcesNegativeControl(t *testing.T) {
	for _, prefix := range []string{"by-value-repartition-source", "through-repartition-source", "own-repartition-source"} {
		t.Run(prefix, func(t *testing.T) {
			lossy := relink(prefix, func(link linker) linker {
				return func(f *exec.Frame, proc exec.Processor, next any) any {
					entry, ok := link(f, proc, next).(func(k, v []byte) error)
					if !ok {
						return nil
					}
					calls := 0
					return func(k, v []byte) error {
						if calls++; calls%5 == 0 {
							return nil
						}
						return entry(k, v)
					}
				}
			})
			if d := diffRuns(runRepartition(t, false, lossy), runRepartition(t, true, nil)); d == "" {
				t.Fatal("the comparison saw no difference")
			}
		})
	}
}
