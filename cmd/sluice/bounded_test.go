package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
)

// TestRunBoundedPageviews: `sluice run pageviews --bounded` over a finite
// input exits 0 by itself with a summary, and its per-minute counts are
// every minute's final count (the brute-force oracle: views per page per
// minute, none late as each user's views are in time order), the last
// minutes included, and its sessions hold every view once. Negative
// control: the same run without --bounded, stopped once it processed the
// input, has not closed the last minutes.
func TestRunBoundedPageviews(t *testing.T) {
	addrs := testbroker.Addrs(t)
	b := strings.Join(addrs, ",")
	p := testbroker.Unique(t, "bpv-") + "-"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	if out, err := runSluice(ctx, "topic", "create", p+"in", "--partitions", "3", "--brokers", b); err != nil {
		t.Fatalf("topic create: %v\n%s", err, out)
	}
	want := map[string]int64{} // page@minute → views
	perUser := map[string]int64{}
	const base = int64(1_700_000_000_000)
	for i := range 600 {
		user := fmt.Sprintf("user-%d", i%7)
		v := examples.PageView{User: user, Page: fmt.Sprintf("/p%d", i%4), TS: base + int64(i)*1500}
		raw, _ := json.Marshal(v)
		want[fmt.Sprintf("%s@%d", v.Page, v.TS/60000*60000)]++
		perUser[user]++
		cl.Produce(ctx, &kgo.Record{Topic: p + "in", Key: []byte(user), Value: raw}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	run := func(suffix string, extra ...string) (string, error) {
		args := []string{"run", "pageviews", "--brokers", b, "--app-id", p + "app" + suffix, "--state-dir", t.TempDir(), "--log-level", "warn",
			"--input", p + "in", "--per-minute", p + "pm" + suffix, "--late", p + "late" + suffix, "--sessions", p + "sess" + suffix,
			"--dlq", p + "dlq" + suffix, "--create-topics", "--partitions", "3"}
		return runSluice(ctx, append(args, extra...)...)
	}
	out, err := run("", "--bounded")
	if err != nil {
		t.Fatalf("run --bounded: %v\n%s", err, out)
	}
	if !strings.Contains(out, "bounded run complete: records ") {
		t.Errorf("no summary in:\n%s", out)
	}
	perMinute := func(topic string) map[string]int64 {
		rs, err := readback.ReadCommitted(ctx, addrs, topic)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, r := range rs {
			var c examples.PageCount
			if err := json.Unmarshal(r.Value, &c); err != nil {
				t.Fatal(err)
			}
			k := fmt.Sprintf("%s@%d", r.Key, c.WindowStart)
			if _, dup := got[k]; dup {
				t.Errorf("%s: window %s emitted twice", topic, k)
			}
			got[k] = c.Count
		}
		return got
	}
	if got := perMinute(p + "pm"); !maps.Equal(got, want) {
		t.Fatalf("bounded per-minute counts differ from the oracle:\ngot  %v\nwant %v", got, want)
	}
	rs, err := readback.ReadCommitted(ctx, addrs, p+"sess")
	if err != nil {
		t.Fatal(err)
	}
	views := map[string]int64{}
	for _, r := range rs {
		var s examples.Session
		if err := json.Unmarshal(r.Value, &s); err != nil {
			t.Fatal(err)
		}
		views[string(r.Key)] += s.Views
	}
	if !maps.Equal(views, perUser) {
		t.Fatalf("sessions hold %v views per user, want %v", views, perUser)
	}

	// Negative control: streaming, stopped after a few seconds: the
	// watermark never passes the last minutes (here it closes none: the
	// seven users' keys need not cover all three partitions, and an empty
	// partition holds the watermark back without an idle timeout, where
	// a bounded run ends it).
	sctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	args := []string{"run", "pageviews", "--brokers", b, "--app-id", p + "app-s", "--state-dir", t.TempDir(), "--log-level", "warn",
		"--input", p + "in", "--per-minute", p + "pm-s", "--late", p + "late-s", "--sessions", p + "sess-s",
		"--dlq", p + "dlq-s", "--create-topics", "--partitions", "3"}
	if out, err := runSluice(sctx, args...); err != nil {
		t.Fatalf("streaming run: %v\n%s", err, out)
	}
	got := perMinute(p + "pm-s")
	if maps.Equal(got, want) {
		t.Fatal("negative control: a streaming run closed every minute too; the test cannot tell bounded from streaming")
	}
	t.Logf("streaming closed %d of %d minutes", len(got), len(want))
}

// TestRunUntilRefusesABadTime: --until takes RFC 3339 only, and says so
// before anything starts. Control: a valid time passes the parse (and then
// fails on the broker that is not there, not on the flag).
func TestRunUntilRefusesABadTime(t *testing.T) {
	for _, bad := range []string{"yesterday", "2026-12-01", "2026-12-01 10:00:00", "1700000000000"} {
		_, err := runSluice(testCtx(t), "run", "pageviews", "--until", bad, "--brokers", "127.0.0.1:1", "--state-dir", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "RFC 3339") {
			t.Errorf("--until %q: %v, want an error naming RFC 3339", bad, err)
		}
	}
	var b boundedFlags
	b.until = "2026-12-01T10:00:00Z"
	if opts, err := b.opts(); err != nil || len(opts) != 1 {
		t.Fatalf("valid --until: %v, %d options", err, len(opts))
	}
	if opts, err := (&boundedFlags{}).opts(); err != nil || len(opts) != 0 {
		t.Fatalf("no flags: %v, %d options, want none", err, len(opts))
	}
}
