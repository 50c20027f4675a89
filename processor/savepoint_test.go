package processor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/state"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// spTopo counts records per input key behind two repartition topics, in a
// key-value store ("totals") and in tumbling 1s windows ("counts").
func spTopo(in, out string) *topology.Topology { return spTopoV(in, out, false) }

// spTopoV is spTopo, with upper a different topology of the same topics
// and stores (its values upper-cased before counting).
func spTopoV(in, out string, upper bool) *topology.Topology {
	tp := topology.New()
	s := topology.From(tp, in, serde.Bytes, serde.String)
	if upper {
		s = topology.MapValues(s, strings.ToUpper)
	}
	g := topology.GroupBy(s, func(k []byte, _ string) []byte { return k }, topology.Grouped("by-key", serde.Bytes, serde.String))
	g2 := topology.GroupBy(s, func(k []byte, _ string) []byte { return k }, topology.Grouped("by-key-2", serde.Bytes, serde.String))
	topology.Count(g2, topology.Materialized("totals", serde.Bytes, serde.Int64))
	ws := topology.WindowedBy(g, window.Tumbling(time.Second))
	c := topology.CountWindows(ws, topology.Materialized("counts", serde.Bytes, serde.Int64))
	topology.To(topology.Map(topology.ToStream(c), func(w topology.Windowed[[]byte], n int64) (string, string) {
		return fmt.Sprintf("%x@%d", w.Key, w.Window.Start), fmt.Sprint(n)
	}), out, serde.String, serde.String)
	return tp
}

// spKeys are the input's keys: every length, bytes 0x00 and 0xff, UUIDs.
func spKeys() [][]byte {
	keys := testkeys.Bytes()
	for _, u := range testkeys.UUIDs(8) {
		keys = append(keys, []byte(u))
	}
	return keys
}

// produceSP writes n records from offset from on, keys of every shape,
// timestamps i*10ms; with abort, every third batch of 10 goes in a
// transaction that aborts (it must count nowhere).
func produceSP(t *testing.T, addrs []string, in string, from, n int, abort bool) {
	t.Helper()
	if err := writeSP(t, addrs, in, from, n, abort); err != nil {
		t.Fatal(err)
	}
}

