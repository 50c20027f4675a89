package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// describedUserTopics reads the user topics from Describe's text alone, an
// independent reading to hold topologyUserTopics against: every topic
// named in it that does not carry the <application.id> placeholder.
func describedUserTopics(t *testing.T, b *topology.Built) []string {
	t.Helper()
	var out []string
	// Sources "(topics: [a, b])", sinks "(topic: a)", global tables
	// "(topic a, every partition ...)".
	re := regexp.MustCompile(`\(topics: \[([^\]]*)\]\)|\(topic: ([^)]*)\)|\(topic ([^,)]*),`)
	for _, m := range re.FindAllStringSubmatch(b.Describe(), -1) {
		for name := range strings.SplitSeq(m[1]+m[2]+m[3], ", ") {
			if name != "" && !strings.Contains(name, "<application.id>") && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestTopologyUserTopics: each example's user topics, and a topology whose
// global table's topic nothing else reads, match a reading of Describe's
// text; internal topics are not among them, global tables' topics are
// compacted.
func TestTopologyUserTopics(t *testing.T) {
	for _, name := range examples.Names() {
		e, _ := examples.Get(name)
		built, err := e.Build(e.Defaults(nil)).Build()
		if err != nil {
			t.Fatal(err)
		}
		got, want := topologyUserTopics(built).all(), describedUserTopics(t, built)
		if len(want) < 2 || !slices.Equal(got, want) {
			t.Errorf("%s: user topics %v, Describe names %v", name, got, want)
		}
		for _, in := range e.Inputs {
			if !slices.Contains(got, e.Defaults(nil)[in]) {
				t.Errorf("%s: user topics %v lack the input %s", name, got, e.Defaults(nil)[in])
			}
		}
	}

	top := topology.New()
	g := topology.GlobalTableFrom(top, "rates", topology.Materialized("rates-global", serde.String, serde.String))
	s := topology.From(top, "in", serde.String, serde.String)
	joined := topology.JoinGlobal(s, g, func(k, _ string) string { return k }, func(_, v, r string) string { return v + r })
	counts := topology.Count(topology.GroupByKey(joined), topology.Materialized("n", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), "out", serde.String, serde.Int64Text)
	built, err := top.Build()
	if err != nil {
		t.Fatal(err)
	}
	u := topologyUserTopics(built)
	if !slices.Equal(u.plain, []string{"in", "out"}) || !slices.Equal(u.compacted, []string{"rates"}) {
		t.Errorf("user topics %+v, want plain [in out] and compacted [rates]\n%s", u, built.Describe())
	}
	if want := describedUserTopics(t, built); !slices.Equal(u.all(), want) {
		t.Errorf("user topics %v, Describe names %v", u.all(), want)
	}
}

// TestRunCreateTopics: without --create-topics, run stops at once naming
// every missing input and output topic of enrich (the global table's with
// --compact) and not the one that exists; with it, run creates them with
// --partitions and starts.
func TestRunCreateTopics(t *testing.T) {
	addrs := testbroker.Addrs(t)
	b := strings.Join(addrs, ",")
	p := testbroker.Unique(t, "rc-") + "-"
	topics := map[string]string{"orders": p + "orders", "customers": p + "customers", "payments": p + "payments",
		"enriched": p + "enriched", "revenue": p + "revenue", "dlq": p + "dlq"}
	args := []string{"run", "enrich", "--brokers", b, "--app-id", p + "app", "--state-dir", t.TempDir(), "--log-level", "warn"}
	for k, v := range topics {
		args = append(args, "--"+k, v)
	}
	if out, err := runSluice(testCtx(t), "topic", "create", topics["payments"], "--partitions", "3", "--brokers", b); err != nil {
		t.Fatalf("topic create: %v\n%s", err, out)
	}

	if _, err := runSluice(testCtx(t), append(args, "--partitions", "3")...); err == nil || !strings.Contains(err.Error(), "--create-topics") {
		t.Errorf("run --partitions without --create-topics: %v, want an error", err)
	}
	_, err := runSluice(testCtx(t), args...)
	if err == nil {
		t.Fatal("run with missing topics: no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"sluice topic create " + topics["enriched"] + " " + topics["orders"] + " " + topics["revenue"] + " --partitions N",
		"sluice topic create " + topics["customers"] + " --compact",
		"--create-topics",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("run with missing topics: %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, topics["payments"]) || strings.Contains(msg, topics["dlq"]) || strings.Contains(msg, "repartition") {
		t.Errorf("run names a topic that exists or is internal: %q", msg)
	}

	ctx, cancel := context.WithCancel(testCtx(t))
	var (
		wg   sync.WaitGroup
		out  string
		rerr error
	)
	wg.Go(func() { out, rerr = runSluice(ctx, append(args, "--create-topics", "--partitions", "3")...) })
	defer func() { cancel(); wg.Wait() }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	want := []string{topics["orders"], topics["customers"], topics["enriched"], topics["revenue"]}
	var td kadm.TopicDetails
	for deadline := time.Now().Add(20 * time.Second); ; {
		td, err = adm.ListTopics(testCtx(t), want...)
		if err == nil && len(td.TopicsSet()) == len(want) && td.Error() == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			wg.Wait()
			t.Fatalf("topics %v not created after 20 s: %v; run: %v\n%s", want, err, rerr, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range want {
		if n := len(td[name].Partitions); n != 3 {
			t.Errorf("%s has %d partitions, want 3", name, n)
		}
	}
	rc, err := adm.DescribeTopicConfigs(testCtx(t), topics["customers"], topics["orders"])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rc {
		policy := ""
		for _, c := range r.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		if compact := r.Name == topics["customers"]; compact != (policy == "compact") {
			t.Errorf("%s: cleanup.policy %q", r.Name, policy)
		}
	}
	cancel()
	wg.Wait()
	if rerr != nil {
		t.Errorf("run --create-topics: %v\n%s", rerr, out)
	}
	if !strings.Contains(out, "created topic "+topics["orders"]+" (3 partitions)") || strings.Contains(out, "created topic "+topics["payments"]) {
		t.Errorf("run --create-topics printed:\n%s", out)
	}
}

// TestGenMissingTopic: gen to a topic that does not exist fails at once with
// the command that creates it, not with the broker's error code.
func TestGenMissingTopic(t *testing.T) {
	b := strings.Join(testbroker.Addrs(t), ",")
	topic := testbroker.Unique(t, "absent-bills-")
	_, err := runSluice(testCtx(t), "gen", "billing", "--brokers", b, "--topic", topic, "--count", "5")
	if err == nil || !strings.Contains(err.Error(), "sluice topic create "+topic+" --partitions N") || strings.Contains(err.Error(), "UNKNOWN_TOPIC") {
		t.Errorf("gen to a missing topic: %v, want the command that creates it", err)
	}
}
