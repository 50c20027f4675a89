package processor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// forkJob is a topology a fork test runs: build it over an input and its
// output topics (the dead-letter topic last), make its input, and say how
// outputs compare.
type forkJob struct {
	// streaming: B and C run until they caught up, not bounded (a
	// topology that repartitions without event time cannot run bounded).
	streaming bool
	outputs   int
	build     func(in string, outs []string) *topology.Topology
	records   func() []*kgo.Record
	// compare returns how got (per output topic, per key) differs from
	// want, "" if it does not.
	compare func(got, want []map[string][]string) string
}

// pageViewsJob: windowed counts per page behind a repartition topic and
// sessions per user, keys of every length and shape, views out of order,
// some later than the allowed lateness.
func pageViewsJob() forkJob {
	return forkJob{
		outputs: 4,
		build: func(in string, o []string) *topology.Topology {
			return examples.PageViews(in, o[0], o[1], o[2], o[3])
		},
		records: func() []*kgo.Record {
			users := testkeys.Bytes()
			var pages []string
			for _, k := range testkeys.All() {
				if k != "" && len(pages) < 23 {
					pages = append(pages, k)
				}
			}
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
			var rs []*kgo.Record
			for i := range 700 {
				ts := base + int64(i)*1500
				switch {
				case i%50 == 49:
					ts -= 4 * 60 * 1000 // past the allowed lateness: late
				case i%7 == 3:
					ts -= 25 * 1000 // out of order, within the lateness
				}
				u := users[(i*31)%len(users)]
				v, _ := json.Marshal(examples.PageView{User: fmt.Sprintf("u%d", (i*31)%len(users)), Page: pages[(i*7)%len(pages)], TS: ts})
				rs = append(rs, &kgo.Record{Key: u, Value: v})
			}
			return rs
		},
		compare: func(got, want []map[string][]string) string {
			// Per-minute counts and sessions come from the one task
			// that owns the key, in order; late views of a user come
			// from the tasks of the pages they viewed: as a multiset.
			for i, name := range []string{"per-minute", "late", "sessions", "dlq"} {
				g, w := got[i], want[i]
				if name == "late" {
					g, w = sortedValues(g), sortedValues(w)
				}
				if d := diffPerKey(g, w); d != "" {
					return name + ": " + d
				}
			}
			if len(want[0]) == 0 || len(want[1]) == 0 || len(want[2]) == 0 {
				return fmt.Sprintf("the uninterrupted run emitted %d pages' counts, %d users' late views, %d users' sessions: the input exercises too little", len(want[0]), len(want[1]), len(want[2]))
			}
			return ""
		},
	}
}

// billingJob: bills keyed by their account (read directly) or by anything
// else (re-keyed through the repartition topic), accounts of every
// length, duplicated bill ids.
func billingJob() forkJob {
	return forkJob{
		streaming: true,
		outputs:   3,
		build: func(in string, o []string) *topology.Topology {
			return examples.Billing(in, o[0], o[1], o[2])
		},
		records: func() []*kgo.Record {
			var accounts []string
			for _, k := range testkeys.All() {
				if k != "" {
					accounts = append(accounts, k)
				}
			}
			other := testkeys.Bytes()
			var rs []*kgo.Record
			for i := range 900 {
				if i%11 == 5 {
					// A duplicate of a bill three before, key and all:
					// dropped by the deduplication.
					d := rs[i-3]
					rs = append(rs, &kgo.Record{Key: d.Key, Value: d.Value})
					continue
				}
				acct := accounts[(i*13)%len(accounts)]
				v, _ := json.Marshal(examples.Bill{BillID: fmt.Sprintf("bill-%d", i), Account: acct, AmountCents: int64(1 + i%97), TS: int64(i)})
				key := []byte(acct)
				if i%3 != 0 {
					key = other[i%len(other)]
				}
				rs = append(rs, &kgo.Record{Key: key, Value: v})
			}
			return rs
		},
		compare: func(got, want []map[string][]string) string {
			// An account's bills meet from the input and the
			// repartition topic, whose interleaving is the brokers'
			// timing: compare the accepted bills as a multiset, and the
			// totals by their final value and by their counts, which
			// must run 1, 2, ... n with no repeat or gap.
			if d := diffPerKey(sortedValues(got[0]), sortedValues(want[0])); d != "" {
				return "accepted: " + d
			}
			if d := diffPerKey(totalsShape(got[1]), totalsShape(want[1])); d != "" {
				return "totals: " + d
			}
			if d := diffPerKey(got[2], want[2]); d != "" {
				return "dlq: " + d
			}
			if len(want[0]) == 0 {
				return "the uninterrupted run accepted nothing"
			}
			return ""
		},
	}
}

