package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/diskfault"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// damageStore flushes the Pebble store in dir to a table and flips bytes
// inside it, as a disk fault would; the store's checkpoint is in that
// table, so opening the store finds the damage.
func damageStore(t *testing.T, dir string) {
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
	n, err := diskfault.GarbleTables(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no table in %s to damage", dir)
	}
}

// TestCorruptedStoreIsWipedAndRestored (defect 15): a store damaged on disk
// between two runs does not stop the instance: the store is wiped,
// restored from its changelog, and the counts go on from the right values.
func TestCorruptedStoreIsWipedAndRestored(t *testing.T) {
	if bad := testCorruptedStore(t, false); len(bad) > 0 {
		t.Errorf("after the damaged store: %s", strings.Join(bad, "; "))
	}
}

// TestCorruptedStoreCheckerCatchesALostState is the negative control of
// the count check: with the changelog's records deleted too, the wiped
// store restores nothing and the counts start again from zero, which the
// check must see.
func TestCorruptedStoreCheckerCatchesALostState(t *testing.T) {
	if bad := testCorruptedStore(t, true); len(bad) == 0 {
		t.Error("the count check saw nothing wrong with counts restarted from zero")
	}
}

// testCorruptedStore counts keys over two runs with the store damaged in
// between (and, with loseChangelog, its changelog emptied) and returns the
// counts that differ from the input's.
func testCorruptedStore(t *testing.T, loseChangelog bool) (bad []string) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out := uniq(t, "c-in"), uniq(t, "c-out")
	cl := setup(t, addrs, 1, in, out)
	keys := []string{"", "k", "123e4567-e89b-12d3-a456-426614174000", strings.Repeat("x", 130)}
	for i := range 40 {
		keys = append(keys, strings.Repeat("k", i%131)+fmt.Sprint(i))
	}
	want := map[string]int64{}
	produce := func(rounds int) {
		t.Helper()
		for range rounds {
			for _, k := range keys {
				want[k]++
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(k), Value: []byte("v")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	top := topology.New()
	counts := topology.Count(topology.GroupByKey(topology.From(top, in, serde.String, serde.String)),
		topology.Materialized("counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), out, serde.String, serde.Int64Text)
	appID, stateDir := uniq(t, "corrupt"), t.TempDir()
	run := func(records int64) error {
		app, err := processor.New(top, processor.ApplicationID(appID), processor.Brokers(addrs...),
			processor.StateDir(stateDir), processor.Logger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		return runUntil(app, func(a *processor.App) bool { return a.Stats().Processed.Load() >= records })
	}
	produce(3)
	if err := run(int64(3 * len(keys))); err != nil {
		t.Fatal(err)
	}
	dirs, _ := filepath.Glob(filepath.Join(stateDir, appID, "*", "counts"))
	if len(dirs) != 1 {
		t.Fatalf("store directories %v, want one", dirs)
	}
	damageStore(t, dirs[0])
	if loseChangelog {
		changelog := appID + "-counts-changelog"
		adm := kadm.NewClient(cl)
		ends, err := adm.ListEndOffsets(ctx, changelog)
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := adm.DeleteRecords(ctx, ends.Offsets()); err != nil || resp.Error() != nil {
			t.Fatalf("delete changelog records: %v %v", err, resp)
		}
	}
	produce(2)
	if err := run(int64(2 * len(keys))); err != nil {
		t.Fatalf("Run with a damaged store: %v", err)
	}
	rs, err := readback.ReadCommitted(ctx, addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for k, v := range readback.Last(rs) {
		got[k] = string(v)
	}
	for _, k := range keys {
		if got[k] != fmt.Sprint(want[k]) {
			bad = append(bad, fmt.Sprintf("count of the key of %d bytes: %q, want %d", len(k), got[k], want[k]))
		}
	}
	return bad
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
