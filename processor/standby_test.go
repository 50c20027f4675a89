package processor

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
)

// TestStandbyFollowsOnlyCommittedChangelog runs a standby copy of a
// counting task against a changelog written by transactions
// that commit, abort and stay open: the copy reaches the changelog's end,
// holds what committed and nothing else, deletes the ranges the changelog
// drops, and a task opening on it restores nothing.
func TestStandbyFollowsOnlyCommittedChangelog(t *testing.T) {
	addrs := testbroker.Addrs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	appID := fmt.Sprintf("standby-%d", time.Now().UnixNano()%1e9)
	top := topology.New()
	topology.Count(topology.GroupByKey(topology.From(top, "in", serde.String, serde.String)),
		topology.Materialized("counts", serde.String, serde.Int64))
	a, err := New(top, ApplicationID(appID), Brokers(addrs...),
		StateDir(t.TempDir()), StandbyReplicas(1),
		Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
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
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID(appID+"-writer"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	// txn writes n records in a transaction and commits, aborts or (end
	// nil) leaves it open.
	txn := func(prefix string, n int, end *kgo.TransactionEndTry) {
		t.Helper()
		if err := prod.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "%s%d", prefix, i), Value: []byte(prefix)}
		}
		if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if end != nil {
			if err := prod.EndTransaction(ctx, *end); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit, abort := kgo.TryCommit, kgo.TryAbort
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
	// engine returns the standby's engine once it opened.
	engine := func() store.Engine {
		s.mu.Lock()
		defer s.mu.Unlock()
		if st := s.mu.tasks[id]; st != nil && !st.pending {
			return st.stores[0].eng
		}
		return nil
	}
	waitCheckpoint := func(want int64) store.Engine {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if eng := engine(); eng != nil {
				if cp, _ := eng.Checkpoint(); cp == want {
					return eng
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("standby checkpoint did not reach %d in 30s (status %+v)", want, a.Status().Tasks)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	has := func(eng store.Engine, key string) bool {
		t.Helper()
		_, ok, err := eng.Get([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	txn("c", 1000, &commit)
	txn("a", 500, &abort)
	txn("z", 10, &commit)
	eng := waitCheckpoint(end() - 1) // the last commit marker
	if !has(eng, "c999") || !has(eng, "z9") {
		t.Error("committed records missing from the standby copy")
	}
	for _, k := range []string{"a0", "a499"} {
		if has(eng, k) {
			t.Errorf("aborted record %s applied to the standby copy", k)
		}
	}
	st := a.Status().Tasks
	if len(st) != 1 || st[0].State != TaskStandby || st[0].Restored != 1010 {
		t.Errorf("status %+v: want one standby task that applied 1010 records", st)
	}
	if sums := a.local.offsetSums(); sums[id] != end() {
		t.Errorf("offset sum %d reported for the join metadata, want %d (checkpoint + 1)", sums[id], end())
	}

	// An open transaction: its records are in the log, not committed.
	before := end()
	txn("u", 10, nil)
	time.Sleep(time.Second) // several polls
	if cp, _ := eng.Checkpoint(); cp >= before || has(eng, "u0") {
		t.Errorf("standby applied an open transaction (checkpoint %d, first open offset %d)", cp, before)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	eng = waitCheckpoint(end() - 1)
	if !has(eng, "u9") {
		t.Error("records of the committed transaction missing")
	}

	// A dropped range (names.RangeDeleteHeader: a stream join's due
	// segments), then a key written in it: the copy deletes the range's
	// keys as the active store did, and keeps the key written after.
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx,
		&kgo.Record{Key: []byte("c"), Value: []byte("c5"), Headers: []kgo.RecordHeader{{Key: names.RangeDeleteHeader}}},
		&kgo.Record{Key: []byte("c2"), Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	eng = waitCheckpoint(end() - 1)
	for k, want := range map[string]bool{"c0": false, "c10": false, "c499": false, "c2": true, "c5": true, "c999": true, "u9": true} {
		if has(eng, k) != want {
			t.Errorf("after the range [c, c5) and c2 written in it: %s in the copy %v, want %v", k, !want, want)
		}
	}

	// A pack (names.PackHeader: a stream join's records, by segment):
	// the copy applies the writes it holds, in order.
	packer := store.NewStaged("pack", store.NewMemory(), store.WithPacking(store.Packing{Group: func(k []byte) int { return min(len(k), 1) }, Mark: []byte{0}}))
	var pack *kgo.Record
	packer.SetPackChangelog(func(k, v []byte) {
		pack = &kgo.Record{Key: k, Value: v, Headers: []kgo.RecordHeader{{Key: names.PackHeader}}}
	})
	for _, w := range []store.Write{{Key: []byte("c3"), Value: []byte("packed")}, {Key: []byte("c2")}, {Key: []byte("c4"), Value: []byte("packed")}} {
		if err := packer.Put(w.Key, w.Value); err != nil {
			t.Fatal(err)
		}
	}
	if err := packer.Flush(); err != nil || pack == nil {
		t.Fatalf("no pack: %v", err)
	}
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, pack).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	eng = waitCheckpoint(end() - 1)
	for k, want := range map[string]bool{"c2": false, "c3": true, "c4": true, "c5": true} {
		if has(eng, k) != want {
			t.Errorf("after a pack that writes c3 and c4 and deletes c2: %s in the copy %v, want %v", k, !want, want)
		}
	}

	// Promotion: the standby closes, the active task's restore finds
	// nothing left to replay.
	s.release(id)
	if len(a.Status().Tasks) != 0 {
		t.Errorf("status after release: %+v", a.Status().Tasks)
	}
	active, err := store.OpenPebble(filepath.Join(a.dir, id.String(), "counts"))
	if err != nil {
		t.Fatal(err)
	}
	defer active.Close()
	n, err := restore(ctx, adm, a.cfg.kgoOpts, topic, 0, active, 10*time.Second, nil, &restoreProgress{log: a.log})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("restore on the standby copy replayed %d records, want 0", n)
	}
	// Negative control: a fresh store restores all 1023 committed records.
	fresh := store.NewMemory()
	if n, err = restore(ctx, adm, a.cfg.kgoOpts, topic, 0, fresh, 10*time.Second, nil, &restoreProgress{log: a.log}); err != nil || n != 1023 {
		t.Errorf("fresh restore: %d records, %v; want 1023", n, err)
	}
	if !has(fresh, "c3") || has(fresh, "c2") {
		t.Error("the fresh restore did not apply the pack's writes")
	}
}
