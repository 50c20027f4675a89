package processor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
)

// edgeBroker starts a one-node kfake broker for the edge tests: they need
// kfake itself (compaction on demand), so they ignore SLUICE_TEST_BROKERS.
func edgeBroker(t *testing.T) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// edgeKeys are keys of the shapes a store must take: empty, one byte, a
// 36-byte UUID, every length up to past 128 bytes.
func edgeKeys(n int) [][]byte {
	keys := [][]byte{{}, {0}, []byte("123e4567-e89b-12d3-a456-426614174000")}
	for i := 0; len(keys) < n; i++ {
		keys = append(keys, []byte(strings.Repeat("k", i%131)+fmt.Sprint(i)))
	}
	return keys[:n]
}

func edgeClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceEach writes each record in a batch of its own (so that
// compaction can remove any one of them) and returns their offsets.
func produceEach(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) []int64 {
	t.Helper()
	var offs []int64
	for _, r := range rs {
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, r.Offset)
	}
	return offs
}

// abortedTxn writes rs in a transaction that aborts.
func abortedTxn(t *testing.T, addrs []string, id string, rs ...*kgo.Record) {
	t.Helper()
	ctx := context.Background()
	cl := edgeClient(t, addrs, kgo.TransactionalID(id))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	cl.Close()
}

