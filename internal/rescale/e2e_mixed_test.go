package rescale_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/rescale"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// track is a Processor API processor with every kind of keyed state and
// timers: per user, the latest view's time (a value state with a TTL, so
// with a clock), every view's time (a list), the views per page (a map),
// and an event-time timer an hour after each view (never due here).
type track struct {
	specs  trackSpecs
	last   *topology.KeyedValue[[]byte, int64]
	hist   *topology.KeyedList[[]byte, int64]
	pages  *topology.KeyedMap[[]byte, string, int64]
	timers *topology.TimerService[[]byte]
}

type trackSpecs struct {
	last  topology.ValueSpec[[]byte, int64]
	hist  topology.ListSpec[[]byte, int64]
	pages topology.MapSpec[[]byte, string, int64]
	alarm topology.TimerSpec[[]byte]
}

func (p *track) Init(ctx *topology.ProcessorContext[[]byte, []byte]) error {
	p.last, p.hist, p.pages, p.timers = p.specs.last.Open(ctx), p.specs.hist.Open(ctx), p.specs.pages.Open(ctx), p.specs.alarm.Open(ctx)
	return nil
}

func (p *track) Process(r topology.Record[[]byte, []byte]) error {
	if err := p.last.Set(r.Key, r.Timestamp); err != nil {
		return err
	}
	if err := p.hist.Add(r.Key, r.Timestamp); err != nil {
		return err
	}
	n, _, err := p.pages.Get(r.Key, string(r.Value))
	if err != nil {
		return err
	}
	if err := p.pages.Put(r.Key, string(r.Value), n+1); err != nil {
		return err
	}
	return p.timers.RegisterEventTime(r.Key, r.Timestamp+time.Hour.Milliseconds())
}

func (p *track) OnTimer(topology.Timer[[]byte]) error { return nil }
func (p *track) Close() error                         { return nil }

// mixed reads views (key: user, value: page) and keeps them in every
// layout a user key or a repartitioned key can own: the processor's keyed
// states and timers (by user, as the input is partitioned), a sliding
// count per page, and a self-join of the views per page (by page, through
// repartition topics).
func mixed(in string) *topology.Topology {
	t := topology.New()
	views := topology.From(t, in, serde.Bytes, serde.Bytes, topology.Watermarks(window.BoundedOutOfOrderness(10*time.Second)))
	specs := trackSpecs{
		last:  topology.ValueState("rs-last", serde.Bytes, serde.Int64, topology.StateTTL(24*time.Hour)),
		hist:  topology.ListState("rs-hist", serde.Bytes, serde.Int64),
		pages: topology.MapState("rs-pages", serde.Bytes, serde.String, serde.Int64),
		alarm: topology.Timers("rs-alarms", serde.Bytes),
	}
	topology.Process(views, "rs-track", func() topology.Processor[[]byte, []byte, []byte, []byte] { return &track{specs: specs} },
		specs.last, specs.hist, specs.pages, specs.alarm)

	byPage := topology.GroupBy(views, func(_, page []byte) string { return string(page) },
		topology.Grouped("rs-by-page", serde.String, serde.Bytes))
	counts := topology.CountWindows(topology.WindowedBy(byPage, window.Sliding(time.Minute)),
		topology.Materialized("rs-sliding", serde.String, serde.Int64))
	topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, int64) { return w.Key, n }),
		in+"-counts", serde.String, serde.Int64)

	keyed := topology.SelectKey(views, func(_, page []byte) string { return string(page) })
	pairs := topology.JoinStreams(keyed, keyed, topology.JoinWindows(time.Minute),
		func(_ string, a, b []byte) []byte { return append(append([]byte(nil), a...), b...) },
		topology.StreamJoined[string, []byte, []byte]{Name: "rs-join", Key: serde.String, Left: serde.Bytes, Right: serde.Bytes})
	topology.To(pairs, in+"-pairs", serde.String, serde.Bytes)
	return t
}

