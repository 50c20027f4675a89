package processor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
)

// applyFault makes the engines opened through openEngine fail one Apply
// that carries writes, once armed.
type applyFault struct {
	armed  atomic.Bool
	once   sync.Once
	failed chan struct{}
}

func injectApplyFault(t *testing.T) *applyFault {
	f := &applyFault{failed: make(chan struct{})}
	prev := openEngine
	openEngine = func(dir string, o store.PebbleOptions) (store.Engine, error) {
		eng, err := prev(dir, o)
		if err != nil {
			return nil, err
		}
		return &flakyEngine{Engine: eng, f: f}, nil
	}
	t.Cleanup(func() { openEngine = prev })
	return f
}

// wait waits for the failure, bounded.
func (f *applyFault) wait(t *testing.T) {
	t.Helper()
	select {
	case <-f.failed:
	case <-time.After(30 * time.Second):
		t.Fatal("the armed apply failure never happened")
	}
}

type flakyEngine struct {
	store.Engine
	f *applyFault
}

func (e *flakyEngine) Apply(ws []store.Write, cp int64) error {
	if len(ws) > 0 && e.f.armed.CompareAndSwap(true, false) {
		e.f.once.Do(func() { close(e.f.failed) })
		return errors.New("injected apply failure")
	}
	return e.Engine.Apply(ws, cp)
}

