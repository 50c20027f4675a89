package groupview_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/groupview"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

type tp struct {
	topic string
	p     int32
}

// world is what the test knows independently of the view: the apps by
// endpoint, the end offset of every input partition (all produced without
// transactions, so end = records) and the offset the group must have
// committed for it.
type world struct {
	apps      map[string]*processor.App
	ends      map[tp]int64
	committed map[tp]int64
	subOf     map[string]string // input topic → its tasks' sub-topology prefix ("0_")
}

// check compares v with w: the state, one instance per app, each
// instance's active and standby tasks equal to its app's own Status(),
// every input partition in exactly one task, of the right sub-topology and
// partition, with the committed and end offsets w expects, lag = end −
// committed, and the sums per task, instance and application.
func check(v groupview.View, w world) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if v.State != "Stable" {
		bad("state %s, want Stable", v.State)
	}
	if v.Generation < 1 {
		bad("generation %d", v.Generation)
	}
	if len(v.Instances) != len(w.apps) {
		bad("%d instances, want %d", len(v.Instances), len(w.apps))
	}
	seen := map[tp]int{}
	var appLag int64
	for _, in := range v.Instances {
		app := w.apps[in.Endpoint]
		if app == nil {
			bad("instance %s at unknown endpoint %q", in.MemberID, in.Endpoint)
			continue
		}
		if in.MemberID == "" || in.ClientID == "" || in.Host != "127.0.0.1" {
			bad("instance %q: member %q client %q host %q", in.Endpoint, in.MemberID, in.ClientID, in.Host)
		}
		var active, standby, got []string
		for _, st := range app.Status().Tasks {
			if st.State == processor.TaskStandby {
				standby = append(standby, st.ID)
			} else {
				active = append(active, st.ID)
			}
		}
		var instLag int64
		for _, tk := range in.Tasks {
			got = append(got, tk.ID)
			var taskLag int64
			for _, p := range tk.Partitions {
				k := tp{p.Topic, p.Partition}
				seen[k]++
				if want := w.subOf[p.Topic] + strconv.Itoa(int(p.Partition)); tk.ID != want {
					bad("%s/%d in task %s, want %s", p.Topic, p.Partition, tk.ID, want)
				}
				if p.End != w.ends[k] || p.Committed != w.committed[k] {
					bad("%s/%d: committed %d end %d, want %d and %d", p.Topic, p.Partition, p.Committed, p.End, w.committed[k], w.ends[k])
				}
				if p.Lag != p.End-p.Committed {
					bad("%s/%d: lag %d, end − committed is %d", p.Topic, p.Partition, p.Lag, p.End-p.Committed)
				}
				taskLag += w.ends[k] - w.committed[k]
			}
			if tk.Lag != taskLag {
				bad("task %s: lag %d, want %d", tk.ID, tk.Lag, taskLag)
			}
			instLag += taskLag
		}
		sort.Strings(active)
		sort.Strings(standby)
		sort.Strings(got)
		st := slices.Clone(in.Standbys)
		sort.Strings(st)
		if !slices.Equal(got, active) || !slices.Equal(st, standby) {
			bad("instance %s: tasks %v standbys %v; its Status says %v and %v", in.Endpoint, got, st, active, standby)
		}
		if in.Lag != instLag {
			bad("instance %s: lag %d, want %d", in.Endpoint, in.Lag, instLag)
		}
		appLag += instLag
	}
	for k := range w.ends {
		if seen[k] != 1 {
			bad("%s/%d in %d tasks", k.topic, k.p, seen[k])
		}
	}
	if v.Lag != appLag {
		bad("application lag %d, want %d", v.Lag, appLag)
	}
	if len(v.Unassigned) != 0 {
		bad("unassigned partitions %v in a stable group", v.Unassigned)
	}
	return errors.Join(errs...)
}