// writeSP is produceSP for any goroutine: it returns its error. A batch
// whose transaction fails is written again in a new one, up to 5 times,
// by a new client of the same transactional ID, whose initialisation aborts
// what the failed one left open: the embedded broker has once answered
// this test's producer OUT_OF_ORDER_SEQUENCE_NUMBER under CI's load, which
// franz-go leaves for the application to recover from. Tests compute what
// they expect from the committed log, so a failed transaction, aborted,
// counts nowhere, as any aborted one, and a commit that went through
// though it reported an error counts as often as it is in the log.
func writeSP(t *testing.T, addrs []string, in string, from, n int, abort bool) error {
	keys := spKeys()
	ctx := context.Background()
	rec := func(i int) *kgo.Record {
		return &kgo.Record{Key: keys[i%len(keys)], Value: []byte("v"), Timestamp: time.UnixMilli(int64(i) * 10)}
	}
	if !abort {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in))
		if err != nil {
			return err
		}
		defer cl.Close()
		rs := make([]*kgo.Record, 0, n)
		for i := from; i < from+n; i++ {
			rs = append(rs, rec(i))
		}
		return cl.ProduceSync(ctx, rs...).FirstErr()
	}
	txnID := fmt.Sprintf("%s-aborter-%d", in, from)
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	// batch writes records [lo, hi) in one transaction, committed or
	// aborted as commit says; after a failure, the next call starts a
	// new client.
	batch := func(lo, hi int, commit bool) (err error) {
		if cl == nil {
			if cl, err = kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in), kgo.TransactionalID(txnID)); err != nil {
				return err
			}
		}
		defer func() {
			if err != nil {
				cl.Close()
				cl = nil
			}
		}()
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		var rs []*kgo.Record
		for i := lo; i < hi; i++ {
			r := rec(i)
			if !commit {
				r = &kgo.Record{Key: r.Key, Value: []byte("aborted"), Timestamp: r.Timestamp}
			}
			rs = append(rs, r)
		}
		perr := cl.ProduceSync(ctx, rs...).FirstErr()
		return errors.Join(perr, cl.EndTransaction(ctx, kgo.TransactionEndTry(commit && perr == nil)))
	}
	for b := 0; b*10 < n; b++ {
		lo, hi := from+b*10, from+min(n, b*10+10)
		var err error
		for try := range 5 {
			if err = batch(lo, hi, b%3 != 2); err == nil {
				break
			}
			t.Logf("transaction of records %d to %d, try %d: %v", lo, hi-1, try+1, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// spInstances runs n instances of the application until the test ends or
// they return; done receives each Run's error.
type spInstances struct {
	apps   []*processor.App
	done   chan error
	cancel context.CancelFunc
	stop   []context.CancelFunc // each instance's
	wg     sync.WaitGroup
}

func startSP(t *testing.T, addrs []string, tp func() *topology.Topology, appID string, n int, setup func(i int, a *processor.App)) *spInstances {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	s := &spInstances{done: make(chan error, n), cancel: cancel}
	for i := range n {
		app, err := processor.New(tp(), processor.ApplicationID(appID), processor.Brokers(addrs...),
			processor.StateDir(t.TempDir()), processor.InstanceID(fmt.Sprintf("i%d", i)), spLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if setup != nil {
			setup(i, app)
		}
		s.apps = append(s.apps, app)
		ictx, icancel := context.WithCancel(ctx)
		s.stop = append(s.stop, icancel)
		s.wg.Go(func() { s.done <- app.Run(ictx) })
	}
	t.Cleanup(func() { cancel(); s.wg.Wait() })
	return s
}

func (s *spInstances) processed() int64 {
	var n int64
	for _, a := range s.apps {
		n += a.Stats().Processed.Load()
	}
	return n
}

// waitFor polls cond every 20ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupOffsets reads the group's committed offsets of topic.
func groupOffsets(t *testing.T, addrs []string, group, topic string) map[int32]kadm.OffsetResponse {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil // not joined yet
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]kadm.OffsetResponse{}
	for p, r := range rs[topic] {
		out[p] = r
	}
	return out
}

// checkCut is the savepoint's checker:
//   - every store partition holds exactly the changelog's records below
//     the manifest's end, folded, range records included (what a fresh
//     restore gives);
//   - the totals store counts exactly the input records below the
//     manifest's offsets (committed records only: aborted ones count
//     nowhere), key by key: state and offsets are one cut;
//   - Verify passes.
func checkCut(addrs []string, sp *savepoint.Savepoint, in string, want map[string]int64) error {
	m := sp.Manifest()
	if err := sp.Verify(); err != nil {
		return err
	}
	for _, st := range m.Stores {
		rs, err := readback.ReadCommitted(context.Background(), addrs, st.Changelog)
		if err != nil {
			return err
		}
		for _, part := range st.Parts {
			fold := map[string][]byte{}
			for _, r := range rs {
				if r.Partition != part.Partition || r.Offset >= part.ChangelogEnd {
					continue
				}
				switch {
				case slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == names.RangeDeleteHeader }):
					// A dropped range (a window store's due expiry
					// entries, a stream join's due segments).
					for k := range fold {
						if k >= string(r.Key) && k < string(r.Value) {
							delete(fold, k)
						}
					}
				case slices.ContainsFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == names.PackHeader }):
					// A stream join's records, packed by segment.
					ws, err := store.UnpackWrites(nil, r.Key, r.Value)
					if err != nil {
						return err
					}
					for _, w := range ws {
						if w.Value == nil {
							delete(fold, string(w.Key))
						} else {
							fold[string(w.Key)] = w.Value
						}
					}
				case r.Value == nil:
					delete(fold, string(r.Key))
				default:
					fold[string(r.Key)] = r.Value
				}
			}
			got := map[string][]byte{}
			if err := sp.Each(st.Name, part.Partition, func(k, v []byte) error {
				got[string(k)] = bytes.Clone(v)
				return nil
			}); err != nil {
				return err
			}
			if len(got) != len(fold) {
				return fmt.Errorf("store %s partition %d: %d entries, the changelog below %d folds to %d", st.Name, part.Partition, len(got), part.ChangelogEnd, len(fold))
			}
			for k, v := range fold {
				if !bytes.Equal(got[k], v) {
					return fmt.Errorf("store %s partition %d key %x: %x, the changelog says %x", st.Name, part.Partition, k, got[k], v)
				}
			}
		}
	}
	if want == nil {
		return nil
	}
	got := map[string]int64{}
	st := m.Store("totals")
	if st == nil {
		return errors.New("no store totals")
	}
	for _, part := range st.Parts {
		if err := sp.Each("totals", part.Partition, func(k, v []byte) error {
			n, err := serde.Int64.Decode(v)
			got[string(k)] = n
			return err
		}); err != nil {
			return err
		}
	}
	for k, n := range want {
		if got[k] != n {
			return fmt.Errorf("totals[%x] = %d, the input below the savepoint's offsets has %d", k, got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("totals[%x] = %d, not in the input below the savepoint's offsets", k, n)
		}
	}
	return nil
}

