package rescale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/keyhash"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/rescale"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/state"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// partitioned is the entries of a stopped run's stores: store → partition
// → key → value; times holds each store's time states by partition.
type partitioned struct {
	entries map[string]map[int32]map[string]string
	times   map[string]map[int32][]byte
	kinds   map[string]layout.StoreKind
}

func newPartitioned() partitioned {
	return partitioned{map[string]map[int32]map[string]string{}, map[string]map[int32][]byte{}, map[string]layout.StoreKind{}}
}

func (p partitioned) put(store string, part int32, k, v []byte) {
	if p.entries[store] == nil {
		p.entries[store] = map[int32]map[string]string{}
	}
	if p.entries[store][part] == nil {
		p.entries[store][part] = map[string]string{}
	}
	p.entries[store][part][string(k)] = string(v)
}

// runApp runs the topology build makes for an input topic in of n
// partitions, fed recs with Kafka's default partitioner (a record's Topic,
// if set, is a suffix: it goes to in+Topic, another input), in-process
// until it has committed every record of its inputs and of its
// repartition topics, stops it, and returns its state directory. outputs
// are the suffixes of the topics it writes.
func runApp(t *testing.T, addrs []string, n int32, build func(in string) *topology.Topology, outputs []string, recs []*kgo.Record) string {
	t.Helper()
	ctx := t.Context()
	in := testbroker.Unique(t, fmt.Sprintf("rs-in%d-", n))
	inputs := map[string]bool{in: true}
	for _, r := range recs {
		inputs[in+r.Topic] = true
	}
	topics := slices.Collect(maps.Keys(inputs))
	for _, o := range outputs {
		topics = append(topics, in+o)
	}
	for _, tp := range topics {
		if err := broker.CreateTopic(ctx, addrs, tp, n, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Kafka's default partitioner for keyed records, as every producer
	// of a user topic is assumed to use.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, r := range recs {
		cl.Produce(ctx, &kgo.Record{Topic: in + r.Topic, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	dir, appID := t.TempDir(), testbroker.Unique(t, "rs-app-")
	app, err := processor.New(build(in),
		processor.ApplicationID(appID), processor.Brokers(addrs...),
		processor.StateDir(dir), processor.CommitInterval(100*time.Millisecond),
		processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(rctx) }()
	adm := kadm.NewClient(cl)
	for caughtUp := false; !caughtUp; {
		select {
		case err := <-done:
			t.Fatalf("the app over %d partitions stopped before it caught up: %v", n, err)
		case <-time.After(100 * time.Millisecond):
		}
		caughtUp = committedAll(rctx, adm, appID, inputs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return dir
}

// committedAll says whether group appID has committed every record of
// its input topics and of its repartition topics (whose last offset may
// be a transaction marker).
func committedAll(ctx context.Context, adm *kadm.Client, appID string, inputs map[string]bool) bool {
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return false
	}
	watch := slices.Collect(maps.Keys(inputs))
	for _, tp := range topics.Names() {
		if strings.HasPrefix(tp, appID+"-") && strings.HasSuffix(tp, "-repartition") {
			watch = append(watch, tp)
		}
	}
	if len(watch) == len(inputs) {
		return false // not made yet
	}
	// The committed offsets are read before and after the ends, and must
	// not have moved: a transaction committed between the ends and the
	// offsets could have consumed the last records of a topic and written
	// to a partition whose end was read while still empty.
	before, err := adm.FetchOffsets(ctx, appID)
	if err != nil {
		return false
	}
	ends, err := adm.ListEndOffsets(ctx, watch...)
	if err != nil {
		return false
	}
	committed, err := adm.FetchOffsets(ctx, appID)
	if err != nil || !maps.EqualFunc(before.Offsets(), committed.Offsets(), func(a, b map[int32]kadm.Offset) bool {
		return maps.EqualFunc(a, b, func(x, y kadm.Offset) bool { return x.At == y.At })
	}) {
		return false
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			ok = false // an end not known is no end reached
			return
		}
		if o.Offset == 0 {
			return
		}
		slack := int64(1)
		if inputs[o.Topic] {
			slack = 0
		}
		if c, found := committed.Lookup(o.Topic, o.Partition); !found || c.At < o.Offset-slack {
			ok = false
		}
	})
	return ok
}

// readState reads every store of a stopped run's state directory.
func readState(t *testing.T, dir string, topo *topology.Topology) partitioned {
	t.Helper()
	r, err := state.Open(dir, state.WithTopology(topo))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	infos, err := r.Stores()
	if err != nil {
		t.Fatal(err)
	}
	got := newPartitioned()
	for _, s := range infos {
		got.kinds[s.Store] = layout.StoreKind(s.Layout)
	}
	for name := range got.kinds {
		if err := r.Records(name, func(rec state.Record) error {
			if string(rec.Key) == string(layout.TimeStateKey) {
				if got.times[name] == nil {
					got.times[name] = map[int32][]byte{}
				}
				got.times[name][rec.Partition] = rec.Value
				return nil
			}
			got.put(name, rec.Partition, rec.Key, rec.Value)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// redistribute moves every entry of old to n partitions with route, and
// merges the time states.
func redistribute(t *testing.T, old partitioned, n int32, route router) partitioned {
	t.Helper()
	moved := newPartitioned()
	for name, parts := range old.entries {
		kind := old.kinds[name]
		moved.kinds[name] = kind
		for _, kvs := range parts {
			for k, v := range kvs {
				p, perTask, err := route(kind, []byte(k), n)
				if err != nil || perTask {
					t.Fatalf("%s entry %x: %v (per task %v)", name, k, err, perTask)
				}
				moved.put(name, p, []byte(k), []byte(v))
			}
		}
	}
	for name, byPart := range old.times {
		var vs [][]byte
		for _, v := range byPart {
			vs = append(vs, v)
		}
		merged, err := rescale.Merge(old.kinds[name], layout.TimeStateKey, vs)
		if err != nil {
			t.Fatal(err)
		}
		moved.times[name] = map[int32][]byte{}
		for p := range n {
			moved.times[name][p] = merged
		}
	}
	return moved
}

// checkTimes checks the merged time states of moved against the old
// tasks' and the new run's: laid out anew for the widths of its inputs
// (TimeInputGroups, from the plan of topo, every repartition topic as
// wide as the input: from, then to), a merged state loads where the new
// run's own does, and its watermark is the earliest of the old tasks'.
func checkTimes(t *testing.T, old, moved, run partitioned, topo *topology.Topology, from, to int32) {
	t.Helper()
	built, err := topo.Build()
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][2][]int{}
	for _, sub := range exec.BuiltPlan(built).Subs {
		if sub.TimeStore != "" {
			groups[sub.TimeStore] = [2][]int{
				rescale.TimeInputGroups(sub, func(string) int { return int(from) }),
				rescale.TimeInputGroups(sub, func(string) int { return int(to) }),
			}
		}
	}
	if len(run.times) != len(groups) || len(old.times) != len(groups) {
		t.Fatalf("time states in %d and %d stores, the plan has %d", len(old.times), len(run.times), len(groups))
	}
	sum := func(ws []int) (n int) {
		for _, w := range ws {
			n += w
		}
		return n
	}
	for name, g := range groups {
		b, err := rescale.ResizeTimeState(moved.times[name][0], g[0], g[1])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, want, err := decode(run.times[name][0], sum(g[1]))
		if err != nil {
			t.Fatalf("%s: the new run's own time state, read with the inputs TimeInputGroups gives: %v", name, err)
		}
		_, got, err := decode(b, want.Inputs())
		if err != nil {
			t.Fatalf("%s: the merged time state does not load where the new run's does: %v", name, err)
		}
		lo := int64(math.MaxInt64)
		for _, v := range old.times[name] {
			_, tr, err := decode(v, sum(g[0]))
			if err != nil {
				t.Fatalf("%s: an old task's time state, read with the inputs TimeInputGroups gives: %v", name, err)
			}
			lo = min(lo, tr.Watermark())
		}
		if got.Watermark() != lo || lo == window.NoWatermark {
			t.Fatalf("%s: merged watermark %d, the earliest of the old tasks' %d", name, got.Watermark(), lo)
		}
		t.Logf("time state in %s: inputs %v → %v, watermark %d", name, g[0], g[1], lo)
	}
}

// differences lists where two runs' entries differ (at most a few).
func differences(got, want partitioned) []string {
	var bad []string
	for name, parts := range want.entries {
		for p, kvs := range parts {
			for k, v := range kvs {
				switch g, ok := got.entries[name][p][k]; {
				case !ok:
					bad = append(bad, fmt.Sprintf("%s: entry %x is not in partition %d", name, k, p))
				case g != v:
					bad = append(bad, fmt.Sprintf("%s partition %d: entry %x is %x, want %x", name, p, k, g, v))
				}
			}
		}
	}
	for name, parts := range got.entries {
		for p, kvs := range parts {
			for k := range kvs {
				if _, ok := want.entries[name][p][k]; !ok {
					bad = append(bad, fmt.Sprintf("%s: entry %x is in partition %d, not there in the run", name, k, p))
				}
			}
		}
	}
	sort.Strings(bad)
	return bad[:min(len(bad), 6)]
}

// TestRescalePageViews runs pageviews over 8 partitions and over 16 (and
// over 12 and 4), from the same views (users and pages of every key
// length, UUIDs, non-UTF-8 users; all in one minute, so no window closes
// in either run), reads both runs' stores, redistributes the first run's
// entries to the second's count with Route, and finds every entry —
// windows, sessions, their expiry index entries — on the partition where
// the second run has it, with the same value. The merged time states load
// as the second run's tasks load theirs, once laid out for the new width
// of the repartition topic.
func TestRescalePageViews(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pageviews against a broker")
	}
	addrs := testbroker.Addrs(t)
	users := testkeys.Bytes()
	for _, u := range testkeys.UUIDs(20) {
		users = append(users, []byte(u))
	}
	users = append(users, []byte{0xff}, []byte{0xc3, 0x28}, []byte{0x80, 0x00, 0xfe})
	pages := append(testkeys.Lengths()[1:60:60], testkeys.UUIDs(5)...)
	minute := time.Minute.Milliseconds()
	base := int64(1_700_000_000_000) / minute * minute
	var views []*kgo.Record
	for i, u := range users {
		for j := range i%3 + 1 {
			ts := base + int64((i*7919+j*3001)%50_000)
			v, _ := json.Marshal(examples.PageView{User: "u", Page: pages[(i+j)%len(pages)], TS: ts})
			views = append(views, &kgo.Record{Key: u, Value: v, Timestamp: time.UnixMilli(ts)})
		}
	}
	build := func(in string) *topology.Topology {
		return examples.PageViews(in, in+"-min", in+"-late", in+"-sess", in+"-dlq")
	}
	outputs := []string{"-min", "-late", "-sess", "-dlq"}
	topo := build("in")
	for _, c := range []struct{ from, to int32 }{{8, 16}, {12, 4}} {
		t.Run(fmt.Sprintf("%dto%d", c.from, c.to), func(t *testing.T) {
			old := readState(t, runApp(t, addrs, c.from, build, outputs, views), topo)
			run := readState(t, runApp(t, addrs, c.to, build, outputs, views), topo)
			for _, name := range []string{"page-counts", "user-sessions"} {
				if len(old.entries[name]) < int(c.from)/2 || len(run.entries[name]) < int(c.to)/2 {
					t.Fatalf("%s: entries in %d and %d partitions: the runs did not spread their keys", name, len(old.entries[name]), len(run.entries[name]))
				}
			}
			moved := redistribute(t, old, c.to, rescale.Route)
			for name, parts := range moved.entries {
				byPrefix := map[string]int{}
				for _, kvs := range parts {
					for k := range kvs {
						byPrefix[string(k[0])]++
					}
				}
				t.Logf("%s (%s): entries by prefix %v, time states of %d tasks", name, moved.kinds[name], byPrefix, len(old.times[name]))
			}
			if bad := differences(moved, run); len(bad) > 0 {
				t.Fatalf("redistributed %d → %d against the %d-partition run:\n%s", c.from, c.to, c.to, strings.Join(bad, "\n"))
			}
			checkTimes(t, old, moved, run, topo, c.from, c.to)
			// Negative controls: routing by the whole store key, or to one
			// partition fewer, is caught.
			wrong := map[string]router{
				"whole store key": func(kind layout.StoreKind, key []byte, n int32) (int32, bool, error) {
					return keyhash.Partition(key, n), false, nil
				},
				"one partition fewer": func(kind layout.StoreKind, key []byte, n int32) (int32, bool, error) {
					return rescale.Route(kind, key, n-1)
				},
			}
			for name, r := range wrong {
				if bad := differences(redistribute(t, old, c.to, r), run); len(bad) == 0 {
					t.Errorf("the comparison passes a redistribution by the %s", name)
				}
			}
		})
	}
}