// TestDescribeRunningApp runs two instances (standby replicas on) of an
// app with two independent counting pipelines (once one instance is left,
// it runs tasks of both sub-topologies on each partition number, which
// only the assignment's source map tells apart), on input of known size,
// keys of every length. The view must match each instance's own Status and the
// offsets exactly: when caught up; while one instance is stuck on a record
// (its lag is then exactly what was produced after its last commit); after
// one instance stops (the other runs every task); and once both stopped
// (the group is empty and the committed lag still shows). Each phase's
// checker is shown to reject a wrong expectation.
func TestDescribeRunningApp(t *testing.T) {
	addrs := testbroker.Addrs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := testbroker.Unique(t, "gv-")
	in1, in2 := p+"-a", p+"-b"
	const parts = 3
	for _, topic := range []string{in1, in2, in1 + "-out", in2 + "-out"} {
		if err := broker.CreateTopic(ctx, addrs, topic, parts, nil); err != nil {
			t.Fatal(err)
		}
	}
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	build := func() *topology.Topology {
		top := topology.New()
		a := topology.Filter(topology.From(top, in1, serde.String, serde.String), func(_, v string) bool {
			if v == "stop" {
				once.Do(func() { close(blocked) })
				select {
				case <-release:
				case <-time.After(2 * time.Minute):
				}
			}
			return true
		})
		topology.To(topology.ToStream(topology.Count(topology.GroupByKey(a), topology.Materialized("a-counts", serde.String, serde.Int64))),
			in1+"-out", serde.String, serde.Int64)
		b := topology.From(top, in2, serde.String, serde.String)
		topology.To(topology.ToStream(topology.Count(topology.GroupByKey(b), topology.Materialized("b-counts", serde.String, serde.Int64))),
			in2+"-out", serde.String, serde.Int64)
		return top
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	newApp := func(ep string) *processor.App {
		app, err := processor.New(build(), processor.ApplicationID(p), processor.Brokers(addrs...), processor.StateDir(t.TempDir()),
			processor.CommitInterval(50*time.Millisecond), processor.StandbyReplicas(1), processor.TransactionTimeout(time.Minute),
			processor.AdvertisedEndpoint(ep), processor.Logger(log))
		if err != nil {
			t.Fatal(err)
		}
		return app
	}
	epA, epB := "127.0.0.1:18081", "127.0.0.1:18082"
	a, b := newApp(epA), newApp(epB)
	actx, stopA := context.WithCancel(ctx)
	bctx, stopB := context.WithCancel(ctx)
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(actx) }()
	go func() { doneB <- b.Run(bctx) }()
	defer func() {
		once.Do(func() { close(blocked) })
		select {
		case <-release:
		default:
			close(release)
		}
		stopA()
		stopB()
		<-doneA
		<-doneB
	}()

	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	keys := testkeys.Lengths()
	ends := map[tp]int64{}
	produce := func(topic string, part int32, n int, value string) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Partition: part, Key: []byte(keys[(int(ends[tp{topic, part}])+i)%len(keys)]), Value: []byte(value)}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ends[tp{topic, part}] += int64(n)
	}
	for part := range int32(parts) {
		produce(in1, part, 5+3*int(part), "x")
		produce(in2, part, 7+2*int(part), "")
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	w := world{apps: map[string]*processor.App{epA: a, epB: b}, ends: ends, committed: map[tp]int64{}, subOf: map[string]string{}}
	// Sub-topologies are numbered in the order the topology declares
	// them: in1's pipeline first.
	w.subOf[in1], w.subOf[in2] = "0_", "1_"
	var last groupview.View
	waitCheck := func(what string) groupview.View {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			v, err := groupview.Describe(ctx, cl, p)
			if err == nil {
				if err = check(v, w); err == nil {
					last = v
					return v
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the view does not match within 90s: %v\n%+v", what, err, v)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// negative: the checker rejects v when w is made wrong by mutate.
	negative := func(v groupview.View, what string, mutate func(w *world)) {
		t.Helper()
		bad := world{apps: w.apps, ends: map[tp]int64{}, committed: map[tp]int64{}, subOf: w.subOf}
		for k, o := range w.ends {
			bad.ends[k] = o
		}
		for k, o := range w.committed {
			bad.committed[k] = o
		}
		mutate(&bad)
		if err := check(v, bad); err == nil {
			t.Errorf("negative control %q: the checker accepted the view", what)
		}
	}

	// 1. Caught up: committed = end everywhere, lag 0.
	for k, o := range ends {
		w.committed[k] = o
	}
	v1 := waitCheck("caught up")
	hasStandby := false
	for _, in := range v1.Instances {
		hasStandby = hasStandby || len(in.Standbys) > 0
	}
	if !hasStandby {
		t.Errorf("no instance has a standby task with num.standby.replicas 1: %+v", v1)
	}
	negative(v1, "a wrong expected lag", func(w *world) { w.committed[tp{in2, 1}]-- })
	negative(v1, "the instances swapped", func(w *world) { w.apps = map[string]*processor.App{epA: b, epB: a} })
	negative(v1, "in2 placed in in1's sub-topology", func(w *world) { w.subOf = map[string]string{in1: "0_", in2: "0_"} })
	tampered := v1
	tampered.Instances = slices.Clone(v1.Instances)
	tampered.Instances[0].Lag++
	if check(tampered, w) == nil {
		t.Error("negative control: an instance's lag off by one was accepted")
	}

	// 2. One instance stuck on a record of in1/0: it commits nothing more,
	// so its lag is exactly what came after (the stuck record and k per
	// partition); the other keeps up.
	produce(in1, 0, 1, "stop")
	select {
	case <-blocked:
	case <-ctx.Done():
		t.Fatal("the stop record was not processed")
	}
	stuck := map[tp]bool{}
	stuckApp := ""
	for ep, app := range w.apps {
		for _, st := range app.Status().Tasks {
			if st.ID == "0_0" && st.State != processor.TaskStandby {
				stuckApp = ep
			}
		}
	}
	for _, in := range v1.Instances {
		if in.Endpoint == stuckApp {
			for _, tk := range in.Tasks {
				for _, pt := range tk.Partitions {
					stuck[tp{pt.Topic, pt.Partition}] = true
				}
			}
		}
	}
	var wantStuckLag int64 = 1 // the stop record
	for part := range int32(parts) {
		for _, topic := range []string{in1, in2} {
			k := 2 + int(part)
			produce(topic, part, k, "y")
			if stuck[tp{topic, part}] {
				wantStuckLag += int64(k)
			}
		}
	}
	for k, o := range ends {
		if !stuck[k] {
			w.committed[k] = o
		}
	}
	v2 := waitCheck("one instance stuck")
	t.Logf("one instance stuck: %+v", v2)
	for _, in := range v2.Instances {
		if in.Endpoint == stuckApp && in.Lag != wantStuckLag || in.Endpoint != stuckApp && in.Lag != 0 {
			t.Errorf("instance %s: lag %d (stuck %s must lag %d, the other 0)", in.Endpoint, in.Lag, stuckApp, wantStuckLag)
		}
	}
	if v2.Lag != wantStuckLag {
		t.Errorf("application lag %d, want %d", v2.Lag, wantStuckLag)
	}
	negative(v2, "the stuck instance's lag forgotten", func(w *world) {
		for k, o := range w.ends {
			w.committed[k] = o
		}
	})
	close(release)
	for k, o := range ends {
		w.committed[k] = o
	}
	waitCheck("released")

	// 3. B stops: A runs every task, in a later generation.
	gen := last.Generation
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("b: %v", err)
	}
	doneB <- nil
	delete(w.apps, epB)
	v3 := waitCheck("after b stopped")
	if len(v3.Instances[0].Tasks) != 2*parts || v3.Generation <= gen {
		t.Errorf("after b stopped: %d tasks in generation %d (was %d), want %d in a later one", len(v3.Instances[0].Tasks), v3.Generation, gen, 2*parts)
	}
	negative(v3, "b still expected", func(w *world) { w.apps = map[string]*processor.App{epA: a, epB: b} })

	// 4. A stops: the group is empty; its committed offsets and the lag of
	// what is produced after still show.
	stopA()
	if err := <-doneA; err != nil {
		t.Fatalf("a: %v", err)
	}
	doneA <- nil
	produce(in2, 2, 11, "z")
	v4, err := groupview.Describe(ctx, cl, p)
	if err != nil {
		t.Fatal(err)
	}
	if v4.State != "Empty" || len(v4.Instances) != 0 || v4.Lag != 11 || len(v4.Unassigned) != 2*parts || v4.Generation != -1 {
		t.Errorf("empty group: %+v, want state Empty, no instances, lag 11, %d unassigned partitions", v4, 2*parts)
	}
	for _, pt := range v4.Unassigned {
		k := tp{pt.Topic, pt.Partition}
		if pt.Committed != w.committed[k] || pt.End != ends[k] || pt.Lag != ends[k]-w.committed[k] {
			t.Errorf("empty group: %+v, want committed %d end %d", pt, w.committed[k], ends[k])
		}
	}

	// No such group; a group that is not a sluice app's.
	if v, err := groupview.Describe(ctx, cl, p+"-none"); !errors.Is(err, groupview.ErrNoGroup) || v.State != "Dead" {
		t.Errorf("no such group: %v (state %q), want ErrNoGroup", err, v.State)
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(p+"-plain"), kgo.ConsumeTopics(in1))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := groupview.Describe(ctx, cl, p+"-plain")
		if errors.Is(err, groupview.ErrNotSluice) && strings.Contains(err.Error(), p+"-plain") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a plain consumer group: %v, want ErrNotSluice", err)
		}
		other.PollRecords(ctx, 1) // joins the group
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDescribeUnreachable: a cluster that does not answer is an error
// naming the group, not ErrNoGroup, within the caller's deadline.
func TestDescribeUnreachable(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = groupview.Describe(ctx, cl, "app")
	if err == nil || errors.Is(err, groupview.ErrNoGroup) || !strings.Contains(err.Error(), `"app"`) {
		t.Errorf("unreachable cluster: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v past a 2s deadline", d)
	}
}

// oldLeader is a sluice-protocol member that writes no user data, as a
// member predating the endpoint, the generation and the sources map would.
type oldLeader struct{ kgo.GroupBalancer }

func (oldLeader) ProtocolName() string { return "sluice" }

// TestDescribeOldMember: a member that advertises no endpoint under a
// leader that wrote no generation and no sources map still shows, with
// endpoint "", generation -1 and its partitions as tasks "?_p", lag exact.
func TestDescribeOldMember(t *testing.T) {
	addrs := testbroker.Addrs(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	group, topic := testbroker.Unique(t, "gv-old-"), testbroker.Unique(t, "gv-old-in-")
	if err := broker.CreateTopic(ctx, addrs, topic, 2, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}, &kgo.Record{Topic: topic, Value: nil}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(oldLeader{kgo.RangeBalancer()}), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		member.PollFetches(ctx) // joins the group; nothing is committed
	}()
	defer func() {
		member.Close() // ends the poll
		<-polled
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := groupview.Describe(ctx, cl, group)
		if err == nil && v.State == "Stable" && len(v.Instances) == 1 && len(v.Instances[0].Tasks) == 2 {
			in := v.Instances[0]
			if in.Endpoint != "" || v.Generation != -1 || in.Tasks[0].ID != "?_0" || in.Tasks[1].ID != "?_1" || len(in.Standbys) != 0 {
				t.Errorf("old member: %+v", v)
			}
			// Nothing committed: the lag counts from the start.
			if in.Tasks[0].Partitions[0].Committed+in.Tasks[1].Partitions[0].Committed != -2 || v.Lag != 2 {
				t.Errorf("old member's lag: %+v, want 2 records, nothing committed", v)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old member never showed: %v %+v", err, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