// inputBelow counts the committed input records per key below the
// manifest's offsets of in.
func inputBelow(t *testing.T, addrs []string, m *savepoint.Manifest, in string) map[string]int64 {
	t.Helper()
	rs, err := readback.ReadCommitted(context.Background(), addrs, in)
	if err != nil {
		t.Fatal(err)
	}
	inp := m.Input(in)
	if inp == nil {
		t.Fatalf("manifest has no input %s: %+v", in, m.Inputs)
	}
	end := map[int32]int64{}
	for _, o := range inp.Offsets {
		end[o.Partition] = o.Offset
	}
	want := map[string]int64{}
	for _, r := range rs {
		if r.Offset < end[r.Partition] {
			want[string(r.Key)]++
		}
	}
	return want
}

// TestSavepointStop: stop-with-savepoint of two instances of an
// application with a repartition topic, a key-value and a window store,
// taken while input is still being processed. Both Runs return nil; the
// manifest's offsets are the group's committed offsets; the stores are
// their changelogs up to the cut and count exactly the input below the
// cut's offsets; state.Open lists the savepoint's stores. Negative
// control: the checker refuses the same savepoint with one offset moved.
func TestSavepointStop(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "sp-in"), uniq(t, "sp-out")
	setup(t, addrs, 4, in, out)
	appID := uniq(t, "sp")
	produceSP(t, addrs, in, 0, 3000, false)
	insts := startSP(t, addrs, func() *topology.Topology { return spTopo(in, out) }, appID, 2, nil)
	waitFor(t, 60*time.Second, "some input processed", func() bool { return insts.processed() >= 200 })

	dir := filepath.Join(t.TempDir(), "sp1")
	m, err := processor.TakeSavepoint(context.Background(), appID, dir, processor.Brokers(addrs...), processor.SavepointTimeout(40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-insts.done:
			if err != nil {
				t.Fatalf("Run after stop-with-savepoint: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("an instance did not stop after the savepoint")
		}
	}
	for _, a := range insts.apps {
		if a.StoppedWithSavepoint() != dir {
			t.Errorf("StoppedWithSavepoint = %q, want %q", a.StoppedWithSavepoint(), dir)
		}
	}

	// The manifest's offsets are the group's committed offsets.
	committed := groupOffsets(t, addrs, appID, in)
	inp := m.Input(in)
	if inp == nil || inp.Partitions != 4 || len(inp.Offsets) != 4 || inp.TopicID == "" {
		t.Fatalf("manifest input: %+v", inp)
	}
	for _, o := range inp.Offsets {
		c, ok := committed[o.Partition]
		if !ok {
			// Nothing committed yet (its owner had processed none of
			// it at the cut, as under the race detector): the
			// manifest says so with -1.
			c.At, c.LeaderEpoch = -1, -1
		}
		if c.At != o.Offset || c.Metadata != o.Metadata || c.LeaderEpoch != o.LeaderEpoch {
			t.Errorf("partition %d: manifest %+v, group committed %d %q epoch %d", o.Partition, o, c.At, c.Metadata, c.LeaderEpoch)
		}
	}
	// totals, counts and the time store of the sub-topology writing
	// by-key-2 (its watermark must survive too).
	if len(m.Stores) != 3 || m.Store("totals") == nil || m.Store("counts") == nil || m.Store("by-key-2-repartition-time") == nil {
		t.Fatalf("stores: %+v", m.Stores)
	}
	if st := m.Store("totals"); st.Layout != "key-value" || st.Partitions != 4 || st.KeySerde == "" || st.Records == 0 {
		t.Errorf("totals: %+v", st)
	}
	if st := m.Store("counts"); st.Layout != "window" || st.Partitions != 4 {
		t.Errorf("counts: %+v", st)
	}

	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := inputBelow(t, addrs, m, in)
	if err := checkCut(addrs, sp, in, want); err != nil {
		t.Fatal(err)
	}
	// Negative control: one offset moved by one is caught.
	moved := *sp.Manifest()
	moved.Inputs = []savepoint.Input{*m.Input(in)}
	moved.Inputs[0].Offsets = append([]savepoint.Offset(nil), moved.Inputs[0].Offsets...)
	for i := range moved.Inputs[0].Offsets {
		if moved.Inputs[0].Offsets[i].Offset > 0 {
			moved.Inputs[0].Offsets[i].Offset--
			break
		}
	}
	if err := checkCut(addrs, sp, in, inputBelow(t, addrs, &moved, in)); err == nil {
		t.Fatal("negative control: the checker accepts a cut with an offset moved")
	}

	// The state tools read it unchanged.
	r, err := state.Open(dir, state.WithTopology(spTopo(in, out)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	infos, err := r.Stores()
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int64{}
	for _, i := range infos {
		if i.Application != appID {
			t.Errorf("state lists application %q", i.Application)
		}
		per[i.Store+"/"+i.Layout] += i.Records
	}
	if per["totals/key-value"] != m.Store("totals").Records || per["counts/window"] != m.Store("counts").Records {
		t.Fatalf("state ls: %v; manifest totals %d counts %d", per, m.Store("totals").Records, m.Store("counts").Records)
	}
}

// TestSavepointContinue: with SavepointContinue the instances go on and
// process input produced after the savepoint, which holds only the state
// at its cut (the later input counts nowhere in it). Inputs carry aborted
// transactions, which count nowhere.
func TestSavepointContinue(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "spc-in"), uniq(t, "spc-out")
	setup(t, addrs, 4, in, out)
	appID := uniq(t, "spc")
	produceSP(t, addrs, in, 0, 600, true)
	insts := startSP(t, addrs, func() *topology.Topology { return spTopo(in, out) }, appID, 2, nil)
	waitFor(t, 60*time.Second, "the input processed", func() bool {
		c := groupOffsets(t, addrs, appID, in)
		var n int64
		for _, o := range c {
			n += o.At
		}
		return n >= 600+60*2/3 // records plus at least most markers
	})
	dir := filepath.Join(t.TempDir(), "sp")
	m, err := processor.TakeSavepoint(context.Background(), appID, dir, processor.Brokers(addrs...), processor.SavepointContinue(), processor.SavepointTimeout(40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	before := insts.processed()
	produceSP(t, addrs, in, 600, 400, false)
	waitFor(t, 60*time.Second, "input after the savepoint processed", func() bool { return insts.processed() >= before+400 })
	select {
	case err := <-insts.done:
		t.Fatalf("an instance stopped after a savepoint with continue: %v", err)
	default:
	}
	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := inputBelow(t, addrs, m, in)
	var total int64
	for _, n := range want {
		total += n
	}
	if total != 400 { // 600 produced, one batch in three aborted
		t.Errorf("the cut's offsets cover %d committed records, want 400", total)
	}
	if err := checkCut(addrs, sp, in, want); err != nil {
		t.Fatal(err)
	}
}

// TestSavepointRefusals: an existing directory is refused before anything
// is asked; an instance that never answers makes TakeSavepoint fail within
// its timeout, leaves no directory, and the application goes on
// processing.
func TestSavepointRefusals(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "spr-in"), uniq(t, "spr-out")
	setup(t, addrs, 2, in, out)
	appID := uniq(t, "spr")

	existing := t.TempDir()
	if _, err := processor.TakeSavepoint(context.Background(), appID, existing, processor.Brokers(addrs...)); !errors.Is(err, savepoint.ErrExists) {
		t.Fatalf("existing directory: %v", err)
	}

	// No instance running: refused once the group stays empty, well
	// within the timeout.
	none := filepath.Join(t.TempDir(), "none")
	if _, err := processor.TakeSavepoint(context.Background(), appID, none, processor.Brokers(addrs...), processor.SavepointTimeout(30*time.Second)); err == nil || !strings.Contains(err.Error(), "no instance of application") {
		t.Fatalf("no instance running: %v", err)
	}
	if _, err := os.Stat(none); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused savepoint left %s", none)
	}

	produceSP(t, addrs, in, 0, 200, false)
	insts := startSP(t, addrs, func() *topology.Topology { return spTopo(in, out) }, appID, 2, func(i int, a *processor.App) {
		if i == 1 {
			processor.IgnoreSavepoints(a)
		}
	})
	waitFor(t, 60*time.Second, "the input processed", func() bool { return insts.processed() >= 200 })
	dir := filepath.Join(t.TempDir(), "sp")
	start := time.Now()
	_, err := processor.TakeSavepoint(context.Background(), appID, dir, processor.Brokers(addrs...), processor.SavepointTimeout(6*time.Second))
	if err == nil || !errors.Is(err, processor.ErrSavepoint) || !strings.Contains(err.Error(), "did not") {
		t.Fatalf("an instance that never answers: %v", err)
	}
	t.Logf("refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("a failed savepoint left %s: %v", dir, serr)
	}
	ents, _ := os.ReadDir(filepath.Dir(dir))
	if len(ents) != 0 {
		t.Fatalf("a failed savepoint left %v", ents)
	}
	before := insts.processed()
	produceSP(t, addrs, in, 200, 200, false)
	waitFor(t, 60*time.Second, "input after the refusal processed", func() bool { return insts.processed() >= before+200 })
	select {
	case err := <-insts.done:
		t.Fatalf("an instance stopped after a failed savepoint: %v", err)
	default:
	}
}

// TestSavepointCutInFlight: a savepoint requested while a stream of input,
// aborted transactions among it, is being processed, records on their way
// through the repartition topics: the cut is still consistent (the stores
// count exactly the committed input below its offsets), because the
// coordinator waits until the repartition topics are drained.
func TestSavepointCutInFlight(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "spf-in"), uniq(t, "spf-out")
	setup(t, addrs, 4, in, out)
	appID := uniq(t, "spf")
	insts := startSP(t, addrs, func() *topology.Topology { return spTopo(in, out) }, appID, 2, nil)
	produceSP(t, addrs, in, 0, 30, false)
	waitFor(t, 60*time.Second, "the first records processed", func() bool { return insts.processed() >= 30 })
	// The burst: 3,000 records in transactions of 10, one in three
	// aborted, produced while the savepoint is taken.
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for b := range 30 {
			if err := writeSP(t, addrs, in, 30+b*100, 100, true); err != nil {
				t.Error(err)
				return
			}
		}
	})
	waitFor(t, 60*time.Second, "the burst being processed", func() bool { return insts.processed() >= 300 })
	t.Logf("processed %d (input and repartition records) when the savepoint is requested", insts.processed())
	dir := filepath.Join(t.TempDir(), "sp")
	m, err := processor.TakeSavepoint(context.Background(), appID, dir, processor.Brokers(addrs...), processor.SavepointTimeout(40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := inputBelow(t, addrs, m, in)
	var total int64
	for _, n := range want {
		total += n
	}
	t.Logf("the cut holds %d committed input records", total)
	if total <= 30 {
		t.Errorf("the cut holds %d records: taken before the burst, it tests nothing", total)
	}
	if err := checkCut(addrs, sp, in, want); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-insts.done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("an instance did not stop after the savepoint")
		}
	}
}