// memoryJoinJob: an inner stream join whose window is in memory
// (topology.InMemory: ops.JoinMemory), its left and right records split
// from one input by their value's first letter; keys of every length and
// UUIDs. The savepoint copies its stores from their changelogs.
func memoryJoinJob() forkJob {
	return forkJob{
		outputs: 1,
		build: func(in string, o []string) *topology.Topology {
			tp := topology.New()
			s := topology.From(tp, in, serde.String, serde.String, topology.Watermarks(window.BoundedOutOfOrderness(50*time.Millisecond)))
			l := topology.Filter(s, func(_, v string) bool { return strings.HasPrefix(v, "L") })
			r := topology.Filter(s, func(_, v string) bool { return strings.HasPrefix(v, "R") })
			j := topology.JoinStreams(l, r, topology.JoinWindows(200*time.Millisecond), func(_, a, b string) string { return a + "+" + b },
				topology.StreamJoined[string, string, string]{Name: "mj", Key: serde.String, Left: serde.String, Right: serde.String,
					Stores: []topology.StoreOption{topology.InMemory()}})
			topology.To(j, o[0], serde.String, serde.String)
			return tp
		},
		records: func() []*kgo.Record {
			keys := testkeys.All()
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var rs []*kgo.Record
			for i := range 900 {
				side := "L"
				if i%3 == 0 {
					side = "R"
				}
				ts := base.Add(time.Duration(i*10-i%4*20) * time.Millisecond) // a little out of order
				// Six records in a row of a key, 60 ms: they join.
				rs = append(rs, &kgo.Record{Key: []byte(keys[(i/6)%len(keys)]), Value: []byte(fmt.Sprint(side, i)), Timestamp: ts})
			}
			return rs
		},
		compare: func(got, want []map[string][]string) string {
			// A pair comes out when its second record arrives, in
			// the one task of its key: in order.
			if d := diffPerKey(got[0], want[0]); d != "" {
				return "joined: " + d
			}
			if len(want[0]) < 50 {
				return fmt.Sprintf("the uninterrupted run joined only %d keys' records", len(want[0]))
			}
			return ""
		},
	}
}

func sortedValues(m map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range m {
		out[k] = slices.Sorted(slices.Values(v))
	}
	return out
}

// totalsShape reduces an account's totals to its counts in order and its
// final count, sum, min and max.
func totalsShape(m map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, vs := range m {
		var last examples.Totals
		for _, v := range vs {
			if err := json.Unmarshal([]byte(v), &last); err != nil {
				out[k] = append(out[k], "bad: "+v)
				continue
			}
			out[k] = append(out[k], fmt.Sprint(last.Count))
		}
		out[k] = append(out[k], fmt.Sprintf("final %d %d %d %d", last.Count, last.SumCents, last.MinCents, last.MaxCents))
	}
	return out
}

