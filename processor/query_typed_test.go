package processor_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/processor/serve"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// typedStores are the materializations of typedTopology: the latest value
// of each key, and its records per 10 s tumbling window.
var (
	latestStore = topology.Materialized("latest", serde.String, serde.String)
	per10sStore = topology.Materialized("per10s", serde.String, serde.Int64)
	// lengthsStore sums the lengths of each key's values in a type whose
	// JSON is {}: a value that crossed as JSON would read as zero.
	lengthsStore = topology.Materialized("lengths", serde.String, serde.Funcs(
		func(s opaque) ([]byte, error) { return serde.Int64.Encode(s.n) },
		func(b []byte) (opaque, error) { n, err := serde.Int64.Decode(b); return opaque{n}, err }))
)

type opaque struct{ n int64 }

func typedTopology(in string) *topology.Topology {
	t := topology.New()
	g := topology.GroupByKey(topology.From(t, in, serde.String, serde.String))
	topology.Reduce(g, func(_, v string) string { return v }, latestStore)
	topology.Aggregate(g, func() opaque { return opaque{} }, func(_, v string, a opaque) opaque { return opaque{a.n + int64(len(v))} }, lengthsStore)
	// An hour of lateness keeps every window of the test.
	topology.CountWindows(topology.WindowedBy(g, window.Tumbling(10*time.Second), topology.AllowedLateness(time.Hour)), per10sStore)
	return t
}

// typedInstance is an App with the serve endpoints on 127.0.0.1:0,
// advertised as its endpoint.
type typedInstance struct {
	app      *processor.App
	addr     string
	stopHTTP func()
}

func startTypedInstance(t *testing.T, brokers []string, appID, in string) *typedInstance {
	t.Helper()
	return startTypedInstanceWith(t, brokers, appID, in, nil)
}

// waitShared waits until each instance is ready, and its routing map
// gives the partitions to all of them.
func waitShared(t *testing.T, insts []*typedInstance) {
	t.Helper()
	waitUntil(t, "the instances to share the tasks", func() bool {
		for _, ti := range insts {
			locs, err := ti.app.Locations("latest")
			if err != nil || !ti.app.Status().Ready {
				return false
			}
			owners := map[string]bool{}
			for _, l := range locs {
				owners[l.Endpoint] = true
			}
			if len(owners) != len(insts) || owners[""] {
				return false
			}
		}
		return true
	})
}

// startTypedInstanceWith serves over TLS with tlsCfg (if not nil) and with
// the endpoints' options opts.
func startTypedInstanceWith(t *testing.T, brokers []string, appID, in string, tlsCfg *tls.Config, opts ...serve.Opt) *typedInstance {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	app, err := processor.New(typedTopology(in), processor.ApplicationID(appID), processor.Brokers(brokers...),
		processor.StateDir(t.TempDir()), processor.AdvertisedEndpoint(ln.Addr().String()), processor.Logger(log),
		processor.CommitInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	serve.Register(mux, app, append([]serve.Opt{serve.Logger(log)}, opts...)...)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	ti := &typedInstance{app: app, addr: ln.Addr().String()}
	ti.stopHTTP = func() { _ = srv.Close(); <-served }
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("instance %s: %v", ti.addr, err)
		}
		ti.stopHTTP()
	})
	return ti
}

