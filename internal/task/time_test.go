package task

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// groupThenWindow is the ordinary groupBy-then-window shape: sub-topology
// 0 reads clicks (watermark 10 ms behind) and writes the repartition topic
// by-user-repartition; it has no windowed store of its own. Sub-topology 1
// counts per user in 100 ms windows.
func groupThenWindow() *topology.Topology {
	t := topology.New()
	clicks := topology.From(t, "clicks", serde.String, serde.String,
		topology.Watermarks(window.BoundedOutOfOrderness(10*time.Millisecond)))
	ws := topology.WindowedBy(
		topology.GroupBy(clicks, func(_ string, user string) string { return user },
			topology.Grouped("by-user", serde.String, serde.String)),
		window.Tumbling(100*time.Millisecond))
	counts := topology.CountWindows(ws, topology.Materialized("per-user", serde.String, serde.Int64))
	topology.To(topology.Map(topology.ToStream(counts), func(w topology.Windowed[string], n int64) (string, int64) {
		return fmt.Sprintf("%s@%d", w.Key, w.Window.Start), n
	}), "out", serde.String, serde.Int64)
	return t
}

// adversarialKeys are keys of every encoded length from 0 to 131 bytes,
// and a 36-byte UUID.
func adversarialKeys() []string {
	keys := []string{"6f1c2a4e-8b3d-4c5f-9a7e-0d1b2c3d4e5f"}
	for n := 0; n <= 131; n++ {
		keys = append(keys, strings.Repeat("k", n))
	}
	return keys
}

// repartitionOut is what a task wrote to the repartition topic: each
// record's key, value, timestamp and headers, in order. A watermark record
// that repeats the last one of its partition is left out: a reopened task
// announces its watermark again, which readers take as the no-op it is.
func repartitionOut(recs []*kgo.Record) []string {
	var out []string
	last := map[int32]string{}
	for _, r := range recs {
		if !strings.HasSuffix(r.Topic, "-repartition") {
			continue
		}
		if len(r.Headers) > 0 && r.Headers[0].Key == "sluice.watermark" {
			if last[r.Partition] == string(r.Value) {
				continue
			}
			last[r.Partition] = string(r.Value)
		}
		s := fmt.Sprintf("%s p%d %q=%x @%d", r.Topic, r.Partition, r.Key, r.Value, r.Timestamp.UnixMilli())
		for _, h := range r.Headers {
			s += fmt.Sprintf(" %s=%x", h.Key, h.Value)
		}
		out = append(out, s)
	}
	return out
}

// TestWatermarkSurvivesReopenWithoutWindowedStore runs the upstream
// sub-topology of the groupBy-then-window shape twice over the same
// clicks, committing after every record: once uninterrupted, once closing
// and reopening the task (same state directory) after every commit. What
// it writes to the repartition topic — records, their sluice.wm headers,
// watermark records — must be the same (invariant 5): the downstream task
// judges lateness by sluice.wm.
func TestWatermarkSurvivesReopenWithoutWindowedStore(t *testing.T) {
	p := plan(t, groupThenWindow())
	keys := adversarialKeys()
	var recs []*kgo.Record
	for i, k := range keys {
		// Out of order by up to 40 ms against a 10 ms bound: some
		// records are late for the windows downstream.
		ts := int64(1000 + i*7 - (i%5)*10)
		recs = append(recs, &kgo.Record{Topic: "clicks", Key: []byte(k), Value: []byte(fmt.Sprintf("user-%d", i%3)), Offset: int64(i), Timestamp: time.UnixMilli(ts)})
	}
	run := func(reopen bool) []string {
		dir := t.TempDir()
		d := &discard{keep: []*kgo.Record{}}
		cfg := Config{AppID: "app", StateDir: dir, Send: d.send, InternalPartitions: map[string]int32{"app-by-user-repartition": 2}}
		tk, err := New(ID{0, 0}, p.Subs[0], p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.Init(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := tk.Process(r); err != nil {
				t.Fatal(err)
			}
			if err := tk.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := tk.Commit(); err != nil {
				t.Fatal(err)
			}
			if reopen {
				if err := tk.Close(); err != nil {
					t.Fatal(err)
				}
				if tk, err = New(ID{0, 0}, p.Subs[0], p, cfg); err != nil {
					t.Fatal(err)
				}
				if err := tk.Init(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tk.Close(); err != nil {
			t.Fatal(err)
		}
		return repartitionOut(d.keep)
	}
	want, got := run(false), run(true)
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			t.Fatalf("repartition record %d differs after reopen:\n got  %s\n want %s", i, got[i], want[i])
		}
	}
	if len(want) != len(got) {
		t.Fatalf("reopened task wrote %d repartition records, uninterrupted %d", len(got), len(want))
	}
}