func produceAll(t *testing.T, addrs []string, topic string, rs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func topicsNamed(t *testing.T, addrs []string, prefix string, n int, partitions int32) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = uniq(t, fmt.Sprintf("%s%d", prefix, i))
		if err := broker.CreateTopic(context.Background(), addrs, out[i], partitions, nil); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func readOutputs(t *testing.T, addrs []string, topics []string) []map[string][]string {
	out := make([]map[string][]string, len(topics))
	for i, tp := range topics {
		out[i] = perKey(t, addrs, tp)
	}
	return out
}

// resetApp does what `sluice reset` does to an application's Kafka side:
// its group and its internal topics go.
func resetApp(t *testing.T, addrs []string, appID string) {
	t.Helper()
	adm := admin(t, addrs)
	ctx := context.Background()
	if _, err := adm.DeleteGroup(ctx, appID); err != nil {
		t.Fatal(err)
	}
	all, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var internal []string
	for _, tp := range all.Names() {
		if names.IsInternal(appID, tp) {
			internal = append(internal, tp)
		}
	}
	if _, err := adm.DeleteTopics(ctx, internal...); err != nil {
		t.Fatal(err)
	}
}

// runFork: A runs over the first part of the input and stops; a savepoint
// is taken of it; B starts from the savepoint (a new application id, or
// A's own after a reset) and runs bounded over the rest; C runs bounded
// over the whole input. A's output and B's, key by key, must equal C's.
// Negative control (control): B' starts at the savepoint's offsets without
// its state, and its outputs with A's must differ from C's.
func runFork(t *testing.T, job forkJob, sameApp, control bool) {
	addrs := testBrokers(t)
	in := uniq(t, "sp-in")
	if err := broker.CreateTopic(context.Background(), addrs, in, 3, nil); err != nil {
		t.Fatal(err)
	}
	outsA, outsB, outsC := topicsNamed(t, addrs, "sp-a", job.outputs, 2), topicsNamed(t, addrs, "sp-b", job.outputs, 2), topicsNamed(t, addrs, "sp-c", job.outputs, 2)
	recs := job.records()
	cut := len(recs) * 11 / 20
	// Aborted transactions on the input, before and after the cut:
	// nothing reads them, and the offsets step over their markers (the
	// input never ends with one: waitCaughtUp waits for the end).
	produceAborted(t, addrs, in, 15)
	produceAll(t, addrs, in, recs[:cut/2])
	produceAborted(t, addrs, in, 15)
	produceAll(t, addrs, in, recs[cut/2:cut])

	appA := uniq(t, "sp-a")
	tpA := job.build(in, outsA)
	stop := startApp(t, addrs, tpA, appA, t.TempDir())
	waitCaughtUp(t, addrs, planOf(t, job.build(in, outsA)), appA)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sp")
	m := takeSavepoint(t, addrs, job.build(in, outsA), appA, dir)
	var records int64
	for _, s := range m.Stores {
		records += s.Records
	}
	if records == 0 {
		t.Fatal("the savepoint holds no state: the test would prove nothing")
	}
	produceAborted(t, addrs, in, 15)
	produceAll(t, addrs, in, recs[cut:])

	appB, opts := uniq(t, "sp-b"), []processor.Opt{processor.FromSavepoint(dir), processor.AllowOtherApp()}
	if sameApp {
		resetApp(t, addrs, appA)
		appB, opts = appA, []processor.Opt{processor.FromSavepoint(dir)}
	}
	run(t, addrs, job, in, outsB, appB, opts...)
	run(t, addrs, job, in, outsC, uniq(t, "sp-c"))
	a, b, c := readOutputs(t, addrs, outsA), readOutputs(t, addrs, outsB), readOutputs(t, addrs, outsC)
	got := make([]map[string][]string, job.outputs)
	for i := range got {
		got[i] = concat(a[i], b[i])
	}
	if d := job.compare(got, c); d != "" {
		t.Fatalf("A's output then B's differs from the uninterrupted run's: %s", d)
	}
	if !control {
		return
	}
	// The control: the same offsets, no state.
	outsX := topicsNamed(t, addrs, "sp-x", job.outputs, 2)
	appX := uniq(t, "sp-x")
	commitManifestOffsets(t, addrs, appX, m)
	run(t, addrs, job, in, outsX, appX)
	x := readOutputs(t, addrs, outsX)
	for i := range got {
		got[i] = concat(a[i], x[i])
	}
	if job.compare(got, c) == "" {
		t.Fatal("negative control: a run resumed at the savepoint's offsets without its state matched the uninterrupted run; the check cannot tell")
	}
}

// run runs job over in to outs as appID: bounded, or until it caught up.
func run(t *testing.T, addrs []string, job forkJob, in string, outs []string, appID string, opts ...processor.Opt) {
	t.Helper()
	if !job.streaming {
		if _, err := runBounded(t, addrs, job.build(in, outs), appID, t.TempDir(), append(opts, processor.Bounded(), quietOpt())...); err != nil {
			t.Fatal(err)
		}
		return
	}
	stop := startApp(t, addrs, job.build(in, outs), appID, t.TempDir(), opts...)
	waitCaughtUp(t, addrs, planOf(t, job.build(in, outs)), appID)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// commitManifestOffsets commits m's input offsets for group.
func commitManifestOffsets(t *testing.T, addrs []string, group string, m *savepoint.Manifest) {
	t.Helper()
	os := kadm.Offsets{}
	for _, in := range m.Inputs {
		for _, o := range in.Offsets {
			os.Add(kadm.Offset{Topic: in.Topic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
		}
	}
	if err := admin(t, addrs).CommitAllOffsets(context.Background(), group, os); err != nil {
		t.Fatal(err)
	}
}

// TestFromSavepointForkEqualsUninterrupted is the issue's "savepoint, then
// continue from it" equality, for a fork to a new application id
// (AllowOtherApp), with a negative control.
func TestFromSavepointForkEqualsUninterrupted(t *testing.T) {
	t.Run("pageviews", func(t *testing.T) { runFork(t, pageViewsJob(), false, true) })
	t.Run("billing", func(t *testing.T) { runFork(t, billingJob(), false, true) })
	t.Run("memory join", func(t *testing.T) { runFork(t, memoryJoinJob(), false, true) })
}

// TestFromSavepointAfterResetEqualsUninterrupted: the same with the
// application's own id, reset in between (an upgrade).
func TestFromSavepointAfterResetEqualsUninterrupted(t *testing.T) {
	t.Run("pageviews", func(t *testing.T) { runFork(t, pageViewsJob(), true, false) })
	t.Run("billing", func(t *testing.T) { runFork(t, billingJob(), true, false) })
}

// kvCounts counts records per key (keys of any bytes) into the store
// named store with value serde vs, and writes every count to out.
func kvCounts(in, out, store string, vs serde.Serde[int64]) *topology.Topology {
	tp := topology.New()
	s := topology.From(tp, in, serde.Bytes, serde.String)
	c := topology.Count(topology.GroupByKey(s), topology.Materialized(store, serde.Bytes, vs))
	topology.To(topology.ToStream(c), out, serde.Bytes, vs)
	return tp
}

// kvWindowed has a window store named counts: another layout.
func kvWindowed(in, out string) *topology.Topology {
	tp := topology.New()
	s := topology.From(tp, in, serde.Bytes, serde.String)
	c := topology.CountWindows(topology.WindowedBy(topology.GroupByKey(s), window.Tumbling(time.Minute)), topology.Materialized("counts", serde.Bytes, serde.Int64))
	topology.To(topology.Map(topology.ToStream(c), func(w topology.Windowed[[]byte], n int64) ([]byte, int64) { return w.Key, n }), out, serde.Bytes, serde.Int64)
	return tp
}

// kvInput is n records over keys of every length (0 to past 128 bytes,
// raw bytes), and the count of each key.
func kvInput(n int) ([]*kgo.Record, map[string]int64) {
	keys := testkeys.Bytes()
	counts := map[string]int64{}
	var rs []*kgo.Record
	for i := range n {
		k := keys[(i*7)%len(keys)]
		counts[string(k)]++
		rs = append(rs, &kgo.Record{Key: k, Value: []byte("v"), Timestamp: time.UnixMilli(int64(i) * 10)})
	}
	return rs, counts
}

// kvSavepoint runs kvCounts over n records as a new application until it
// caught up, stops it and returns its savepoint's directory, with the
// input topic and the application id.
func kvSavepoint(t *testing.T, addrs []string, n int) (dir, in, appID string, counts map[string]int64) {
	t.Helper()
	in, out := uniq(t, "kv-in"), uniq(t, "kv-out")
	for _, tp := range []string{in, out} {
		if err := broker.CreateTopic(context.Background(), addrs, tp, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	rs, counts := kvInput(n)
	produceAll(t, addrs, in, rs)
	appID = uniq(t, "kv-a")
	tp := kvCounts(in, out, "counts", serde.Int64)
	stop := startApp(t, addrs, tp, appID, t.TempDir())
	waitCaughtUp(t, addrs, planOf(t, kvCounts(in, out, "counts", serde.Int64)), appID)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "sp")
	takeSavepoint(t, addrs, kvCounts(in, out, "counts", serde.Int64), appID, dir)
	return dir, in, appID, counts
}

// written describes what application appID has in Kafka: committed
// offsets, changelog records of store, seed markers ("" if nothing).
func written(t *testing.T, addrs []string, appID, store string) string {
	t.Helper()
	adm := admin(t, addrs)
	ctx := context.Background()
	var what []string
	if os, err := adm.FetchOffsets(ctx, appID); err == nil {
		os.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				what = append(what, fmt.Sprintf("offset %s/%d@%d", o.Topic, o.Partition, o.At))
			}
		})
	}
	slices.Sort(what)
	for _, tp := range []string{names.Changelog(appID, store), names.SavepointControl(appID)} {
		ts, err := adm.ListTopics(ctx, tp)
		if err != nil {
			t.Fatal(err)
		}
		if ts[tp].Err != nil || ts[tp].Topic == "" {
			continue
		}
		if n := committedCount(t, addrs, tp); n > 0 {
			what = append(what, fmt.Sprintf("%d records in %s", n, tp))
		}
	}
	return strings.Join(what, ", ")
}

// copyDir copies a savepoint directory, for damaging the copy.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// editManifest rewrites dir's manifest with fn applied to its JSON.
func editManifest(t *testing.T, dir string, fn func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, savepoint.ManifestFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func startErr(t *testing.T, addrs []string, tp *topology.Topology, appID string, opts ...processor.Opt) error {
	t.Helper()
	app, err := processor.New(tp, append([]processor.Opt{processor.ApplicationID(appID), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), quietOpt()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = app.Run(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Run did not return within 30s (it should refuse at once): %v", err)
	}
	return err
}

// TestFromSavepointRefusals: every way a savepoint or an application can
// be unfit is refused, with a message naming the file or the store and the
// rule, and leaves nothing written: no committed offsets, no changelog
// records, no seed marker. Negative control of the "nothing written"
// check: the accepted start it is compared with wrote.
func TestFromSavepointRefusals(t *testing.T) {
	addrs := testBrokers(t)
	dir, in, appA, _ := kvSavepoint(t, addrs, 300)
	out := uniq(t, "kv-out2")
	if err := broker.CreateTopic(context.Background(), addrs, out, 2, nil); err != nil {
		t.Fatal(err)
	}
	counts := func(vs serde.Serde[int64]) *topology.Topology { return kvCounts(in, out, "counts", vs) }
	fork := processor.AllowOtherApp()
	migrateFails := counts(serde.Int64Text)
	topology.MigrateKeyValues(migrateFails, "counts", serde.Bytes, serde.Int64, serde.Bytes, serde.Int64Text, func(k []byte, v int64) ([]byte, int64, error) {
		if len(k) == 129 {
			return nil, 0, errors.New("no room for this key")
		}
		return k, v, nil
	})
	cases := []struct {
		name  string
		dir   func() string
		tp    *topology.Topology
		opts  []processor.Opt
		is    error
		needs []string
	}{
		{"corrupt checksum", func() string {
			d := copyDir(t, dir)
			editManifest(t, d, func(m map[string]any) {
				part := m["stores"].([]any)[0].(map[string]any)["parts"].([]any)[1].(map[string]any)
				part["checksum"] = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
			})
			return d
		}, counts(serde.Int64), []processor.Opt{fork}, savepoint.ErrCorrupt, []string{"store \"counts\" partition 1", "checksum"}},
		{"missing part", func() string {
			d := copyDir(t, dir)
			if err := os.RemoveAll(filepath.Join(d, appA, "0_0", "counts")); err != nil {
				t.Fatal(err)
			}
			return d
		}, counts(serde.Int64), []processor.Opt{fork}, savepoint.ErrIncomplete, []string{filepath.Join(appA, "0_0", "counts"), "missing"}},
		{"format 99", func() string {
			d := copyDir(t, dir)
			editManifest(t, d, func(m map[string]any) { m["format"] = 99 })
			return d
		}, counts(serde.Int64), []processor.Opt{fork}, savepoint.ErrFormat, []string{savepoint.ManifestFile, "format 99"}},
		{"other application", func() string { return dir }, counts(serde.Int64), nil, processor.ErrSavepointOtherApp, []string{appA, "--allow-other-app"}},
		{"dropped store", func() string { return dir }, kvCounts(in, out, "tallies", serde.Int64), []processor.Opt{fork}, processor.ErrSavepointIncompatible, []string{`store "counts"`, "dropped state", "--allow-dropped-state"}},
		{"serde changed", func() string { return dir }, counts(serde.Int64Text), []processor.Opt{fork}, processor.ErrSavepointIncompatible, []string{`store "counts"`, "serde changed", "MigrateStore"}},
		{"layout changed", func() string { return dir }, kvWindowed(in, out), []processor.Opt{fork}, processor.ErrSavepointIncompatible, []string{`store "counts"`, "layout changed", "key-value", "window"}},
		{"migration fails", func() string { return dir }, migrateFails, []processor.Opt{fork}, processor.ErrSavepointIncompatible, []string{`store "counts"`, "no room for this key", "migration of key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := uniq(t, "kv-z")
			err := startErr(t, addrs, c.tp, app, append([]processor.Opt{processor.FromSavepoint(c.dir())}, c.opts...)...)
			if !errors.Is(err, c.is) {
				t.Fatalf("Run: %v, want %v", err, c.is)
			}
			for _, s := range c.needs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("the refusal does not say %q: %v", s, err)
				}
			}
			if w := written(t, addrs, app, "counts"); w != "" {
				t.Errorf("a refused start wrote: %s", w)
			}
		})
	}
	t.Run("application has state", func(t *testing.T) {
		// appA itself: committed offsets and changelog records.
		before := written(t, addrs, appA, "counts")
		err := startErr(t, addrs, counts(serde.Int64), appA, processor.FromSavepoint(dir))
		if !errors.Is(err, processor.ErrApplicationHasState) || !strings.Contains(err.Error(), "sluice reset") {
			t.Fatalf("Run: %v, want ErrApplicationHasState naming the reset", err)
		}
		if after := written(t, addrs, appA, "counts"); after != before {
			t.Errorf("a refused start changed the application: before %s, after %s", before, after)
		}
	})
	t.Run("control: an accepted start writes", func(t *testing.T) {
		app := uniq(t, "kv-ok")
		stop := startApp(t, addrs, counts(serde.Int64), app, t.TempDir(), processor.FromSavepoint(dir), fork)
		waitCaughtUp(t, addrs, planOf(t, counts(serde.Int64)), app)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if written(t, addrs, app, "counts") == "" {
			t.Fatal("the check of what a start wrote finds nothing after an accepted start: it cannot tell")
		}
	})
}

// TestFromSavepointMigratesStore: a store whose value serde changed
// starts from the savepoint through its typed migration, which rewrites
// every value and drops some keys; the new application's changelog then
// holds exactly the migrated entries, and counting continues from them.
func TestFromSavepointMigratesStore(t *testing.T) {
	addrs := testBrokers(t)
	dir, in, _, counts := kvSavepoint(t, addrs, 300)
	out := uniq(t, "kv-mig-out")
	if err := broker.CreateTopic(context.Background(), addrs, out, 2, nil); err != nil {
		t.Fatal(err)
	}
	build := func() *topology.Topology {
		tp := kvCounts(in, out, "counts", serde.Int64Text)
		topology.MigrateKeyValues(tp, "counts", serde.Bytes, serde.Int64, serde.Bytes, serde.Int64Text, func(k []byte, v int64) ([]byte, int64, error) {
			if len(k)%5 == 1 {
				return nil, 0, topology.DropEntry
			}
			return k, v * 1000, nil
		})
		return tp
	}
	app := uniq(t, "kv-mig")
	stop := startApp(t, addrs, build(), app, t.TempDir(), processor.FromSavepoint(dir), processor.AllowOtherApp())
	waitCaughtUp(t, addrs, planOf(t, build()), app)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for k, n := range counts {
		if len(k)%5 != 1 {
			want[k] = []string{fmt.Sprint(n * 1000)}
		}
	}
	if d := diffPerKey(perKey(t, addrs, names.Changelog(app, "counts")), want); d != "" {
		t.Fatalf("migrated changelog: %s", d)
	}
	// Counting goes on from the migrated values (a dropped key from 0).
	more, _ := kvInput(40)
	produceAll(t, addrs, in, more)
	stop = startApp(t, addrs, build(), app, t.TempDir(), processor.FromSavepoint(dir), processor.AllowOtherApp())
	waitCaughtUp(t, addrs, planOf(t, build()), app)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := perKey(t, addrs, out)
	_, added := kvInput(40)
	for k, n := range added {
		base := int64(0)
		if len(k)%5 != 1 {
			base = counts[k] * 1000
		}
		vs := got[k]
		if len(vs) == 0 || vs[len(vs)-1] != fmt.Sprint(base+n) {
			t.Errorf("key %x: counts %q, want the last %d", k, vs, base+n)
		}
	}
}

// TestFromSavepointTwoInstancesSeedOnce: two instances of one application
// started together from the same savepoint seed it once: one seed marker,
// the changelog holds exactly the savepoint's records, and the counts
// continue exactly. Restarting one with the same savepoint again is a
// no-op (the marker says it is seeded from it).
func TestFromSavepointTwoInstancesSeedOnce(t *testing.T) {
	addrs := testBrokers(t)
	dir, in, _, counts := kvSavepoint(t, addrs, 300)
	out := uniq(t, "kv-two-out")
	if err := broker.CreateTopic(context.Background(), addrs, out, 2, nil); err != nil {
		t.Fatal(err)
	}
	m, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	build := func() *topology.Topology { return kvCounts(in, out, "counts", serde.Int64) }
	app := uniq(t, "kv-two")
	opts := []processor.Opt{processor.FromSavepoint(dir), processor.AllowOtherApp()}
	stop1 := startApp(t, addrs, build(), app, t.TempDir(), opts...)
	stop2 := startApp(t, addrs, build(), app, t.TempDir(), opts...)
	waitCaughtUp(t, addrs, planOf(t, build()), app)
	for _, stop := range []func() error{stop1, stop2} {
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	if n := seedMarkers(t, addrs, app); n != 1 {
		t.Errorf("%d seed markers, want 1", n)
	}
	if n, want := committedCount(t, addrs, names.Changelog(app, "counts")), m.Manifest().Store("counts").Records; int64(n) != want {
		t.Errorf("the changelog holds %d records after the seed, the savepoint %d: seeded twice?", n, want)
	}
	more, added := kvInput(60)
	produceAll(t, addrs, in, more)
	stop := startApp(t, addrs, build(), app, t.TempDir(), opts...)
	waitCaughtUp(t, addrs, planOf(t, build()), app)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := seedMarkers(t, addrs, app); n != 1 {
		t.Errorf("%d seed markers after a restart with the same savepoint, want 1", n)
	}
	got := perKey(t, addrs, out)
	for k, n := range added {
		if vs := got[k]; len(vs) == 0 || vs[len(vs)-1] != string(serdeInt64(counts[k]+n)) {
			t.Errorf("key %x: last count %q, want %d", k, vs, counts[k]+n)
		}
	}
}

func serdeInt64(n int64) []byte {
	b, _ := serde.Int64.Encode(n)
	return b
}

// TestFromSavepointRescalesKeyValueStore: a savepoint of a key-value
// store on 2 partitions starts an application whose input now has 4:
// every key's count moves to the task that owns the key under 4 (the
// partitioner's murmur2), partitions added since the cut are read from
// their start, and the counts continue exactly. Negative control: routing
// every key to partition 0 is caught.
func TestFromSavepointRescalesKeyValueStore(t *testing.T) {
	addrs := testBrokers(t)
	dir, in, _, counts := kvSavepoint(t, addrs, 300)
	adm := admin(t, addrs)
	if _, err := adm.CreatePartitions(context.Background(), 4, in); err != nil {
		t.Fatal(err)
	}
	more, added := kvInput(80)
	produceAll(t, addrs, in, more)
	check := func(t *testing.T, app string) string {
		out := uniq(t, "kv-rs-out")
		if err := broker.CreateTopic(context.Background(), addrs, out, 4, nil); err != nil {
			t.Fatal(err)
		}
		build := func() *topology.Topology { return kvCounts(in, out, "counts", serde.Int64) }
		stop := startApp(t, addrs, build(), app, t.TempDir(), processor.FromSavepoint(dir), processor.AllowOtherApp())
		waitCaughtUp(t, addrs, planOf(t, build()), app)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got := perKey(t, addrs, out)
		var bad []string
		for k, n := range added {
			if vs := got[k]; len(vs) == 0 || vs[len(vs)-1] != string(serdeInt64(counts[k]+n)) {
				bad = append(bad, fmt.Sprintf("key %x: last count %x, want %d", k, vs, counts[k]+n))
			}
		}
		sort.Strings(bad)
		return strings.Join(bad[:min(len(bad), 5)], "; ")
	}
	if d := check(t, uniq(t, "kv-rs")); d != "" {
		t.Fatalf("after rescaling 2 → 4: %s", d)
	}
	t.Run("control", func(t *testing.T) {
		defer processor.SetRescaleRoute(func(layout.StoreKind, []byte, int32) (int32, bool, error) { return 0, false, nil })()
		if check(t, uniq(t, "kv-rs-x")) == "" {
			t.Fatal("every key routed to partition 0 still counted right: the check cannot tell")
		}
	})
}

// TestFromSavepointAllowDroppedState: with AllowDroppedState a savepoint
// store the topology lacks is discarded and a store the savepoint lacks
// starts empty; the inputs still resume at the savepoint's offsets (the
// counts of the renamed store count only what comes after the cut).
func TestFromSavepointAllowDroppedState(t *testing.T) {
	addrs := testBrokers(t)
	dir, in, _, _ := kvSavepoint(t, addrs, 200)
	out := uniq(t, "kv-drop-out")
	if err := broker.CreateTopic(context.Background(), addrs, out, 2, nil); err != nil {
		t.Fatal(err)
	}
	more, added := kvInput(30)
	produceAll(t, addrs, in, more)
	build := func() *topology.Topology { return kvCounts(in, out, "tallies", serde.Int64) }
	app := uniq(t, "kv-drop")
	stop := startApp(t, addrs, build(), app, t.TempDir(), processor.FromSavepoint(dir), processor.AllowOtherApp(), processor.AllowDroppedState())
	waitCaughtUp(t, addrs, planOf(t, build()), app)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := perKey(t, addrs, out)
	for k, n := range added {
		if vs := got[k]; len(vs) == 0 || vs[len(vs)-1] != string(serdeInt64(n)) {
			t.Errorf("key %x: last count %x, want %d (the new store starts empty, the input at the cut)", k, vs, n)
		}
	}
	if n := seedMarkers(t, addrs, app); n != 1 {
		t.Errorf("%d seed markers, want 1", n)
	}
}

// TestFromSavepointRescalesPageViews: pageviews' savepoint over 3 input
// partitions starts a fork after the input grew to 6: its window store
// (with the time state, whose repartition inputs change width) and its
// session store are redistributed, and the per-minute counts of the
// bounded fork, after A's, equal an uninterrupted bounded run's over the
// same input. The views are out of order within the watermark's bound
// only, so no view's lateness depends on the partitioning (package
// rescale's doc). Sessions are not compared: the uninterrupted run reads
// a user's views from two partitions (before and after the input grew),
// which splits its sessions.
func TestFromSavepointRescalesPageViews(t *testing.T) {
	addrs := testBrokers(t)
	in := uniq(t, "rs-pv-in")
	if err := broker.CreateTopic(context.Background(), addrs, in, 3, nil); err != nil {
		t.Fatal(err)
	}
	users := testkeys.Bytes()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	views := func(from, to int) []*kgo.Record {
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			ts := base + int64(i)*1500
			if i%7 == 3 {
				ts -= 5000 // out of order, within the 10 s bound
			}
			v, _ := json.Marshal(examples.PageView{User: fmt.Sprintf("u%d", i%len(users)), Page: fmt.Sprintf("/p%d", i%9), TS: ts})
			rs = append(rs, &kgo.Record{Key: users[(i*31)%len(users)], Value: v})
		}
		return rs
	}
	job := pageViewsJob()
	outsA, outsB, outsC := topicsNamed(t, addrs, "rs-a", 4, 2), topicsNamed(t, addrs, "rs-b", 4, 2), topicsNamed(t, addrs, "rs-c", 4, 2)
	produceAll(t, addrs, in, views(0, 400))
	appA := uniq(t, "rs-a")
	stop := startApp(t, addrs, job.build(in, outsA), appA, t.TempDir())
	waitCaughtUp(t, addrs, planOf(t, job.build(in, outsA)), appA)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sp")
	takeSavepoint(t, addrs, job.build(in, outsA), appA, dir)
	if _, err := admin(t, addrs).CreatePartitions(context.Background(), 6, in); err != nil {
		t.Fatal(err)
	}
	produceAll(t, addrs, in, views(400, 800))
	run(t, addrs, job, in, outsB, uniq(t, "rs-b"), processor.FromSavepoint(dir), processor.AllowOtherApp())
	run(t, addrs, job, in, outsC, uniq(t, "rs-c"))
	got := concat(perKey(t, addrs, outsA[0]), perKey(t, addrs, outsB[0]))
	want := perKey(t, addrs, outsC[0])
	if len(want) == 0 {
		t.Fatal("the uninterrupted run counted nothing")
	}
	if d := diffPerKey(got, want); d != "" {
		t.Fatalf("per-minute counts after rescaling 3 → 6: %s", d)
	}
}

// TestFromSavepointChangelogState: a changelog with a committed record
// makes an application one with state (refused, naming the changelog
// partition), while one holding only an aborted transaction's records (a
// fenced seeder's) does not: the start seeds.
func TestFromSavepointChangelogState(t *testing.T) {
	addrs := testBrokers(t)
	dir, in, _, _ := kvSavepoint(t, addrs, 100)
	out := uniq(t, "kv-cl-out")
	if err := broker.CreateTopic(context.Background(), addrs, out, 2, nil); err != nil {
		t.Fatal(err)
	}
	build := func() *topology.Topology { return kvCounts(in, out, "counts", serde.Int64) }
	opts := []processor.Opt{processor.FromSavepoint(dir), processor.AllowOtherApp()}

	committed := uniq(t, "kv-cl")
	if err := broker.CreateTopic(context.Background(), addrs, names.Changelog(committed, "counts"), 2, nil); err != nil {
		t.Fatal(err)
	}
	produceAll(t, addrs, names.Changelog(committed, "counts"), []*kgo.Record{{Key: []byte("k"), Value: []byte("v"), Partition: 1}})
	err := startErr(t, addrs, build(), committed, opts...)
	if !errors.Is(err, processor.ErrApplicationHasState) || !strings.Contains(err.Error(), names.Changelog(committed, "counts")+"/") {
		t.Fatalf("Run with a committed changelog record: %v, want ErrApplicationHasState naming the changelog", err)
	}

	aborted := uniq(t, "kv-ab")
	if err := broker.CreateTopic(context.Background(), addrs, names.Changelog(aborted, "counts"), 2, nil); err != nil {
		t.Fatal(err)
	}
	produceAborted(t, addrs, names.Changelog(aborted, "counts"), 20)
	stop := startApp(t, addrs, build(), aborted, t.TempDir(), opts...)
	waitCaughtUp(t, addrs, planOf(t, build()), aborted)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := seedMarkers(t, addrs, aborted); n != 1 {
		t.Fatalf("%d seed markers after a start over aborted changelog records, want 1", n)
	}
}

// produceAborted writes n records to topic in a transaction it aborts.
func produceAborted(t *testing.T, addrs []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID(uniq(t, "aborter")), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := &kgo.Record{Key: []byte(fmt.Sprintf("aborted-%d", i)), Value: []byte("{not json")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

// TestFromSavepointRecreatedTopic: an input topic deleted and created
// again since the savepoint (another topic id) is read from its start, not
// at the savepoint's offsets, which belong to the old log. Negative
// control: with the savepoint's topic id blanked (no id known, so the
// offsets are resumed) the counts come out short.
func TestFromSavepointRecreatedTopic(t *testing.T) {
	addrs := testBrokers(t)
	dir, in, _, counts := kvSavepoint(t, addrs, 300)
	adm := admin(t, addrs)
	if _, err := adm.DeleteTopics(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err := broker.CreateTopic(context.Background(), addrs, in, 2, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	fresh, added := kvInput(700) // longer than the old log: its offsets are in range
	produceAll(t, addrs, in, fresh)
	check := func(t *testing.T, dir string) string {
		out := uniq(t, "kv-re-out")
		if err := broker.CreateTopic(context.Background(), addrs, out, 2, nil); err != nil {
			t.Fatal(err)
		}
		build := func() *topology.Topology { return kvCounts(in, out, "counts", serde.Int64) }
		app := uniq(t, "kv-re")
		stop := startApp(t, addrs, build(), app, t.TempDir(), processor.FromSavepoint(dir), processor.AllowOtherApp())
		waitCaughtUp(t, addrs, planOf(t, build()), app)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got := perKey(t, addrs, out)
		var bad []string
		for k, n := range added {
			if vs := got[k]; len(vs) == 0 || vs[len(vs)-1] != string(serdeInt64(counts[k]+n)) {
				bad = append(bad, fmt.Sprintf("key %x: last %x, want %d", k, vs, counts[k]+n))
			}
		}
		sort.Strings(bad)
		return strings.Join(bad[:min(len(bad), 3)], "; ")
	}
	if d := check(t, dir); d != "" {
		t.Fatalf("the re-created topic was not read from its start: %s", d)
	}
	t.Run("control", func(t *testing.T) {
		d := copyDir(t, dir)
		editManifest(t, d, func(m map[string]any) {
			for _, in := range m["inputs"].([]any) {
				delete(in.(map[string]any), "topic_id")
			}
		})
		if check(t, d) == "" {
			t.Fatal("resuming the old offsets on the new log still counted everything: the check cannot tell")
		}
	})
}

// TestFromSavepointJoinsEveryRefusal: the compatibility check reports
// every store and rule at once, before it reaches a broker (the brokers
// given here do not exist).
func TestFromSavepointJoinsEveryRefusal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	w, err := savepoint.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &savepoint.Manifest{ID: "sp-join", Application: "app"}
	for _, st := range []savepoint.Store{
		{Name: "counts", Layout: "key-value", KeySerde: serde.ID(serde.Bytes), ValueSerde: serde.ID(serde.Int64), Partitions: 1},
		{Name: "totals", Layout: "key-value", KeySerde: serde.ID(serde.Bytes), ValueSerde: serde.ID(serde.Int64), Partitions: 1},
		{Name: "win", Layout: "key-value", KeySerde: serde.ID(serde.Bytes), ValueSerde: serde.ID(serde.Int64), Partitions: 1},
	} {
		pw, err := w.Part("app", savepoint.TaskID(0, 0), st.Name, 0)
		if err != nil {
			t.Fatal(err)
		}
		part, err := pw.Close()
		if err != nil {
			t.Fatal(err)
		}
		st.Parts = []savepoint.Part{part}
		m.Stores = append(m.Stores, st)
	}
	if err := w.Commit(m); err != nil {
		t.Fatal(err)
	}
	tp := topology.New()
	s := topology.From(tp, "in", serde.Bytes, serde.String)
	topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.Bytes, serde.Int64Text))
	topology.CountWindows(topology.WindowedBy(topology.GroupByKey(s), window.Tumbling(time.Minute)), topology.Materialized("win", serde.Bytes, serde.Int64))
	app, err := processor.New(tp, processor.ApplicationID("app"), processor.Brokers("127.0.0.1:1"), processor.StateDir(t.TempDir()),
		processor.FromSavepoint(dir), quietOpt())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = app.Run(ctx)
	if !errors.Is(err, processor.ErrSavepointIncompatible) {
		t.Fatalf("Run: %v, want ErrSavepointIncompatible", err)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 3 {
		t.Fatalf("Run: %v, want three refusals joined", err)
	}
	for _, want := range []string{`store "counts": serde changed`, `store "totals": dropped state`, `store "win": layout changed`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusals do not say %q: %v", want, err)
		}
	}
}
