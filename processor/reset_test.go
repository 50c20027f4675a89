package processor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
)

// TestResetWithoutWipingStateRestoresFromScratch resets an application the
// way `sluice reset` does (input offsets to the start, internal topics
// deleted) but keeps its local state, as an operator who skipped that step
// would. The stores' checkpoints are then past the end of their recreated,
// empty changelogs: the task must treat them as corrupted (wipe them, log a
// warning naming the store and offsets) and count from zero again, not on
// top of the first run's counts. A reset that keeps the changelogs is the
// negative control: there the stale counts come back, and the same check
// reports them.
func TestResetWithoutWipingStateRestoresFromScratch(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	in, out := uniq(t, "lines"), uniq(t, "counts")
	cl := setup(t, addrs, 2, in, out)
	want := map[string]int64{}
	var words int64
	var recs []*kgo.Record
	for i := range 500 {
		line := fmt.Sprintf("the w%d fox w%d", i%7, i%13)
		for _, w := range examples.Words(line) {
			want[w]++
			words++
		}
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(line)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	appID, dir := uniq(t, "reset"), t.TempDir()
	changelog, repartition := appID+"-counts-changelog", appID+"-counts-repartition"
	// Each run reads every line once and every word once more from the
	// repartition topic.
	target := int64(len(recs)) + words
	adm := kadm.NewClient(cl)

	run := func() string {
		t.Helper()
		var logs bytes.Buffer
		app, err := processor.New(examples.WordCount(in, out, in+"-dlq"), processor.ApplicationID(appID),
			processor.Brokers(addrs...), processor.StateDir(dir), processor.CommitInterval(50*time.Millisecond),
			processor.Logger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		if err != nil {
			t.Fatal(err)
		}
		if err := runUntil(app, func(a *processor.App) bool { return a.Stats().Processed.Load() >= target }); err != nil {
			t.Fatalf("run: %v\n%s", err, logs.String())
		}
		if n := app.Stats().Processed.Load(); n < target {
			t.Fatalf("run processed %d records within a minute, want %d\n%s", n, target, logs.String())
		}
		return logs.String()
	}
	// countsSince returns the last count of each word written at or after
	// the output offsets from.
	countsSince := func(from map[int32]int64) map[string]string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		rs, err := readback.ReadCommitted(rctx, addrs, out)
		if err != nil {
			t.Fatal(err)
		}
		var mine []*kgo.Record
		for _, r := range rs {
			if r.Offset >= from[r.Partition] {
				mine = append(mine, r)
			}
		}
		return toStrings(readback.Last(mine))
	}
	ends := func() map[int32]int64 {
		t.Helper()
		lo, err := adm.ListEndOffsets(ctx, out)
		if err != nil || lo.Error() != nil {
			t.Fatalf("list end offsets: %v %v", err, lo.Error())
		}
		m := map[int32]int64{}
		lo.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
		return m
	}
	wrong := func(got map[string]string) []string {
		var bad []string
		for w, n := range want {
			if got[w] != fmt.Sprint(n) {
				bad = append(bad, fmt.Sprintf("%s=%s (want %d)", w, got[w], n))
			}
		}
		if len(got) != len(want) {
			bad = append(bad, fmt.Sprintf("%d words, want %d", len(got), len(want)))
		}
		return bad
	}
	rewind := func() {
		t.Helper()
		lo, err := adm.ListStartOffsets(ctx, in)
		if err != nil || lo.Error() != nil {
			t.Fatalf("list start offsets: %v %v", err, lo.Error())
		}
		resp, err := adm.CommitOffsets(ctx, appID, lo.Offsets())
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("rewinding the input: %v", err)
		}
	}
	deleteInternal := func() {
		t.Helper()
		// As sluice reset does: the group's offsets on the repartition
		// topic first (a real broker drops them with the topic too).
		committed, err := adm.FetchOffsets(ctx, appID)
		if err != nil || committed.Error() != nil {
			t.Fatalf("fetch offsets: %v %v", err, committed.Error())
		}
		set := kadm.TopicsSet{}
		for p := range committed[repartition] {
			set.Add(repartition, p)
		}
		if len(set) > 0 {
			if resp, err := adm.DeleteOffsets(ctx, appID, set); err != nil || resp.Error() != nil {
				t.Fatalf("delete offsets: %v %v", err, resp.Error())
			}
		}
		resp, err := adm.DeleteTopics(ctx, changelog, repartition)
		if err != nil || resp.Error() != nil {
			t.Fatalf("delete topics: %v %v", err, resp.Error())
		}
		for _, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				t.Fatal(r.Err)
			}
		}
	}

	// 1. The first run counts every word.
	run()
	if bad := wrong(countsSince(nil)); len(bad) > 0 {
		t.Fatalf("first run: wrong counts: %v", bad[:min(5, len(bad))])
	}

	// 2. Reset without wiping the local state: the second run must start
	// from zero, and say why it wiped its stores.
	from := ends()
	rewind()
	deleteInternal()
	logs := run()
	if bad := wrong(countsSince(from)); len(bad) > 0 {
		t.Errorf("replay after a reset that kept the local state: stale counts, e.g. %v", bad[:min(5, len(bad))])
	}
	for _, want := range []string{"inconsistent with its changelog", "store=counts", "changelog=" + changelog, "local_checkpoint=", "log_end=0"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no warning with %q when wiping the stale store; logs:\n%s", want, logs)
		}
	}

	// 3. Negative control: a broken reset that keeps the changelog serves
	// the stale counts, and the same check sees it.
	from = ends()
	rewind()
	logs = run()
	bad := wrong(countsSince(from))
	if len(bad) == 0 {
		t.Error("negative control: a reset that kept the changelog replayed identical counts; the check cannot see stale state")
	}
	if strings.Contains(logs, "inconsistent with its changelog") {
		t.Errorf("a consistent store was reported inconsistent:\n%s", logs)
	}
}

func toStrings(m map[string][]byte) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}