// TestQueryTypedAcrossInstances: two instances, keys of every encoded
// length and UUIDs; each instance answers every key through the typed
// query, reading its own tasks and asking the other for the rest, and the
// values are those of the store's serdes. Ranges merge both instances'
// keys; windows come back as topology.Windowed keys; a stopped owner is
// ErrOwnerUnreachable.
func TestQueryTypedAcrossInstances(t *testing.T) {
	brokers := testBrokers(t)
	in := uniq(t, "typed-in")
	cl := setup(t, brokers, 4, in)
	appID := uniq(t, "typed")
	insts := []*typedInstance{startTypedInstance(t, brokers, appID, in), startTypedInstance(t, brokers, appID, in)}
	waitShared(t, insts)

	keys := testkeys.All()
	want := map[string]string{}
	wantLen := map[string]int64{}
	ctx := context.Background()
	for i, k := range keys {
		// Two records in [0, 10 s), one in [10 s, 20 s); the last value
		// stays. Values of every length too.
		for j, ts := range []int64{1_000, 2_000, 15_000} {
			v := fmt.Sprintf("%d/%d:%s", i, j, keys[(i+j)%len(keys)])
			want[k] = v
			wantLen[k] += int64(len(v))
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v), Timestamp: time.UnixMilli(ts)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, ti := range insts {
		q := processor.Query(ti.app, latestStore)
		remote := 0
		for _, k := range keys {
			var v string
			var ok bool
			waitUntil(t, fmt.Sprintf("key of %d bytes at %s", len(k), ti.addr), func() bool {
				var err error
				v, ok, err = q.Get(ctx, k)
				if err != nil && !errors.Is(err, processor.ErrNotReady) {
					t.Fatalf("Get %q at %s: %v", k, ti.addr, err)
				}
				return err == nil && ok && v == want[k]
			})
			loc, err := ti.app.Locate("latest", []byte(k))
			if err != nil {
				t.Fatal(err)
			}
			if !loc.Local {
				remote++
			}
		}
		t.Logf("%s: %d of %d keys asked of the other instance", ti.addr, remote, len(keys))
		if remote == 0 || remote == len(keys) {
			t.Errorf("%s: %d of %d keys owned by the other instance: want some, not all", ti.addr, remote, len(keys))
		}
		// Values cross as stored bytes, decoded with the store's serde.
		lq := processor.Query(ti.app, lengthsStore)
		for _, k := range keys {
			if v, ok, err := lq.Get(ctx, k); err != nil || !ok || v.n != wantLen[k] {
				t.Errorf("lengths of key of %d bytes at %s: %v %v %v, want %d", len(k), ti.addr, v, ok, err, wantLen[k])
			}
		}
		if all, err := lq.All(ctx); err != nil || len(all) != len(keys) || all[len(all)-1].Value.n != wantLen[all[len(all)-1].Key] {
			t.Errorf("All lengths at %s: %d entries, %v", ti.addr, len(all), err)
		}
		// Absent keys, some of each instance.
		for i := range 20 {
			k := fmt.Sprintf("absent-%d", i)
			if v, ok, err := q.Get(ctx, k); ok || err != nil {
				t.Errorf("absent %q at %s: %q %v %v", k, ti.addr, v, ok, err)
			}
		}

		// All: every key once, in byte order, with its value.
		all, err := q.All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sorted := append([]string(nil), keys...)
		sort.Strings(sorted)
		if len(all) != len(sorted) {
			t.Fatalf("All at %s: %d entries, want %d", ti.addr, len(all), len(sorted))
		}
		for i, e := range all {
			if e.Key != sorted[i] || e.Value != want[e.Key] {
				t.Errorf("All at %s, entry %d: %q=%q, want %q=%q", ti.addr, i, e.Key, e.Value, sorted[i], want[sorted[i]])
			}
		}
		// Range [sorted[10], sorted[100]): the 90 keys between.
		rng, err := q.Range(ctx, sorted[10], sorted[100])
		if err != nil {
			t.Fatal(err)
		}
		if len(rng) != 90 || rng[0].Key != sorted[10] || rng[89].Key != sorted[99] {
			t.Errorf("Range at %s: %d entries, want the 90 of [%q, %q)", ti.addr, len(rng), sorted[10], sorted[100])
		}
		if rng, err := q.Range(ctx, sorted[100], sorted[10]); err != nil || len(rng) != 0 {
			t.Errorf("empty Range: %v %v", rng, err)
		}

		// Windows of every key, by its windowed key.
		wq := processor.QueryWindows(ti.app, per10sStore)
		for _, k := range keys {
			ws, err := wq.Fetch(ctx, k, math.MinInt64, math.MaxInt64)
			if err != nil {
				t.Fatalf("Fetch %q at %s: %v", k, ti.addr, err)
			}
			wantW := fmt.Sprint([]topology.KeyValue[topology.Windowed[string], int64]{
				{Key: topology.Windowed[string]{Key: k, Window: window.Bounds{Start: 0, End: 10_000}}, Value: 2},
				{Key: topology.Windowed[string]{Key: k, Window: window.Bounds{Start: 10_000, End: 20_000}}, Value: 1},
			})
			if fmt.Sprint(ws) != wantW {
				t.Errorf("windows of key of %d bytes at %s: %v, want %v", len(k), ti.addr, ws, wantW)
			}
			if ws, err := wq.Fetch(ctx, k, 12_000, 13_000); err != nil || len(ws) != 1 || ws[0].Key.Window.Start != 10_000 {
				t.Errorf("windows of key of %d bytes overlapping [12 s, 13 s) at %s: %v %v", len(k), ti.addr, ws, err)
			}
			if ws, err := wq.Fetch(ctx, k, 30_000, 40_000); err != nil || len(ws) != 0 {
				t.Errorf("windows of key of %d bytes after the last at %s: %v %v", len(k), ti.addr, ws, err)
			}
		}
	}

	// Kinds and names.
	front := insts[0].app
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"unknown store", func() error {
			_, _, err := processor.Query(front, topology.Materialized("nope", serde.String, serde.String)).Get(ctx, "k")
			return err
		}(), processor.ErrUnknownStore},
		{"window store as key-value", func() error {
			_, _, err := processor.Query(front, per10sStore).Get(ctx, "k")
			return err
		}(), processor.ErrNotQueryable},
		{"key-value store as window store", func() error {
			_, err := processor.QueryWindows(front, latestStore).Fetch(ctx, "k", 0, 1)
			return err
		}(), processor.ErrNotQueryable},
	} {
		if !errors.Is(c.err, c.want) || !strings.Contains(fmt.Sprint(c.err), "store") {
			t.Errorf("%s: %v, want %v naming the store", c.what, c.err, c.want)
		}
	}

	// The other instance's endpoints stop: its keys are unreachable from
	// here, and the error says so; local keys still answer.
	insts[1].stopHTTP()
	q := processor.Query(front, latestStore)
	unreachable, local := 0, 0
	for _, k := range keys {
		loc, err := front.Locate("latest", []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		v, ok, err := q.Get(ctx, k)
		switch {
		case loc.Local:
			local++
			if err != nil || !ok || v != want[k] {
				t.Errorf("local key of %d bytes: %q %v %v", len(k), v, ok, err)
			}
		case errors.Is(err, processor.ErrOwnerUnreachable):
			unreachable++
		default:
			t.Errorf("key of %d bytes at a stopped owner: %q %v %v, want ErrOwnerUnreachable", len(k), v, ok, err)
		}
	}
	t.Logf("owner stopped: %d keys unreachable, %d local", unreachable, local)
	if unreachable == 0 || local == 0 {
		t.Errorf("%d unreachable, %d local: want some of each", unreachable, local)
	}
	if _, err := q.All(ctx); !errors.Is(err, processor.ErrOwnerUnreachable) {
		t.Errorf("All with an owner stopped: %v, want ErrOwnerUnreachable", err)
	}
}

// waitUntil polls ok for up to a minute.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