func commitGroup(t *testing.T, adm *kadm.Client, group, topic string, p int32, at int64) {
	t.Helper()
	var os kadm.Offsets
	os.AddOffset(topic, p, at, -1)
	resp, err := adm.CommitOffsets(context.Background(), group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func restoreOpts(addrs []string) func(...kgo.Opt) []kgo.Opt {
	return func(o ...kgo.Opt) []kgo.Opt { return append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, o...) }
}

// TestRestoreFromSourceWaitsForPendingOffsetCommit (defect 11): a table read
// from its source topic restores up to the group's committed offset. Right
// after a hand-off the previous owner's transaction, which commits the
// group's offset, may still be open: the restore must wait for it
// (RequireStable), or the records between the old and the new committed
// offset never reach the table (the new owner's consumer starts at the new
// one).
func TestRestoreFromSourceWaitsForPendingOffsetCommit(t *testing.T) {
	b := edgeBroker(t)
	addrs := b.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, scratch, group := "src", "scratch", "app-11"
	for _, tp := range []string{src, scratch} {
		if err := broker.CreateTopic(ctx, addrs, tp, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	keys := edgeKeys(10)
	plain := edgeClient(t, addrs, kgo.DefaultProduceTopic(src))
	for i, k := range keys {
		produceEach(t, plain, &kgo.Record{Key: k, Value: fmt.Appendf(nil, "v%d", i)})
	}
	adm := kadm.NewClient(plain)
	commitGroup(t, adm, group, src, 0, 4)

	// The previous owner's transaction: it moves the group's offset to 10
	// and is still open when the restore starts.
	prev := edgeClient(t, addrs, kgo.TransactionalID("prev-owner"), kgo.DefaultProduceTopic(scratch))
	if err := prev.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prev.ProduceSync(ctx, &kgo.Record{Value: []byte("out")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := prev.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "prev-owner", pid, epoch, group
	if _, err := add.RequestWith(ctx, prev); err != nil {
		t.Fatal(err)
	}
	toc := kmsg.NewPtrTxnOffsetCommitRequest()
	toc.TransactionalID, toc.Group, toc.ProducerID, toc.ProducerEpoch, toc.Generation = "prev-owner", group, pid, epoch, -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = src
	td, err := adm.ListTopics(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	tt.TopicID = td[src].ID // v6+ names topics by id
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 10
	tt.Partitions = append(tt.Partitions, tp)
	toc.Topics = append(toc.Topics, tt)
	resp, err := toc.RequestWith(ctx, prev)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("txn offset commit: %v %+v", err, resp)
	}

	// The transaction commits once the restore got its first answer.
	asked := make(chan struct{})
	var once sync.Once
	hook := offsetFetchHook(func() { once.Do(func() { close(asked) }) })
	radm := kadm.NewClient(edgeClient(t, addrs, kgo.WithHooks(hook)))
	committed := make(chan error, 1)
	go func() {
		select {
		case <-asked:
		case <-ctx.Done():
		}
		committed <- prev.EndTransaction(ctx, kgo.TryCommit)
	}()
	eng := store.NewMemory()
	n, err := restore(ctx, radm, restoreOpts(addrs), src, 0, eng, 10*time.Second,
		&sourceChangelog{group: group, accepts: func(_, _ []byte) bool { return true }}, &restoreProgress{log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if n != 10 {
		t.Errorf("restored %d records, want 10: the previous owner's pending commit (offset 10) was not waited for", n)
	}
	for i, k := range keys {
		if v, ok, _ := eng.Get(k); !ok || string(v) != fmt.Sprintf("v%d", i) {
			t.Errorf("key of %d bytes: %q %v, want v%d", len(k), v, ok, i)
		}
	}
}

type offsetFetchHook func()

// OnBrokerRead: the answer to an OffsetFetch arrived.
func (h offsetFetchHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == kmsg.OffsetFetch.Int16() {
		h()
	}
}

// TestRestoreEndsWhereRecordsAreGone (defect 13): the restore of a table
// read from its source topic ends at the group's committed offset even when
// the records just below it are gone: removed by compaction (a later record
// of the same key lies past the end), or aborted (a read_committed reader
// never sees them, only the abort marker past the end).
func TestRestoreEndsWhereRecordsAreGone(t *testing.T) {
	all := func(_, _ []byte) bool { return true }
	t.Run("compacted", func(t *testing.T) {
		b := edgeBroker(t)
		addrs := b.Addrs()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := broker.CreateTopic(ctx, addrs, "src", 1, map[string]*string{"cleanup.policy": new("compact")}); err != nil {
			t.Fatal(err)
		}
		cl := edgeClient(t, addrs, kgo.DefaultProduceTopic("src"))
		keys := edgeKeys(10)
		for i, k := range keys { // offsets 0..9
			produceEach(t, cl, &kgo.Record{Key: k, Value: fmt.Appendf(nil, "v%d", i)})
		}
		// Offsets 10, 11 supersede 8 and 9; 12 is the active batch.
		produceEach(t, cl, &kgo.Record{Key: keys[8], Value: []byte("new8")}, &kgo.Record{Key: keys[9], Value: []byte("new9")},
			&kgo.Record{Key: []byte("tail"), Value: []byte("t")})
		b.Cluster().Compact()
		adm := kadm.NewClient(cl)
		commitGroup(t, adm, "g", "src", 0, 10)
		eng := store.NewMemory()
		n, err := restore(ctx, adm, restoreOpts(addrs), "src", 0, eng, 10*time.Second, &sourceChangelog{group: "g", accepts: all}, &restoreProgress{log: quietLog()})
		if err != nil {
			t.Fatalf("restore past compacted records 8, 9: %v", err)
		}
		if n != 8 {
			t.Errorf("restored %d, want 8 (offsets 0..7; 8 and 9 were compacted away)", n)
		}
		if cp, _ := eng.Checkpoint(); cp != 9 {
			t.Errorf("checkpoint %d, want 9 (the end - 1: the next restore resumes at the committed offset)", cp)
		}
		for i, k := range keys[:8] {
			if v, ok, _ := eng.Get(k); !ok || string(v) != fmt.Sprintf("v%d", i) {
				t.Errorf("key of %d bytes: %q %v", len(k), v, ok)
			}
		}
	})
	t.Run("aborted", func(t *testing.T) {
		b := edgeBroker(t)
		addrs := b.Addrs()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := broker.CreateTopic(ctx, addrs, "src", 1, nil); err != nil {
			t.Fatal(err)
		}
		cl := edgeClient(t, addrs, kgo.DefaultProduceTopic("src"))
		keys := edgeKeys(12)
		for i, k := range keys[:5] { // 0..4
			produceEach(t, cl, &kgo.Record{Key: k, Value: fmt.Appendf(nil, "v%d", i)})
		}
		var rs []*kgo.Record // 5..7 aborted, marker 8
		for _, k := range keys[5:8] {
			rs = append(rs, &kgo.Record{Topic: "src", Key: k, Value: []byte("aborted")})
		}
		abortedTxn(t, addrs, "aborter", rs...)
		for i, k := range keys[8:] { // 9..12
			produceEach(t, cl, &kgo.Record{Key: k, Value: fmt.Appendf(nil, "w%d", i)})
		}
		adm := kadm.NewClient(cl)
		commitGroup(t, adm, "g", "src", 0, 7) // inside the aborted records
		eng := store.NewMemory()
		n, err := restore(ctx, adm, restoreOpts(addrs), "src", 0, eng, 10*time.Second, &sourceChangelog{group: "g", accepts: all}, &restoreProgress{log: quietLog()})
		if err != nil {
			t.Fatalf("restore up to an offset inside aborted records: %v", err)
		}
		if n != 5 {
			t.Errorf("restored %d, want 5", n)
		}
		for _, k := range keys[5:] {
			if _, ok, _ := eng.Get(k); ok {
				t.Errorf("key of %d bytes restored: aborted or past the end", len(k))
			}
		}
	})
	// A changelog ending in an aborted transaction: the end is the abort
	// marker's offset + 1.
	t.Run("changelog with an aborted tail", func(t *testing.T) {
		b := edgeBroker(t)
		addrs := b.Addrs()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := broker.CreateTopic(ctx, addrs, "cl", 1, map[string]*string{"cleanup.policy": new("compact")}); err != nil {
			t.Fatal(err)
		}
		cl := edgeClient(t, addrs, kgo.DefaultProduceTopic("cl"))
		keys := edgeKeys(8)
		for i, k := range keys[:5] {
			produceEach(t, cl, &kgo.Record{Key: k, Value: fmt.Appendf(nil, "v%d", i)})
		}
		var rs []*kgo.Record
		for _, k := range keys[5:] {
			rs = append(rs, &kgo.Record{Topic: "cl", Key: k, Value: []byte("aborted")})
		}
		abortedTxn(t, addrs, "aborter", rs...)
		eng := store.NewMemory()
		n, err := restore(ctx, kadm.NewClient(cl), restoreOpts(addrs), "cl", 0, eng, 10*time.Second, nil, &restoreProgress{log: quietLog()})
		if err != nil || n != 5 {
			t.Fatalf("restore: %d records, %v; want 5", n, err)
		}
	})
}

// TestGlobalBootstrapEndsOnEmptiedPartition (defect 13): a global table's
// bootstrap ends on partitions whose records are gone: emptied by
// DeleteRecords (log start = end, no record will ever come), or ending in an
// aborted transaction.
func TestGlobalBootstrapEndsOnEmptiedPartition(t *testing.T) {
	b := edgeBroker(t)
	addrs := b.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	users, clicks, out := "users", "clicks", "out"
	for _, tp := range []string{users, clicks, out} {
		if err := broker.CreateTopic(ctx, addrs, tp, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	cl := edgeClient(t, addrs, kgo.DefaultProduceTopic(users))
	keys := edgeKeys(15)
	// Partition 0: five records, all deleted.
	for i, k := range keys[:5] {
		produceEach(t, cl, &kgo.Record{Partition: 0, Key: k, Value: fmt.Appendf(nil, "gone%d", i)})
	}
	var del kadm.Offsets
	del.AddOffset(users, 0, 5, -1)
	if resp, err := kadm.NewClient(cl).DeleteRecords(ctx, del); err != nil || resp.Error() != nil {
		t.Fatalf("delete records: %v %v", err, resp)
	}
	// Partition 1: committed records, then an aborted transaction.
	for i, k := range keys[5:10] {
		produceEach(t, cl, &kgo.Record{Partition: 1, Key: k, Value: fmt.Appendf(nil, "v%d", 5+i)})
	}
	var rs []*kgo.Record
	for _, k := range keys[10:] {
		rs = append(rs, &kgo.Record{Topic: users, Partition: 1, Key: k, Value: []byte("aborted")})
	}
	abortedTxn(t, addrs, "aborter", rs...)
	// Partition 2: empty.

	tp := topology.New()
	g := topology.GlobalTableFrom(tp, users, topology.Materialized("users", serde.Bytes, serde.String))
	j := topology.LeftJoinGlobal(topology.From(tp, clicks, serde.Bytes, serde.Bytes), g,
		func(k, _ []byte) []byte { return k },
		func(_, _ []byte, v string, _ bool) string { return v })
	topology.To(j, out, serde.Bytes, serde.String)
	a, err := New(tp, ApplicationID("global-13"), Brokers(addrs...), StateDir(t.TempDir()), Logger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	a.dir = t.TempDir()
	bctx, bcancel := context.WithTimeout(ctx, 15*time.Second)
	defer bcancel()
	gs, err := a.startGlobals(bctx)
	if err != nil {
		t.Fatalf("global bootstrap: %v", err)
	}
	defer gs.close()
	eng := gs.engines["users"]
	for i, k := range keys {
		v, ok, err := eng.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		if want := i >= 5 && i < 10; ok != want || ok && string(v) != fmt.Sprintf("v%d", i) {
			t.Errorf("key %d (%d bytes): %q %v, want present %v", i, len(k), v, ok, want)
		}
	}
}

// TestRestoreReplaysRangeDeletes: a changelog record of a dropped range
// (names.RangeDeleteHeader: a stream join's due segments) is replayed as
// the range delete it is, in its place among the other records: the keys
// put in its range before it go, those put after it stay, and those
// outside it stay. After compaction has kept only the latest record of
// the range's start (the ranges from one start only grow), the replay
// ends in the same state. Keys of every shape, in Pebble. A source
// table's topic is a user's, where the header means nothing: there the
// record is a key like any other.
func TestRestoreReplaysRangeDeletes(t *testing.T) {
	keys := edgeKeys(24)
	in := func(k []byte) []byte { return append([]byte("jx"), k...) } // "j" itself is no key
	put := func(k []byte, v string) *kgo.Record { return &kgo.Record{Key: k, Value: []byte(v)} }
	drop := func(end []byte) *kgo.Record {
		return &kgo.Record{Key: []byte("j"), Value: end, Headers: []kgo.RecordHeader{{Key: names.RangeDeleteHeader}}}
	}
	var recs []*kgo.Record
	for i, k := range keys {
		recs = append(recs, put(in(k), fmt.Sprint("v", i)), put(append([]byte("k"), k...), fmt.Sprint("w", i)))
	}
	recs = append(recs,
		drop(in([]byte("k"))), // the keys below "k": the empty key, 0x00, the UUID, "0"
		put(in(keys[1]), "again"), put(in(keys[5]), "again"),
		drop(in([]byte("kkk"))), // a farther end from the same start
		put(in(keys[2]), "last"))
	// replay is what the engine must hold: the records applied in order,
	// a range record as a range delete if ranges.
	replay := func(ranges bool) string {
		m := map[string]string{}
		for _, r := range recs {
			if ranges && len(r.Headers) > 0 {
				for k := range m {
					if k >= string(r.Key) && k < string(r.Value) {
						delete(m, k)
					}
				}
				continue
			}
			m[string(r.Key)] = string(r.Value)
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(m)) {
			fmt.Fprintf(&b, "%q=%q ", k, m[k])
		}
		return b.String()
	}
	for _, tc := range []struct {
		name      string
		compacted bool
		src       bool
	}{{"changelog", false, false}, {"compacted changelog", true, false}, {"source topic", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := edgeBroker(t)
			addrs := b.Addrs()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := broker.CreateTopic(ctx, addrs, "cl", 1, map[string]*string{"cleanup.policy": new("compact")}); err != nil {
				t.Fatal(err)
			}
			cl := edgeClient(t, addrs, kgo.DefaultProduceTopic("cl"))
			offs := produceEach(t, cl, recs...)
			adm := kadm.NewClient(cl)
			if tc.compacted {
				b.Cluster().Compact()
				// The first range record is gone: the second, of the same
				// start, supersedes it.
				rs, err := readback.ReadCommitted(ctx, addrs, "cl")
				if err != nil {
					t.Fatal(err)
				}
				if len(rs) >= len(recs) {
					t.Fatalf("compaction kept all %d records", len(rs))
				}
				for _, r := range rs {
					if r.Offset == offs[2*len(keys)] {
						t.Fatalf("compaction kept the first range record (offset %d)", r.Offset)
					}
				}
			}
			var src *sourceChangelog
			if tc.src {
				commitGroup(t, adm, "g", "cl", 0, offs[len(offs)-1]+1)
				src = &sourceChangelog{group: "g", accepts: func(_, _ []byte) bool { return true }}
			}
			if got, want := restoredDump(ctx, t, adm, addrs, "cl", src), replay(!tc.src); got != want {
				t.Fatalf("restored\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestRestoreReplaysPacks: a changelog of packs (names.PackHeader: a
// stream join's records, by segment), range records and records of their
// own, written by a Staged that packs, over thirty transactions (keys of
// every shape, written again and deleted, segments dropped, packs that go
// out when full), restores to what the Staged's engine holds; and so does
// the changelog once compacted, which takes no pack for another, since
// their keys are unique. Its negative control: the same changelog with
// the packs' keys cut to their group's prefix and mark, alike, restores
// to less once compacted. A pack cut short fails the restore with
// store.ErrCorruptPack and names the record.
func TestRestoreReplaysPacks(t *testing.T) {
	b := edgeBroker(t)
	addrs := b.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, topic := range []string{"cl", "collide", "bad"} {
		if err := broker.CreateTopic(ctx, addrs, topic, 1, map[string]*string{"cleanup.policy": new("compact")}); err != nil {
			t.Fatal(err)
		}
	}
	cl := edgeClient(t, addrs, kgo.DefaultProduceTopic("cl"))
	group := func(k []byte) int {
		if len(k) > 2 && k[0] == 'j' {
			return 2 // j seg
		}
		return 0
	}
	st := store.NewStaged("p", store.NewMemory(), store.WithPacking(store.Packing{Group: group, Mark: []byte{0}, Limit: 300}))
	var txn, all []*kgo.Record
	st.SetChangelog(func(k, v []byte) { txn = append(txn, &kgo.Record{Key: k, Value: v}) })
	st.SetRangeChangelog(func(start, end []byte) {
		txn = append(txn, &kgo.Record{Key: start, Value: end, Headers: []kgo.RecordHeader{{Key: names.RangeDeleteHeader}}})
	})
	var lastPack *kgo.Record
	packs := 0
	st.SetPackChangelog(func(k, v []byte) {
		lastPack = &kgo.Record{Key: k, Value: v, Headers: []kgo.RecordHeader{{Key: names.PackHeader}}}
		txn = append(txn, lastPack)
		packs++
	})
	keys := edgeKeys(40)
	written := 0
	for n := range 30 {
		seg := byte('a' + n/3) // a segment's records come over three transactions
		for i := range 40 {
			k := keys[(n*7+i*13)%len(keys)]
			v := []byte(fmt.Sprint(n, "/", i))
			var err error
			switch (n + i) % 5 {
			case 0:
				err = st.Delete(append([]byte{'j', seg, 'k'}, k...))
			case 1:
				err = st.Put(append([]byte("t"), k...), v) // a key no group packs
			default:
				err = st.Put(append([]byte{'j', seg, 'k'}, k...), v)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if n%6 == 5 {
			// The segments before the last two; "j" is no key, and the
			// ranges from it only grow.
			if err := st.DropRange([]byte("j"), []byte{'j', seg - 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Flush(); err != nil {
			t.Fatal(err)
		}
		cp := store.NoCheckpoint
		if len(txn) > 0 {
			offs := produceEach(t, cl, txn...)
			cp = offs[len(offs)-1]
			written += len(txn)
			all = append(all, txn...)
		}
		if err := st.Commit(cp); err != nil {
			t.Fatal(err)
		}
		txn = nil
	}
	if packs < 60 {
		t.Fatalf("%d packs: too few to test them", packs)
	}
	want := engineDump(t, st.Engine())
	if strings.Count(want, "=") < 20 {
		t.Fatalf("the store holds %d keys: too few to compare", strings.Count(want, "="))
	}
	adm := kadm.NewClient(cl)
	if got := restoredDump(ctx, t, adm, addrs, "cl", nil); got != want {
		t.Fatalf("restored\n%s\nwant\n%s", got, want)
	}
	for _, r := range all {
		c := &kgo.Record{Topic: "collide", Key: r.Key, Value: r.Value, Headers: r.Headers}
		if slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == names.PackHeader }) {
			c.Key = r.Key[:len(r.Key)-store.PackUniqueLen] // no checkpoint, no count
		}
		produceEach(t, cl, c)
	}
	if got := restoredDump(ctx, t, adm, addrs, "collide", nil); got != want {
		t.Fatalf("the changelog with colliding pack keys restored, before compaction, to\n%s\nwant\n%s", got, want)
	}
	b.Cluster().Compact()
	if got := restoredDump(ctx, t, adm, addrs, "collide", nil); got == want {
		t.Fatal("the negative control: packs whose keys collide restored whole after compaction")
	}
	rs, err := readback.ReadCommitted(ctx, addrs, "cl")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) >= written {
		t.Fatalf("compaction kept all %d records", written)
	}
	if got := restoredDump(ctx, t, adm, addrs, "cl", nil); got != want {
		t.Fatalf("restored after compaction (%d of %d records left)\n%s\nwant\n%s", len(rs), written, got, want)
	}

	// A pack cut short.
	bad := *lastPack
	bad.Topic, bad.Value = "bad", bad.Value[:len(bad.Value)-1]
	produceEach(t, cl, &bad)
	eng := store.NewMemory()
	_, err = restore(ctx, adm, restoreOpts(addrs), "bad", 0, eng, 10*time.Second, nil, &restoreProgress{log: quietLog()})
	if !errors.Is(err, store.ErrCorruptPack) || !strings.Contains(err.Error(), "bad/0@0") {
		t.Fatalf("restore of a cut pack: %v, want ErrCorruptPack naming bad/0@0", err)
	}
}

// engineDump lists every key and value of e, in order, to compare.
func engineDump(t *testing.T, e store.Engine) string {
	t.Helper()
	var b strings.Builder
	if err := e.Range(nil, nil, func(k, v []byte) error {
		fmt.Fprintf(&b, "%q=%q ", k, v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// restoredDump restores partition 0 of topic into a fresh Pebble store and
// lists what it holds (engineDump).
func restoredDump(ctx context.Context, t *testing.T, adm *kadm.Client, addrs []string, topic string, src *sourceChangelog) string {
	t.Helper()
	eng, err := store.OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := restore(ctx, adm, restoreOpts(addrs), topic, 0, eng, 10*time.Second, src, &restoreProgress{log: quietLog()}); err != nil {
		t.Fatal(err)
	}
	return engineDump(t, eng)
}