// TestSavepointDeadCoordinator: a request whose coordinator died (no
// release ever comes) pauses the instances, which answer, and they resume
// by themselves after the request's deadline: input produced while they
// were paused is processed, and Run goes on.
func TestSavepointDeadCoordinator(t *testing.T) {
	// Restored after the instances stopped (cleanups run last first).
	t.Cleanup(processor.SetSavepointMargin(3 * time.Second))
	addrs := testBrokers(t)
	in, out := uniq(t, "spd-in"), uniq(t, "spd-out")
	setup(t, addrs, 2, in, out)
	appID := uniq(t, "spd")
	insts := startSP(t, addrs, func() *topology.Topology { return spTopo(in, out) }, appID, 2, nil)
	committedIn := func() int64 {
		var n int64
		for _, o := range groupOffsets(t, addrs, appID, in) {
			n += o.At
		}
		return n
	}
	produceSP(t, addrs, in, 0, 50, false)
	waitFor(t, 60*time.Second, "the first input committed", func() bool { return committedIn() == 50 })

	control := appID + "-savepoint-control"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(control), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := fmt.Sprintf(`{"type":"request","id":"dead","to":"/nowhere","deadline":%q}`, time.Now().Add(time.Second).Format(time.RFC3339Nano))
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: control, Key: []byte("dead"), Value: []byte(req)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	paused := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(paused) < 2 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if strings.Contains(string(r.Value), `"type":"paused"`) && strings.Contains(string(r.Value), `"id":"dead"`) {
				paused[string(r.Value)] = true
			}
		})
	}
	if len(paused) < 2 {
		t.Fatalf("the instances did not answer the request: %v", paused)
	}
	resumeAt := time.Now().Add(time.Second + 3*time.Second) // the deadline, the margin
	produceSP(t, addrs, in, 50, 50, false)
	// While paused nothing of the new input commits. (Checked only
	// while the resume is surely ahead: a stalled machine skips it.)
	time.Sleep(500 * time.Millisecond)
	if n := committedIn(); time.Now().Before(resumeAt.Add(-2*time.Second)) && n != 50 {
		t.Fatalf("paused instances committed input: %d, want 50", n)
	}
	waitFor(t, 60*time.Second, "input committed after the deadline", func() bool { return committedIn() == 100 })
	select {
	case err := <-insts.done:
		t.Fatalf("an instance stopped: %v", err)
	default:
	}
}

