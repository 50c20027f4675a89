package processor

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestQueryRoutingInAssignment: the leader hands every member the same map
// task → endpoint, and it says who really got each task's partitions.
func TestQueryRoutingInAssignment(t *testing.T) {
	subOf := map[string]int{"in": 0, "app-x-repartition": 1}
	topics := map[string]int32{"in": 4, "app-x-repartition": 4}
	eps := map[string]string{"m1": "10.0.0.1:9100", "m2": "10.0.0.2:9100", "m3": ""}
	leader := &assignor{subOf: subOf}
	var members []kmsg.JoinGroupResponseMember
	for _, id := range []string{"m1", "m2", "m3"} {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = (&assignor{subOf: subOf, endpoint: eps[id]}).JoinGroupMetadata([]string{"app-x-repartition", "in"}, nil, 1)
		members = append(members, m)
	}
	mb, _, err := leader.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		t.Fatal(err)
	}
	var first map[task.ID]string
	owners := map[task.ID]string{} // from the partitions each member got
	for _, sa := range into.IntoSyncAssignment() {
		var got map[task.ID]string
		member := &assignor{subOf: subOf, onRouting: func(m map[task.ID]string) { got = m }}
		parts, err := member.ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		for tp, ps := range parts {
			for _, p := range ps {
				owners[task.ID{Sub: subOf[tp], Partition: p}] = eps[sa.MemberID]
			}
		}
		if got == nil {
			t.Fatalf("%s got no routing map", sa.MemberID)
		}
		if first == nil {
			first = got
		} else if fmt.Sprint(first) != fmt.Sprint(got) {
			t.Errorf("members got different maps:\n%v\n%v", first, got)
		}
	}
	if len(first) != 8 || len(owners) != 8 {
		t.Fatalf("routing has %d tasks, assignment %d; want 8", len(first), len(owners))
	}
	for id, ep := range owners {
		if first[id] != ep {
			t.Errorf("task %s routed to %q, assigned to %q", id, first[id], ep)
		}
	}
}

// TestQueryKeyPartition: a key is located on the partition sluice's
// producer writes it to (Kafka's murmur2), with known Java values.
func TestQueryKeyPartition(t *testing.T) {
	hashed := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range 1000 {
		k := []byte(fmt.Sprintf("key-%d", i))
		for _, n := range []int32{1, 3, 6, 7} {
			if got, want := KeyPartition(k, n), int32(hashed.Partition(&kgo.Record{Key: k}, int(n))); got != want {
				t.Fatalf("key %q of %d: %d, producer %d", k, n, got, want)
			}
		}
	}
	// Java's Utils.murmur2 (Kafka's UtilsTest); the partition is
	// toPositive(h) % n.
	for k, h := range map[string]int32{"21": -973932308, "foobar": -790332482, "abc": 479470107} {
		if got, want := KeyPartition([]byte(k), 1000), (h&0x7fffffff)%1000; got != want {
			t.Errorf("partition of %q among 1000: %d, Java %d", k, got, want)
		}
	}
}

// queryTopology counts by key, and per key in 10 s tumbling windows, in one
// sub-topology reading "views".
func queryTopology() *topology.Topology {
	t := topology.New()
	views := topology.From(t, "views", serde.String, serde.String)
	g := topology.GroupByKey(views)
	topology.Count(g, topology.Materialized("totals", serde.String, serde.Int64))
	// An hour of lateness keeps every window of the test.
	topology.CountWindows(topology.WindowedBy(g, window.Tumbling(10*time.Second), topology.AllowedLateness(time.Hour)),
		topology.Materialized("per10s", serde.String, serde.Int64))
	return t
}

