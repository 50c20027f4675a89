package processor_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestIgnoredDeletesAreCounted turns a table into a stream whose deletes
// reach each node that ignores them: a count, tumbling and sliding windows,
// a stream–stream join, a join with a table and one with a global table,
// and the operators that change the key (Map, FlatMap, SelectKey). Each of
// them counts each delete once in the instance's IgnoredDeletes
// (sluice_ignored_deletes_total), and the count goes on past them. A
// MapValues passes them on, uncounted.
func TestIgnoredDeletesAreCounted(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, other, lookup, global := uniq(t, "ign-in"), uniq(t, "ign-other"), uniq(t, "ign-lookup"), uniq(t, "ign-global")
	outs := []string{uniq(t, "ign-count"), uniq(t, "ign-tumbling"), uniq(t, "ign-sliding"), uniq(t, "ign-join"), uniq(t, "ign-table"), uniq(t, "ign-global-out"),
		uniq(t, "ign-map"), uniq(t, "ign-flatmap"), uniq(t, "ign-selectkey"), uniq(t, "ign-mapvalues")}
	cl := setup(t, addrs, 1, append([]string{in, other, lookup, global}, outs...)...)

	tp := topology.New()
	s := topology.ToStream(topology.TableFrom(tp, in, topology.Materialized("t", serde.String, serde.String)))
	topology.To(topology.ToStream(topology.Count(topology.GroupByKey(s), topology.Materialized("count", serde.String, serde.Int64))),
		outs[0], serde.String, serde.Int64)
	for i, w := range []topology.Windows{window.Tumbling(time.Minute), window.Sliding(time.Minute)} {
		ws := topology.WindowedBy(topology.GroupByKey(s), w)
		topology.To(topology.ToStream(topology.CountWindows(ws, topology.Materialized([]string{"tumbling", "sliding"}[i], serde.String, serde.Int64))),
			outs[1+i], topology.WindowedSerde(serde.String), serde.Int64)
	}
	both := func(_ string, l, r string) string { return l + "|" + r }
	topology.To(topology.JoinStreams(s, topology.From(tp, other, serde.String, serde.String), topology.JoinWindows(time.Minute), both,
		topology.StreamJoined[string, string, string]{Name: "join", Key: serde.String, Left: serde.String, Right: serde.String}),
		outs[3], serde.String, serde.String)
	topology.To(topology.JoinTable(s, topology.TableFrom(tp, lookup, topology.Materialized("lookup", serde.String, serde.String)), both),
		outs[4], serde.String, serde.String)
	g := topology.GlobalTableFrom(tp, global, topology.Materialized("global", serde.String, serde.String))
	topology.To(topology.JoinGlobal(s, g, func(k, _ string) string { return k }, both), outs[5], serde.String, serde.String)
	topology.To(topology.Map(s, func(k, v string) (string, string) { return v, k }), outs[6], serde.String, serde.String)
	topology.To(topology.FlatMap(s, func(k, v string) []topology.KeyValue[string, string] {
		return []topology.KeyValue[string, string]{{Key: v, Value: k}}
	}), outs[7], serde.String, serde.String)
	topology.To(topology.SelectKey(s, func(_, v string) string { return v }), outs[8], serde.String, serde.String)
	topology.To(topology.MapValues(s, func(v string) string { return v + "!" }), outs[9], serde.String, serde.String)

	// Two deletes among five records; then a record after them, which
	// the count must still take.
	at := time.UnixMilli(1_000_000)
	for i, r := range []*kgo.Record{
		{Topic: global, Key: []byte("a"), Value: []byte("g")},
		{Topic: lookup, Key: []byte("a"), Value: []byte("l")},
		{Topic: other, Key: []byte("a"), Value: []byte("o")},
		{Topic: in, Key: []byte("a"), Value: []byte("1")},
		{Topic: in, Key: []byte("b"), Value: []byte("1")},
		{Topic: in, Key: []byte("a")},
		{Topic: in, Key: []byte("b")},
		{Topic: in, Key: []byte("a"), Value: []byte("2")},
	} {
		r.Timestamp = at.Add(time.Duration(i) * time.Second)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	app, err := processor.New(tp, processor.ApplicationID(uniq(t, "ignored")), processor.Brokers(addrs...), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(app, func(a *processor.App) bool { return a.Stats().Processed.Load() >= 7 }); err != nil {
		t.Fatal(err)
	}
	st := app.Stats()
	if n, aborts := st.IgnoredDeletes.Load(), st.Aborts.Load(); n != 2*9 {
		t.Errorf("IgnoredDeletes = %d, want 18: each of the 2 deletes by each of the 9 nodes (%d transactions aborted)", n, aborts)
	}
	passed, err := readback.ReadCommitted(ctx, addrs, outs[9])
	if err != nil {
		t.Fatal(err)
	}
	if deletes := slices.DeleteFunc(passed, func(r *kgo.Record) bool { return r.Value != nil }); len(deletes) != 2 {
		t.Errorf("MapValues passed %d deletes on, want 2", len(deletes))
	}
	counts, err := readback.ReadCommitted(ctx, addrs, outs[0])
	if err != nil {
		t.Fatal(err)
	}
	final := map[string]string{}
	for _, r := range counts {
		final[string(r.Key)] = string(r.Value)
	}
	if final["a"] != string(binaryInt64(2)) || final["b"] != string(binaryInt64(1)) {
		t.Errorf("final counts %q: want a=2 and b=1, the deletes ignored", final)
	}
}