// spLogger logs to the test with SLUICE_TEST_LOG set.
func spLogger(t *testing.T) processor.Opt {
	if os.Getenv("SLUICE_TEST_LOG") == "" {
		return processor.Logger(slog.New(slog.DiscardHandler))
	}
	return processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

// TestSavepointDifferentTopologies: two instances of one application
// running different topologies (a rolling upgrade half done) are refused
// by name, nothing is written, and they go on.
func TestSavepointDifferentTopologies(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "spt-in"), uniq(t, "spt-out")
	setup(t, addrs, 2, in, out)
	appID := uniq(t, "spt")
	n := 0
	insts := startSP(t, addrs, func() *topology.Topology { n++; return spTopoV(in, out, n == 2) }, appID, 2, nil)
	produceSP(t, addrs, in, 0, 50, false)
	waitFor(t, 60*time.Second, "the input processed", func() bool { return insts.processed() >= 50 })
	dir := filepath.Join(t.TempDir(), "sp")
	_, err := processor.TakeSavepoint(context.Background(), appID, dir, processor.Brokers(addrs...), processor.SavepointTimeout(20*time.Second))
	if err == nil || !strings.Contains(err.Error(), "instances run different topologies") {
		t.Fatalf("different topologies: %v", err)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("a refused savepoint left %s", dir)
	}
	before := insts.processed()
	produceSP(t, addrs, in, 50, 50, false)
	waitFor(t, 60*time.Second, "input after the refusal processed", func() bool { return insts.processed() >= before+50 })
}