// TestRescaleKeyedStateTimersSlidingJoin8To16 is TestRescalePageViews
// for the other layouts: keyed value (with its clock), list and map
// state, timers, a sliding window store and a stream–stream join's
// buffers. The views' times rise with the order they are written in and
// span under a second, so no record is late and nothing closes in either
// run, whatever the partitioning.
func TestRescaleKeyedStateTimersSlidingJoin8To16(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an application twice against a broker")
	}
	addrs := testbroker.Addrs(t)
	users := testkeys.Bytes()
	for _, u := range testkeys.UUIDs(10) {
		users = append(users, []byte(u))
	}
	pages := append(testkeys.Lengths()[1:30:30], testkeys.UUIDs(3)...)
	base := int64(1_700_000_000_000)
	var views []*kgo.Record
	for i, u := range users {
		for j := range i%3 + 1 {
			ts := base + int64(len(views))
			views = append(views, &kgo.Record{Key: u, Value: []byte(pages[(i*7+j)%len(pages)]), Timestamp: time.UnixMilli(ts)})
		}
	}
	outputs := []string{"-counts", "-pairs"}
	dir8 := runApp(t, addrs, 8, mixed, outputs, views)
	dir16 := runApp(t, addrs, 16, mixed, outputs, views)
	topo := mixed("in")
	old, run16 := readState(t, dir8, topo), readState(t, dir16, topo)

	// The reader names layouts from the plan, where a sliding store is a
	// window store with a query: give it its own.
	if old.kinds["rs-sliding"] != layout.KindWindow && old.kinds["rs-sliding"] != layout.KindSliding {
		t.Fatalf("the reader calls rs-sliding %q", old.kinds["rs-sliding"])
	}
	old.kinds["rs-sliding"], run16.kinds["rs-sliding"] = layout.KindSliding, layout.KindSliding
	want := map[string]layout.StoreKind{
		"rs-last": layout.KindState, "rs-hist": layout.KindState, "rs-pages": layout.KindState,
		"rs-alarms": layout.KindTimers, "rs-sliding": layout.KindSliding,
		"rs-join-left": layout.KindJoin, "rs-join-right": layout.KindJoin,
	}
	for name, kind := range want {
		if old.kinds[name] != kind || len(old.entries[name]) != 8 || len(run16.entries[name]) < 9 {
			t.Fatalf("%s: layout %q, entries in %d and %d partitions", name, old.kinds[name], len(old.entries[name]), len(run16.entries[name]))
		}
	}

	// A value state with a TTL stamps its entries and its clock with the
	// task's stream time, which depends on which keys share the task:
	// compare its keys only, and check the clocks merge to the latest.
	var clocks [][]byte
	for p, kvs := range old.entries["rs-last"] {
		c, ok := kvs[string(layout.StateClockKey)]
		if !ok {
			t.Fatalf("rs-last partition %d has no clock", p)
		}
		clocks = append(clocks, []byte(c))
		delete(kvs, string(layout.StateClockKey))
	}
	merged, err := rescale.Merge(layout.KindState, layout.StateClockKey, clocks)
	if err != nil {
		t.Fatal(err)
	}
	latest := int64(-1)
	for _, c := range clocks {
		ts, _ := layout.ParseClock(c)
		latest = max(latest, ts)
	}
	if ts, ok := layout.ParseClock(merged); !ok || ts != latest || latest < base {
		t.Fatalf("merged clock %d, the latest %d", ts, latest)
	}
	for _, p := range []partitioned{old, run16} {
		for _, kvs := range p.entries["rs-last"] {
			delete(kvs, string(layout.StateClockKey))
			for k := range kvs {
				kvs[k] = ""
			}
		}
	}

	moved := redistribute(t, old, 16, rescale.Route)
	for name, parts := range moved.entries {
		byPrefix := map[string]int{}
		for _, kvs := range parts {
			for k := range kvs {
				byPrefix[string(k[0])]++
			}
		}
		t.Logf("%s (%s): entries by prefix %v", name, moved.kinds[name], byPrefix)
	}
	if bad := differences(moved, run16); len(bad) > 0 {
		t.Fatalf("redistributed 8 → 16 against the 16-partition run:\n%s", strings.Join(bad, "\n"))
	}
	checkTimes(t, old, moved, run16, topo, 8, 16)
}

// fkJoin joins users (a table from the input: user → page) with pages (a
// table from in-pages: page → title) by the page, a foreign key.
func fkJoin(in string) *topology.Topology {
	t := topology.New()
	users := topology.TableFrom(t, in, topology.Materialized("rs-users", serde.Bytes, serde.String))
	pages := topology.TableFrom(t, in+"-pages", topology.Materialized("rs-pages", serde.String, serde.String))
	joined := topology.JoinTablesByForeignKey(users, pages, func(page string) string { return page },
		func(page, title string) string { return page + ": " + title },
		topology.ForeignKeyJoined[string]{Name: "rs-fk", Result: serde.String})
	topology.To(topology.ToStream(joined), in+"-out", serde.Bytes, serde.String)
	return t
}

// TestRescaleForeignKeyJoin8To16: a foreign-key join's subscription
// store, routed by the foreign key and not by its whole key, lands where a
// 16-partition run keeps it; so do the tables and the join's results.
func TestRescaleForeignKeyJoin8To16(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an application twice against a broker")
	}
	addrs := testbroker.Addrs(t)
	pages := append(testkeys.Lengths()[1:40:40], testkeys.UUIDs(4)...)
	var recs []*kgo.Record
	for i, p := range pages {
		recs = append(recs, &kgo.Record{Topic: "-pages", Key: []byte(p), Value: []byte("title " + p[:min(len(p), i%7)])})
	}
	users := testkeys.Bytes()
	for _, u := range testkeys.UUIDs(10) {
		users = append(users, []byte(u))
	}
	for i, u := range users {
		recs = append(recs, &kgo.Record{Key: u, Value: []byte(pages[(i*5)%len(pages)])})
	}
	outputs := []string{"-out"}
	topo := fkJoin("in")
	old := readState(t, runApp(t, addrs, 8, fkJoin, outputs, recs), topo)
	run := readState(t, runApp(t, addrs, 16, fkJoin, outputs, recs), topo)

	// The reader takes the subscription store for a key-value store (it
	// is declared as one): routed as one, it is misrouted, which the
	// comparison catches; routed as what it is, it is not.
	const subs = "rs-fk-subscriptions"
	if old.kinds[subs] != layout.KindKV && old.kinds[subs] != layout.KindSubscriptions {
		t.Fatalf("the reader calls %s %q", subs, old.kinds[subs])
	}
	old.kinds[subs] = layout.KindKV
	if bad := differences(redistribute(t, old, 16, rescale.Route), run); len(bad) == 0 {
		t.Fatal("subscriptions routed as a key-value store land where the run keeps them")
	}
	old.kinds[subs] = layout.KindSubscriptions
	moved := redistribute(t, old, 16, rescale.Route)
	for name, parts := range moved.entries {
		n := 0
		for _, kvs := range parts {
			n += len(kvs)
		}
		t.Logf("%s (%s): %d entries in %d partitions", name, moved.kinds[name], n, len(parts))
	}
	if n := len(old.entries[subs]); n < 4 {
		t.Fatalf("subscriptions in %d partitions", n)
	}
	if bad := differences(moved, run); len(bad) > 0 {
		t.Fatalf("redistributed 8 → 16 against the 16-partition run:\n%s", strings.Join(bad, "\n"))
	}
	checkTimes(t, old, moved, run, topo, 8, 16)
}
