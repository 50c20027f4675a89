package processor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestGlobalTableBootstrapsAndFollows checks that a global table holds its
// whole topic (all partitions) before the first record is processed, and
// that updates written while the instance runs reach it.
func TestGlobalTableBootstrapsAndFollows(t *testing.T) {
	addrs := testBrokers(t)
	ctx := context.Background()
	clicks, users, out := uniq(t, "g-clicks"), uniq(t, "g-users"), uniq(t, "g-out")
	cl := setup(t, addrs, 3, clicks, users, out)
	produce := func(topic, k, v string) {
		t.Helper()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v), Timestamp: time.UnixMilli(1000)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		produce(users, fmt.Sprintf("u%d", i), fmt.Sprintf("r%d", i%4))
	}
	produce(clicks, "c0", "u7")
	produce(clicks, "c1", "u99")
	tp := topology.New()
	g := topology.GlobalTableFrom(tp, users, topology.Materialized("users", serde.String, serde.String))
	j := topology.LeftJoinGlobal(topology.From(tp, clicks, serde.String, serde.String), g,
		func(_, user string) string { return user },
		func(_, user, region string, ok bool) string {
			if !ok {
				region = "?"
			}
			return user + "@" + region
		})
	topology.To(j, out, serde.String, serde.String)
	app, err := processor.New(tp, processor.ApplicationID(uniq(t, "global")), processor.Brokers(addrs...), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	read := func() map[string]string {
		rs, err := readback.ReadCommitted(ctx, addrs, out)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for k, v := range readback.Last(rs) {
			m[k] = string(v)
		}
		return m
	}
	waitFor := func(what string, ok func(map[string]string) bool) map[string]string {
		t.Helper()
		for range 200 {
			if m := read(); ok(m) {
				return m
			}
			select {
			case err := <-done:
				t.Fatalf("Run returned %v while waiting for %s", err, what)
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatalf("timed out waiting for %s", what)
		return nil
	}
	m := waitFor("the first clicks", func(m map[string]string) bool { return len(m) >= 2 })
	if m["c0"] != "u7@r3" || m["c1"] != "u99@?" {
		t.Fatalf("first clicks joined as %v, want c0=u7@r3 (bootstrapped) and c1=u99@? (absent)", m)
	}
	// An update while running reaches the table: keep clicking until a
	// click sees it (bounded), which shows the table follows its topic.
	produce(users, "u7", "r-new")
	for i := 0; ; i++ {
		click := fmt.Sprintf("c%d", 100+i)
		produce(clicks, click, "u7")
		m := waitFor(click, func(m map[string]string) bool { _, ok := m[click]; return ok })
		if m[click] == "u7@r-new" {
			break
		}
		if i == 50 || !strings.HasPrefix(m[click], "u7@r") {
			t.Fatalf("after the update, %s joined as %q", click, m[click])
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