// TestSavepointRebalance: an instance leaves the group while the other is
// paused and the coordinator waits for the one that does not answer: the
// group rebalances, the paused instance answers again for the new
// generation, with every task now its own, and the savepoint is taken from
// it alone, with a consistent cut.
func TestSavepointRebalance(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "spb-in"), uniq(t, "spb-out")
	setup(t, addrs, 4, in, out)
	appID := uniq(t, "spb")
	produceSP(t, addrs, in, 0, 500, true)
	insts := startSP(t, addrs, func() *topology.Topology { return spTopo(in, out) }, appID, 2, func(i int, a *processor.App) {
		if i == 1 {
			processor.IgnoreSavepoints(a)
		}
	})
	waitFor(t, 60*time.Second, "input processed", func() bool { return insts.processed() >= 300 })
	dir := filepath.Join(t.TempDir(), "sp")
	type result struct {
		m   *savepoint.Manifest
		err error
	}
	res := make(chan result, 1)
	go func() {
		m, err := processor.TakeSavepoint(context.Background(), appID, dir, processor.Brokers(addrs...), processor.SavepointTimeout(50*time.Second))
		res <- result{m, err}
	}()
	// Once instance 0 answered, instance 1 goes (a static member: the
	// group notices after the session timeout).
	waitPaused(t, addrs, appID, 40*time.Second)
	insts.stop[1]()
	if err := <-insts.done; err != nil {
		t.Fatalf("instance 1: %v", err)
	}
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case err := <-insts.done:
		if err != nil {
			t.Fatalf("instance 0: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("instance 0 did not stop")
	}
	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCut(addrs, sp, in, inputBelow(t, addrs, r.m, in)); err != nil {
		t.Fatal(err)
	}
	// The offsets are the group's; the metadata (the committing member's
	// id) may be instance 0's re-commit of the same offsets.
	committed := groupOffsets(t, addrs, appID, in)
	for _, o := range r.m.Input(in).Offsets {
		if c := committed[o.Partition]; c.At != o.Offset {
			t.Errorf("partition %d: manifest %+v, group committed %d", o.Partition, o, c.At)
		}
	}
}