// TestStandbyRewindsAfterAFailedApply (defect 14): a standby copy whose
// engine fails to apply a batch must not go on past it: the checkpoint
// would rise over the hole, and the task promoted from the copy would
// restore only past it, without the batch's records.
func TestStandbyRewindsAfterAFailedApply(t *testing.T) {
	fault := injectApplyFault(t)
	b := edgeBroker(t)
	addrs := b.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	appID := "standby-14"
	top := topology.New()
	topology.Count(topology.GroupByKey(topology.From(top, "in", serde.String, serde.String)),
		topology.Materialized("counts", serde.String, serde.Int64))
	a, err := New(top, ApplicationID(appID), Brokers(addrs...), StateDir(t.TempDir()), StandbyReplicas(1), Logger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	a.dir = filepath.Join(a.cfg.stateDir, appID)
	var id task.ID
	for s := range a.statefulSubs() {
		id = task.ID{Sub: s, Partition: 0}
	}
	topic := names.Changelog(appID, "counts")
	if err := broker.CreateTopic(ctx, addrs, topic, 1, map[string]*string{"cleanup.policy": new("compact")}); err != nil {
		t.Fatal(err)
	}
	prod := edgeClient(t, addrs, kgo.TransactionalID(appID+"-writer"), kgo.DefaultProduceTopic(topic))
	keys := edgeKeys(150)
	commitTxn := func(round string, ks [][]byte) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		rs := make([]*kgo.Record, len(ks))
		for i, k := range ks {
			rs[i] = &kgo.Record{Key: k, Value: []byte(round)}
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	adm := kadm.NewClient(prod)
	end := func() int64 {
		t.Helper()
		o, err := listOffset(ctx, adm.ListEndOffsets, topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	s, err := a.startStandbys()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.set(map[task.ID]bool{id: true})
	waitCheckpoint := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			s.mu.Lock()
			var cp int64 = store.NoCheckpoint
			if st := s.mu.tasks[id]; st != nil && !st.pending {
				cp, _ = st.stores[0].eng.Checkpoint()
			}
			s.mu.Unlock()
			if cp == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("standby checkpoint %d did not reach %d in 30s", cp, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	commitTxn("a", keys[:50])
	waitCheckpoint(end() - 1)
	fault.armed.Store(true)
	commitTxn("b", keys[50:100]) // its apply fails
	fault.wait(t)
	commitTxn("c", keys[100:])
	waitCheckpoint(end() - 1)

	// Promotion: the copy closes; the active task restores on it.
	s.release(id)
	active, err := store.OpenPebble(filepath.Join(a.dir, id.String(), "counts"))
	if err != nil {
		t.Fatal(err)
	}
	defer active.Close()
	if _, err := restore(ctx, adm, a.cfg.kgoOpts, topic, 0, active, 10*time.Second, nil, &restoreProgress{log: a.log}); err != nil {
		t.Fatal(err)
	}
	var missing []int
	for i, k := range keys {
		v, ok, err := active.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "a", false: map[bool]string{true: "b", false: "c"}[i < 100]}[i < 50]; !ok || string(v) != want {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the promoted task lacks %d of %d keys (e.g. key %d): the failed batch was skipped", len(missing), len(keys), missing[0])
	}
}

// TestGlobalFollowerRetriesAFailedApply (defect 14): the global table's
// follower must not poll on past a fetch it could not apply.
func TestGlobalFollowerRetriesAFailedApply(t *testing.T) {
	fault := injectApplyFault(t)
	b := edgeBroker(t)
	addrs := b.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tp := range []string{"users", "clicks", "out"} {
		if err := broker.CreateTopic(ctx, addrs, tp, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	cl := edgeClient(t, addrs, kgo.DefaultProduceTopic("users"))
	keys := edgeKeys(40)
	for i, k := range keys[:20] {
		produceEach(t, cl, &kgo.Record{Key: k, Value: fmt.Appendf(nil, "v%d", i)})
	}
	tp := topology.New()
	g := topology.GlobalTableFrom(tp, "users", topology.Materialized("users", serde.Bytes, serde.String))
	j := topology.LeftJoinGlobal(topology.From(tp, "clicks", serde.Bytes, serde.Bytes), g,
		func(k, _ []byte) []byte { return k },
		func(_, _ []byte, v string, _ bool) string { return v })
	topology.To(j, "out", serde.Bytes, serde.String)
	a, err := New(tp, ApplicationID("global-14"), Brokers(addrs...), StateDir(t.TempDir()), Logger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	a.dir = t.TempDir()
	gs, err := a.startGlobals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.close()
	eng := gs.engines["users"]
	fault.armed.Store(true)
	produceEach(t, cl, &kgo.Record{Key: keys[20], Value: []byte("v20")}) // its apply fails
	fault.wait(t)
	for i, k := range keys[21:] {
		produceEach(t, cl, &kgo.Record{Key: k, Value: fmt.Appendf(nil, "v%d", 21+i)})
	}
	last := keys[len(keys)-1]
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, ok, _ := eng.Get(last); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the global table did not follow its topic in 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, k := range keys {
		if v, ok, _ := eng.Get(k); !ok || string(v) != fmt.Sprintf("v%d", i) {
			t.Errorf("key %d (%d bytes): %q %v: the fetch that failed to apply was skipped", i, len(k), v, ok)
		}
	}
}

// TestStandbyWipesADamagedCopy: a standby copy whose files are damaged on
// disk is wiped and followed from the start of its changelog, instead of
// failing to open on every poll.
func TestStandbyWipesADamagedCopy(t *testing.T) {
	b := edgeBroker(t)
	addrs := b.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	appID := "standby-damaged"
	top := topology.New()
	topology.Count(topology.GroupByKey(topology.From(top, "in", serde.String, serde.String)),
		topology.Materialized("counts", serde.String, serde.Int64))
	a, err := New(top, ApplicationID(appID), Brokers(addrs...), StateDir(t.TempDir()), StandbyReplicas(1), Logger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	a.dir = filepath.Join(a.cfg.stateDir, appID)
	var id task.ID
	for s := range a.statefulSubs() {
		id = task.ID{Sub: s, Partition: 0}
	}
	topic := names.Changelog(appID, "counts")
	if err := broker.CreateTopic(ctx, addrs, topic, 1, map[string]*string{"cleanup.policy": new("compact")}); err != nil {
		t.Fatal(err)
	}
	cl := edgeClient(t, addrs, kgo.DefaultProduceTopic(topic))
	keys := edgeKeys(60)
	for _, k := range keys {
		produceEach(t, cl, &kgo.Record{Key: k, Value: []byte("v")})
	}
	// A copy from an earlier run, checkpoint 10, then damaged.
	dir := filepath.Join(a.dir, id.String(), "counts")
	old, err := store.OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ws []store.Write
	for _, k := range keys[:11] {
		ws = append(ws, store.Write{Key: k, Value: []byte("v")})
	}
	if err := old.Apply(ws, 10); err != nil {
		t.Fatal(err)
	}
	old.Close()
	damagePebble(t, dir)

	s, err := a.startStandbys()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	s.set(map[task.ID]bool{id: true})
	want := int64(len(keys) - 1)
	for deadline := time.Now().Add(30 * time.Second); ; {
		s.mu.Lock()
		var cp int64 = store.NoCheckpoint
		if st := s.mu.tasks[id]; st != nil && !st.pending {
			cp, _ = st.stores[0].eng.Checkpoint()
		}
		s.mu.Unlock()
		if cp == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the damaged standby copy reached checkpoint %d in 30s, want %d", cp, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// damagePebble flushes the Pebble store in dir to a table and flips bytes
// inside it, as a disk fault would.
func damagePebble(t *testing.T, dir string) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) == 0 {
		t.Fatalf("no table in %s to damage", dir)
	}
	for _, path := range tables {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := 64; i < 128 && i < len(b); i++ {
			b[i] ^= 0xff
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
