package processor_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
)

// Test-only stand-ins for what the savepoint coordinator does for real
// (processor/savepoint*.go): takeSavepoint writes a savepoint of a stopped
// application the way the coordinator does at its cut, by restoring every
// changelog partition into a savepoint.Writer part and recording the
// group's committed offsets with their metadata.

func admin(t *testing.T, addrs []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func planOf(t *testing.T, tp *topology.Topology) *exec.Plan {
	t.Helper()
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	return exec.BuiltPlan(b)
}

// runtimeSources lists the topics the application's group reads: user
// inputs and its repartition topics (runtime names).
func runtimeSources(plan *exec.Plan, appID string) (user, internal []string) {
	for _, sub := range plan.Subs {
		ts, in := sub.SourceTopics()
		for i, tp := range ts {
			if in[i] {
				internal = append(internal, names.Internal(appID, tp))
			} else {
				user = append(user, tp)
			}
		}
	}
	sort.Strings(user)
	sort.Strings(internal)
	return slices.Compact(user), slices.Compact(internal)
}

// takeSavepoint writes a savepoint of the stopped application appID
// running tp into dir.
func takeSavepoint(t *testing.T, addrs []string, tp *topology.Topology, appID, dir string) *savepoint.Manifest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	plan := exec.BuiltPlan(b)
	adm := admin(t, addrs)
	w, err := savepoint.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &savepoint.Manifest{Sluice: "test", ID: "sp-" + appID, Application: appID, Fingerprint: b.Fingerprint(), Created: time.Now().UTC()}
	user, _ := runtimeSources(plan, appID)
	details, err := adm.ListTopics(ctx, user...)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, appID)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatal(err)
	}
	for _, tpc := range user {
		d := details[tpc]
		in := savepoint.Input{Topic: tpc, TopicID: d.ID.String(), Partitions: int32(len(d.Partitions))}
		for p := range int32(len(d.Partitions)) {
			if o, ok := committed.Lookup(tpc, p); ok && o.Err == nil && o.At >= 0 {
				in.Offsets = append(in.Offsets, savepoint.Offset{Partition: p, Offset: o.At, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata})
			}
		}
		m.Inputs = append(m.Inputs, in)
	}
	storeNames := make([]string, 0, len(plan.Stores))
	for n, s := range plan.Stores {
		if s.Source == "" {
			storeNames = append(storeNames, n)
		}
	}
	sort.Strings(storeNames)
	for _, name := range storeNames {
		spec := plan.Stores[name]
		sub := plan.StoreSub[name]
		cl := names.Changelog(appID, name)
		cd, err := adm.ListTopics(ctx, cl)
		if err != nil || cd[cl].Err != nil {
			t.Fatalf("changelog %s: %v %v", cl, err, cd[cl].Err)
		}
		n := int32(len(cd[cl].Partitions))
		recs, err := readback.ReadCommitted(ctx, addrs, cl)
		if err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		st := savepoint.Store{Name: name, Layout: string(exec.StoreLayout(spec)), KeySerde: spec.KeySerde, ValueSerde: spec.ValueSerde,
			SubTopology: sub, Partitions: n, Changelog: cl}
		for p := range n {
			pw, err := w.Part(appID, savepoint.TaskID(sub, p), name, p)
			if err != nil {
				t.Fatal(err)
			}
			var ws []store.Write
			last := int64(-1)
			for _, r := range recs {
				if r.Partition == p {
					// A range record drops its range; a pack holds writes.
					if ws, err = task.AppendChangelogWrites(ws, r); err != nil {
						t.Fatal(err)
					}
					last = r.Offset
				}
			}
			if len(ws) > 0 {
				if err := pw.Engine().Apply(ws, last); err != nil {
					t.Fatal(err)
				}
			}
			part, err := pw.Close()
			if err != nil {
				t.Fatal(err)
			}
			e, _ := ends.Lookup(cl, p)
			part.ChangelogEnd = e.Offset
			st.Parts = append(st.Parts, part)
		}
		m.Stores = append(m.Stores, st)
	}
	if err := w.Commit(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitCaughtUp waits until appID's group has committed every record of
// the topics it reads (user topics to their ends; internal topics, which
// end with a transaction marker, to their ends less one), twice in a row.
func waitCaughtUp(t *testing.T, addrs []string, plan *exec.Plan, appID string) {
	t.Helper()
	adm := admin(t, addrs)
	user, internal := runtimeSources(plan, appID)
	all := append(slices.Clone(user), internal...)
	ctx := context.Background()
	caughtUp := func() bool {
		// The committed offsets must not move while the ends are read:
		// a commit in between could have consumed the last input and
		// written to a repartition partition whose end was read before.
		before, err := adm.FetchOffsets(ctx, appID)
		if err != nil {
			return false
		}
		ends, err := adm.ListEndOffsets(ctx, all...)
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
			want := o.Offset
			if slices.Contains(internal, o.Topic) {
				want--
			}
			if want <= 0 {
				return
			}
			c, found := committed.Lookup(o.Topic, o.Partition)
			if !found || c.At < want {
				ok = false
			}
		})
		return ok
	}
	good := 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if !caughtUp() {
			good = 0
			continue
		}
		if good++; good == 2 {
			return
		}
	}
	t.Fatalf("application %s did not catch up with its inputs within a minute", appID)
}

// startApp runs tp as an instance of appID until the returned stop is
// called; stop returns Run's error.
func startApp(t *testing.T, addrs []string, tp *topology.Topology, appID, dir string, opts ...processor.Opt) (stop func() error) {
	t.Helper()
	_, stop = runApp(t, addrs, tp, appID, dir, opts...)
	return stop
}

// runApp is startApp that also returns the instance.
func runApp(t *testing.T, addrs []string, tp *topology.Topology, appID, dir string, opts ...processor.Opt) (*processor.App, func() error) {
	t.Helper()
	app, err := processor.New(tp, append([]processor.Opt{processor.ApplicationID(appID), processor.Brokers(addrs...),
		processor.StateDir(dir), quietOpt()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	return app, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			return fmt.Errorf("instance of %s did not stop within a minute", appID)
		}
	}
}

func quietOpt() processor.Opt { return processor.Logger(quietLogger()) }

// perKey is a topic's committed records as each key's values in order.
func perKey(t *testing.T, addrs []string, topic string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readback.ReadCommitted(ctx, addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range recs {
		out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
	}
	return out
}

// diffPerKey describes how got differs from want, key by key ("" if
// equal).
func diffPerKey(got, want map[string][]string) string {
	var diffs []string
	for k, w := range want {
		if g := got[k]; !slices.Equal(g, w) {
			diffs = append(diffs, fmt.Sprintf("key %q: got %q, want %q", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("key %q: got %q, want nothing", k, g))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("... and %d more", len(diffs)-5))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprint(diffs)
}

// concat appends b's values to a's, key by key.
func concat(a, b map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range a {
		out[k] = slices.Clone(v)
	}
	for k, v := range b {
		out[k] = append(out[k], v...)
	}
	return out
}

// committedCount counts the committed records of topic.
func committedCount(t *testing.T, addrs []string, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readback.ReadCommitted(ctx, addrs, topic)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

// seedMarkers counts the committed seed markers (key
// sluice.savepoint.seeded) on appID's savepoint control topic; the seed's
// other record there (its list of copies to take in) is not one.
func seedMarkers(t *testing.T, addrs []string, appID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := readback.ReadCommitted(ctx, addrs, names.SavepointControl(appID))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if string(r.Key) == "sluice.savepoint.seeded" {
			n++
		}
	}
	return n
}