// TestSavepointInstanceRestarted: an instance restarted while a savepoint
// is in progress (after the request was written, before the release)
// takes the request up from the control topic's history and answers it,
// so the savepoint succeeds. Negative control: an instance that reads the
// control topic from its end only never answers, and the savepoint fails
// with nothing written.
func TestSavepointInstanceRestarted(t *testing.T) {
	for _, history := range []bool{true, false} {
		t.Run(fmt.Sprintf("history=%v", history), func(t *testing.T) {
			if !history {
				defer processor.SetSavepointHistory(0)()
			}
			addrs := testBrokers(t)
			in, out := uniq(t, "spr-in"), uniq(t, "spr-out")
			setup(t, addrs, 4, in, out)
			appID := uniq(t, "spr")
			produceSP(t, addrs, in, 0, 300, false)
			tp := func() *topology.Topology { return spTopo(in, out) }
			insts := startSP(t, addrs, tp, appID, 2, nil)
			waitFor(t, 60*time.Second, "input processed", func() bool { return insts.processed() >= 300 })
			// Instance 1 goes (a static member stays in the group).
			insts.stop[1]()
			if err := <-insts.done; err != nil {
				t.Fatalf("instance 1: %v", err)
			}
			dir := filepath.Join(t.TempDir(), "sp")
			timeout := 40 * time.Second
			if !history {
				timeout = 12 * time.Second
			}
			res := make(chan error, 1)
			go func() {
				_, err := processor.TakeSavepoint(context.Background(), appID, dir, processor.Brokers(addrs...), processor.SavepointTimeout(timeout))
				res <- err
			}()
			// Once instance 0 answered, instance 1 starts again.
			waitPaused(t, addrs, appID, 30*time.Second)
			app, err := processor.New(tp(), processor.ApplicationID(appID), processor.Brokers(addrs...),
				processor.StateDir(t.TempDir()), processor.InstanceID("i1"), spLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(context.Background(), 90*time.Second)
			ran := make(chan error, 1)
			go func() { ran <- app.Run(rctx) }()
			t.Cleanup(func() { rcancel(); <-ran })
			err = <-res
			if !history {
				if err == nil {
					t.Fatal("the savepoint succeeded though the restarted instance cannot have seen the request: the test cannot tell")
				}
				if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
					t.Fatalf("a failed savepoint left %s: %v", dir, serr)
				}
				return
			}
			if err != nil {
				t.Fatalf("savepoint with an instance restarted during it: %v", err)
			}
			if _, err := savepoint.Open(dir); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// waitPaused waits, up to d, for an instance of appID to answer a
// savepoint request on the control topic.
func waitPaused(t *testing.T, addrs []string, appID string, d time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(appID+"-savepoint-control"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for answered := false; !answered; {
		if ctx.Err() != nil {
			t.Fatal("no instance answered the savepoint request")
		}
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			answered = answered || strings.Contains(string(r.Value), `"type":"paused"`)
		})
	}
}
