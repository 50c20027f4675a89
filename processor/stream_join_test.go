package processor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestInMemoryStreamJoinAcrossRestarts: a stream join whose stores are in
// memory (StreamJoined.Stores) keeps its window through a restart with its
// state directory deleted, from the changelogs alone. The left records
// come before the restart, the right ones after: every key, of every
// encoded length and UUIDs, joins once.
func TestInMemoryStreamJoinAcrossRestarts(t *testing.T) {
	keys := testkeys.All()
	addrs := testBrokers(t)
	ctx := context.Background()
	left, right, out := uniq(t, "jm-left"), uniq(t, "jm-right"), uniq(t, "jm-out")
	cl := setup(t, addrs, 2, left, right, out)
	appID, dir := uniq(t, "jm"), t.TempDir()
	build := func() *topology.Topology {
		tp := topology.New()
		l := topology.From(tp, left, serde.String, serde.String)
		r := topology.From(tp, right, serde.String, serde.String)
		j := topology.JoinStreams(l, r, topology.JoinWindows(time.Minute), func(_, a, b string) string { return a + "+" + b },
			topology.StreamJoined[string, string, string]{Name: "jm", Key: serde.String, Left: serde.String, Right: serde.String,
				Stores: []topology.StoreOption{topology.InMemory()}})
		topology.To(j, out, serde.String, serde.String)
		return tp
	}
	for _, phase := range []struct{ topic, value string }{{left, "l"}, {right, "r"}} {
		var recs []*kgo.Record
		for i, k := range keys {
			recs = append(recs, &kgo.Record{Topic: phase.topic, Key: []byte(k), Value: []byte(phase.value), Timestamp: time.UnixMilli(int64(1000 + i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		runThenWipe(t, build(), appID, addrs, dir, int64(len(keys)))
	}
	var want []string
	for _, k := range keys {
		want = append(want, k+"=l+r")
	}
	wantJoined(t, addrs, out, want)
}

// wantJoined checks that topic holds exactly want, "key=value" in any
// order, read_committed.
func wantJoined(t *testing.T, addrs []string, topic string, want []string) {
	t.Helper()
	rs, err := readback.ReadCommitted(context.Background(), addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, string(r.Key)+"="+string(r.Value))
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("%d joined, want %d: %q, want %q", len(got), len(want), got, want)
	}
}

// TestStreamJoinDropsSegmentsAsRanges: a stream join's due segments leave
// its changelogs as range records (names.RangeDeleteHeader), not as a
// tombstone per record, and a restart with the state directory deleted
// restores from them: every key, of every encoded length and UUIDs, joins
// once in the first run at an early time, once more after the watermark
// has passed those records' segments, and once after the restart with a
// record of the later time, which only the restored store can join.
func TestStreamJoinDropsSegmentsAsRanges(t *testing.T) {
	keys := testkeys.All()
	addrs := testBrokers(t)
	ctx := context.Background()
	left, right, out := uniq(t, "jr-left"), uniq(t, "jr-right"), uniq(t, "jr-out")
	cl := setup(t, addrs, 2, left, right, out)
	appID, dir := uniq(t, "jr"), t.TempDir()
	build := func() *topology.Topology {
		tp := topology.New()
		wm := topology.Watermarks(window.BoundedOutOfOrderness(0))
		l := topology.From(tp, left, serde.String, serde.String, wm)
		r := topology.From(tp, right, serde.String, serde.String, wm)
		j := topology.JoinStreams(l, r, topology.JoinWindows(time.Second), func(_, a, b string) string { return a + "+" + b },
			topology.StreamJoined[string, string, string]{Name: "jr", Key: serde.String, Left: serde.String, Right: serde.String})
		topology.To(j, out, serde.String, serde.String)
		return tp
	}
	produce := func(topic, value string, ts int64) {
		t.Helper()
		var recs []*kgo.Record
		for _, k := range keys {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(value), Timestamp: time.UnixMilli(ts)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Early records on both sides, then later ones, whose watermark
	// (every partition's) makes the early segments due.
	produce(left, "l1", 1_000)
	produce(right, "r1", 1_000)
	produce(left, "l2", 100_000)
	produce(right, "r2", 100_000)
	runThenWipe(t, build(), appID, addrs, dir, int64(4*len(keys)))
	ranges, tombstones, packs := 0, 0, 0
	for _, side := range []string{"left", "right"} {
		rs, err := readback.ReadCommitted(ctx, addrs, names.Changelog(appID, "jr-"+side))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			switch {
			case slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == names.RangeDeleteHeader }):
				ranges++
			case slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == names.PackHeader }):
				// The records, packed by segment: no delete among
				// their writes either.
				packs++
				ws, err := task.AppendChangelogWrites(nil, r)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range ws {
					if w.Value == nil {
						tombstones++
					}
				}
			case r.Value == nil:
				tombstones++
			}
		}
	}
	if ranges == 0 || tombstones > 0 || packs == 0 {
		t.Fatalf("the changelogs hold %d range records, %d tombstones and %d packs: want the records packed, and the due segments dropped as ranges, with no tombstone", ranges, tombstones, packs)
	}
	produce(right, "r3", 100_001)
	runThenWipe(t, build(), appID, addrs, dir, int64(len(keys)))
	var want []string
	for _, k := range keys {
		want = append(want, k+"=l1+r1", k+"=l2+r2", k+"=l2+r3")
	}
	wantJoined(t, addrs, out, want)
}