// openQueryTask makes an App over queryTopology with one open task (sub 0,
// partition p of n) registered for queries, and returns the task.
func openQueryTask(t *testing.T, a *App, n, p int32) *task.Task {
	t.Helper()
	tk, err := task.New(task.ID{Sub: 0, Partition: p}, a.plan.Subs[0], a.plan, task.Config{
		AppID: "q", StateDir: t.TempDir(), Send: func(*kgo.Record, func(*kgo.Record, error)) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.queries.setWidths(map[int]int32{0: n})
	a.queries.opened(tk)
	if err := tk.Init(); err != nil {
		t.Fatal(err)
	}
	return tk
}

func process(t *testing.T, tk *task.Task, key string, ts int64) {
	t.Helper()
	r := &kgo.Record{Topic: "views", Partition: tk.ID().Partition, Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(ts)}
	if err := tk.Process(r); err != nil {
		t.Fatal(err)
	}
}

func commit(t *testing.T, tk *task.Task) {
	t.Helper()
	if err := tk.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := tk.Commit(); err != nil {
		t.Fatal(err)
	}
}

func newQueryApp(t *testing.T) *App {
	t.Helper()
	a, err := New(queryTopology(), ApplicationID("q"), AdvertisedEndpoint("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// keysOn returns count keys whose partition among n is p.
func keysOn(n, p int32, count int) []string {
	var ks []string
	for i := 0; len(ks) < count; i++ {
		if k := fmt.Sprintf("k%03d", i); KeyPartition([]byte(k), n) == p {
			ks = append(ks, k)
		}
	}
	return ks
}

// TestQueryReadsCommittedState: Get, Range and Windows see what was
// committed, never the open transaction's stage; restoring tasks answer
// ErrNotReady unless stale; other partitions ErrNotLocal.
func TestQueryReadsCommittedState(t *testing.T) {
	a := newQueryApp(t)
	const n, p = 4, 2
	tk := openQueryTask(t, a, n, p)
	defer tk.Close()
	keys := keysOn(n, p, 5)
	want := map[string]int64{}
	// Key i is seen at 0, 7 s, ..., 7i s; in time order, so none is late.
	for j := range keys {
		for _, k := range keys[j:] {
			process(t, tk, k, int64(j)*7_000)
			want[k]++
		}
	}
	// Restoring: not ready, unless stale (and stale sees the empty store).
	if _, _, err := a.Get("totals", []byte(keys[0]), false); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Get while restoring: %v, want ErrNotReady", err)
	}
	if _, ok, err := a.Get("totals", []byte(keys[0]), true); err != nil || ok {
		t.Fatalf("stale Get before any commit: ok=%v err=%v, want absent", ok, err)
	}
	a.queries.restored(tk.ID())
	// Processed, not committed: invisible.
	if _, ok, err := a.Get("totals", []byte(keys[0]), false); err != nil || ok {
		t.Fatalf("Get of staged writes: ok=%v err=%v, want absent", ok, err)
	}
	commit(t, tk)
	for _, k := range keys {
		e, ok, err := a.Get("totals", []byte(k), false)
		if err != nil || !ok || e.DecodedValue != want[k] || e.DecodedKey != k {
			t.Errorf("Get %s: %+v ok=%v err=%v, want %d", k, e, ok, err, want[k])
		}
	}
	// Staged again: the committed value stays.
	process(t, tk, keys[0], 1)
	if e, _, _ := a.Get("totals", []byte(keys[0]), false); e.DecodedValue != want[keys[0]] {
		t.Errorf("Get saw the open transaction: %v", e.DecodedValue)
	}
	if _, ok, err := a.Get("totals", []byte("nope"+keys[0]), false); ok || err != nil && !errors.Is(err, ErrNotLocal) {
		t.Errorf("absent key: ok=%v err=%v", ok, err)
	}
	other := keysOn(n, (p+1)%n, 1)[0]
	if _, _, err := a.Get("totals", []byte(other), false); !errors.Is(err, ErrNotLocal) {
		t.Errorf("key of another partition: %v, want ErrNotLocal", err)
	}
	if l, err := a.Locate("totals", []byte(other)); err != nil || l.Local || l.Partition != (p+1)%n {
		t.Errorf("Locate %s: %+v %v", other, l, err)
	}

	// Range pages through the keys in order.
	var got []string
	var after []byte
	for range 10 {
		es, more, err := a.Range("totals", RangeQuery{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got = append(got, string(e.Key))
		}
		if !more {
			break
		}
		after = es[len(es)-1].Key
	}
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	if fmt.Sprint(got) != fmt.Sprint(sorted) {
		t.Errorf("paged range %v, want %v", got, sorted)
	}
	if es, _, err := a.Range("totals", RangeQuery{From: []byte(sorted[1]), To: []byte(sorted[3])}); err != nil || len(es) != 2 || string(es[0].Key) != sorted[1] {
		t.Errorf("range [%s, %s): %v %v", sorted[1], sorted[3], es, err)
	}
	if _, _, err := a.Range("totals", RangeQuery{Partitions: []int32{(p + 1) % n}}); !errors.Is(err, ErrNotLocal) {
		t.Errorf("range of a partition not here: %v", err)
	}

	// Windows: key i was seen at 0, 7s, 14s, ...: counts per [10s·w, 10s·(w+1)).
	k := keys[4] // 5 records: 0, 7, 14, 21, 28 s
	ws, err := a.Windows("per10s", []byte(k), 0, 1<<62, false)
	if err != nil {
		t.Fatal(err)
	}
	wantW := "[{0 10000 2} {10000 20000 1} {20000 30000 2}]"
	if fmt.Sprint(ws) != wantW {
		t.Errorf("windows of %s: %v, want %s", k, ws, wantW)
	}
	if ws, _ := a.Windows("per10s", []byte(k), 15_000, 20_001, false); fmt.Sprint(ws) != "[{10000 20000 1} {20000 30000 2}]" {
		t.Errorf("windows overlapping [15s, 20.001s): %v", ws)
	}
	if ws, _ := a.Windows("per10s", []byte(k), 30_000, 40_000, false); len(ws) != 0 {
		t.Errorf("windows after the last: %v", ws)
	}

	// Kinds and names.
	for _, c := range []struct {
		err  error
		want error
	}{
		{func() error { _, _, err := a.Get("per10s", []byte(k), false); return err }(), ErrNotQueryable},
		{func() error { _, err := a.Windows("totals", []byte(k), 0, 1, false); return err }(), ErrNotQueryable},
		{func() error { _, err := a.Queryable("nope"); return err }(), ErrUnknownStore},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("got %v, want %v", c.err, c.want)
		}
	}
}

// TestQueryConcurrentWithClose: readers on other goroutines while the loop
// commits, closes and reopens the task: no race (run with -race), and a
// read that loses to a close is ErrNotReady or ErrNotLocal, never a crash
// or a wrong value.
func TestQueryConcurrentWithClose(t *testing.T) {
	a := newQueryApp(t)
	const n, p = 2, 1
	dir := t.TempDir()
	open := func() *task.Task {
		tk, err := task.New(task.ID{Sub: 0, Partition: p}, a.plan.Subs[0], a.plan, task.Config{
			AppID: "q", StateDir: dir, Send: func(*kgo.Record, func(*kgo.Record, error)) {},
		})
		if err != nil {
			t.Fatal(err)
		}
		a.queries.opened(tk)
		if err := tk.Init(); err != nil {
			t.Fatal(err)
		}
		a.queries.restored(tk.ID())
		return tk
	}
	a.queries.setWidths(map[int]int32{0: n})
	key := keysOn(n, p, 1)[0]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads, missed [4]int
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100_000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if r%2 == 0 {
					var e Entry
					var ok bool
					e, ok, err = a.Get("totals", []byte(key), false)
					if err == nil && ok && e.DecodedValue.(int64) < 1 {
						t.Errorf("read %v", e.DecodedValue)
					}
				} else {
					_, _, err = a.Range("totals", RangeQuery{Limit: 5})
				}
				switch {
				case err == nil:
					reads[r]++
				case errors.Is(err, ErrNotReady), errors.Is(err, ErrNotLocal):
					missed[r]++
				default:
					t.Errorf("read: %v", err)
					return
				}
			}
		}()
	}
	for round := range 30 {
		tk := open()
		process(t, tk, key, int64(round))
		commit(t, tk)
		a.queries.closed(tk.ID())
		if err := tk.Close(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("reads %v, missed %v", reads, missed)
}
