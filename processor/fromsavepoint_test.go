package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/topology"
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
	produceAll(t, addrs, in, recs[:cut])

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
}

// TestFromSavepointAfterResetEqualsUninterrupted: the same with the
// application's own id, reset in between (an upgrade).
func TestFromSavepointAfterResetEqualsUninterrupted(t *testing.T) {
	t.Run("pageviews", func(t *testing.T) { runFork(t, pageViewsJob(), true, false) })
}
