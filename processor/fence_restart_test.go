package processor_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestRestartCommitsBeforeItsOffsetsArrive: an instance that restarts with
// a watermark in its state announces it to the repartition topic in its
// first transaction, before any record is polled. If the group's committed
// offsets have not reached its consumer by then (the broker holds the
// OffsetFetch back, as it does while another member's transactional
// offsets are pending), the transaction carries records but no input
// offset of the client's own. It must still commit the offsets the group
// has, not move them: before the fix it fenced with the partitions' start
// offsets, the consumer then started from those, and every count of the
// first run was counted again (the exactly-once failure the pageviews
// SIGKILL test saw once in CI).
func TestRestartCommitsBeforeItsOffsetsArrive(t *testing.T) {
	if len(testbroker.External()) > 0 {
		t.Skip("holds back the embedded broker's OffsetFetch answers")
	}
	b := processor.HookedBroker(t)
	addrs := b.Addrs()
	in, out := uniq(t, "fetchheld-in"), uniq(t, "fetchheld-out")
	cl := setup(t, addrs, 2, in, out)
	appID := uniq(t, "fetchheld")
	build := func() *processor.App {
		tp := topology.New()
		s := topology.From(tp, in, serde.String, serde.String,
			topology.Watermarks(window.BoundedOutOfOrderness(0)))
		// State in the first sub-topology too, so that its time state
		// (the watermark it announces) is stored and restored.
		topology.To(topology.ToStream(topology.Count(topology.GroupByKey(s), topology.Materialized("per-key", serde.String, serde.Int64))), out, serde.String, serde.Int64)
		g := topology.GroupBy(s, func(_, v string) string { return v }, topology.Grouped("by-value", serde.String, serde.String))
		// Event time downstream: watermarks travel through the
		// repartition topic. One window holds every record.
		w := topology.WindowedBy(g, window.Tumbling(24*time.Hour), topology.EmitEveryUpdate())
		counts := topology.CountWindows(w, topology.Materialized("counts", serde.String, serde.Int64))
		topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, int64) { return w.Key, n }),
			out, serde.String, serde.Int64)
		app, err := processor.New(tp, processor.ApplicationID(appID), processor.Brokers(addrs...),
			processor.StateDir(t.TempDir()), processor.CommitInterval(50*time.Millisecond), processor.Logger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		return app
	}
	// Keys of every partition, values of every encoded length up to a
	// UUID's; event time rises so that the watermark moves.
	values := []string{"", "a", "bb", "0f8c3a52-6f1e-4c8e-9d0b-6a3e2f1c9b7d"}
	want := map[string]int64{}
	n := 0
	produce := func(rounds int) {
		t.Helper()
		for range rounds {
			for _, v := range values {
				n++
				want[v]++
				want[fmt.Sprintf("k%d", n)]++
				r := &kgo.Record{Key: []byte(fmt.Sprintf("k%d", n)), Value: []byte(v), Timestamp: time.UnixMilli(int64(1000 * n))}
				if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	produce(10)
	first := int64(n)
	// Processed counts both sub-topologies' records.
	if err := runUntil(build(), func(a *processor.App) bool { return a.Stats().Processed.Load() >= 2*first }); err != nil {
		t.Fatal(err)
	}

	// The second run's consumer gets no offsets until its tasks have
	// opened and many commit intervals passed: the broker answers that
	// another transaction's offsets are pending (UNSTABLE_OFFSET_COMMIT),
	// which the client retries.
	var held atomic.Int32
	var released atomic.Bool
	b.Cluster().ControlKey(kmsg.OffsetFetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		req := r.(*kmsg.OffsetFetchRequest)
		if released.Load() || len(req.Groups) != 1 || req.Groups[0].Group != appID {
			return nil, nil, false
		}
		held.Add(1)
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		g := kmsg.NewOffsetFetchResponseGroup()
		g.Group = appID
		for _, rt := range req.Groups[0].Topics {
			st := kmsg.NewOffsetFetchResponseGroupTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch = p, -1, -1
				sp.ErrorCode = kerr.UnstableOffsetCommit.Code
				st.Partitions = append(st.Partitions, sp)
			}
			g.Topics = append(g.Topics, st)
		}
		if req.Groups[0].Topics == nil {
			g.ErrorCode = kerr.UnstableOffsetCommit.Code
		}
		resp.Groups = append(resp.Groups, g)
		return resp, nil, true
	})
	produce(2)
	app := build()
	var opened, releasedAt time.Time
	err := runUntil(app, func(a *processor.App) bool {
		if releasedAt.IsZero() {
			if held.Load() == 0 || len(a.Status().Tasks) < 4 {
				return false
			}
			if opened.IsZero() {
				opened = time.Now()
			}
			if time.Since(opened) < time.Second { // 20 commit intervals
				return false
			}
			released.Store(true)
			releasedAt = time.Now()
		}
		// The new records reached the counts, and then some more
		// commit intervals passed for anything read twice to show.
		return a.Stats().Processed.Load() >= 2*int64(n)-2*first && time.Since(releasedAt) > time.Second
	})
	if releasedAt.IsZero() {
		t.Fatalf("the run ended before its offset fetch was held (held %d): %v", held.Load(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rs, err := readback.ReadCommitted(context.Background(), addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rs {
		c, err := serde.Int64.Decode(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		got[string(r.Key)] = c
	}
	for k, c := range want {
		if got[k] != c {
			t.Errorf("count of %q is %d, want %d (a restart read its input again)", k, got[k], c)
		}
	}
}
