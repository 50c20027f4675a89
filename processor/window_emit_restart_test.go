package processor_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestSessionEmitStateAcrossRestarts: what a session window emitted and
// how many records it took since its last firing are stored facts, so they
// come back from the changelog when the instance restarts with its local
// state deleted. Two sessions of two records fire (EarlyEvery(2) early,
// CountTrigger(2) at their second record); after a restart a record
// bridges them: both are retracted, and the merged session, with one
// record since any firing, fires again only after one more (CountTrigger:
// at 6 records, not at the 7th), or when the watermark completes it
// (EarlyEvery: 7). Keys of every encoded length run side by side.
func TestSessionEmitStateAcrossRestarts(t *testing.T) {
	keys := []string{"", "a", "0f8c3a52-6f1e-4c8e-9d0b-6a3e2f1c9b7d", strings.Repeat("k", 127), strings.Repeat("z", 130)}
	for _, c := range []struct {
		name string
		tr   window.Trigger
		want int
	}{{"EarlyEvery(2)", window.EarlyEvery(2), 7}, {"CountTrigger(2)", window.CountTrigger(2), 6}} {
		t.Run(c.name, func(t *testing.T) {
			addrs := testBrokers(t)
			ctx := context.Background()
			in, out := uniq(t, "se-in"), uniq(t, "se-out")
			cl := setup(t, addrs, 2, in, out)
			appID, dir := uniq(t, "se"), t.TempDir()
			build := func() *topology.Topology {
				tp := topology.New()
				s := topology.From(tp, in, serde.String, serde.String,
					topology.Watermarks(window.BoundedOutOfOrderness(100*time.Millisecond)))
				ws := topology.WindowedBy(topology.GroupByKey(s), window.InactivityGap(30*time.Millisecond), topology.WithTrigger(c.tr))
				tb := topology.CountWindows(ws, topology.Materialized("sessions", serde.String, serde.Int64))
				topology.To(topology.ToStream(tb), out, topology.WindowedSerde(serde.String), serde.Int64)
				return tp
			}
			// Each phase ends with a restart from nothing but the
			// changelog.
			for _, phase := range [][]int64{{10, 11, 70, 71}, {40}, {41, 42, 10_000}} {
				for _, ts := range phase {
					for _, k := range keys {
						if err := cl.ProduceSync(ctx, &kgo.Record{Topic: in, Key: []byte(k), Value: []byte("v"), Timestamp: time.UnixMilli(ts)}).FirstErr(); err != nil {
							t.Fatal(err)
						}
					}
				}
				runThenWipe(t, build(), appID, addrs, dir, int64(len(phase)*len(keys)))
			}
			rs, err := readback.ReadCommitted(ctx, addrs, out)
			if err != nil {
				t.Fatal(err)
			}
			state := map[string]string{}
			for _, r := range rs {
				w, err := topology.WindowedSerde(serde.String).Decode(r.Key)
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("%d%v", len(w.Key), w.Window)
				if r.Value == nil {
					delete(state, name)
					continue
				}
				n, err := serde.Int64.Decode(r.Value)
				if err != nil {
					t.Fatal(err)
				}
				state[name] = fmt.Sprint(n)
			}
			var got, want []string
			for name, n := range state {
				got = append(got, name+"="+n)
			}
			for _, k := range keys {
				// The session at 10000 is still open and has one
				// record.
				want = append(want, fmt.Sprintf("%d[10,72)=%d", len(k), c.want))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("downstream state %v, want %v", got, want)
			}
		})
	}
}

// runThenWipe runs tp as appID until it has processed n records, then
// deletes its state directory, so that the next run has nothing but the
// changelogs to restore from.
func runThenWipe(t *testing.T, tp *topology.Topology, appID string, addrs []string, dir string, n int64) {
	t.Helper()
	app, err := processor.New(tp, processor.ApplicationID(appID), processor.Brokers(addrs...), processor.StateDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(app, func(a *processor.App) bool { return a.Stats().Processed.Load() >= n }); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}
