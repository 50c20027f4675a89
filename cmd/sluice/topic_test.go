package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/testbroker"
)

// TestTopicCommands runs create, list, describe and delete against the
// test cluster: names of every shape a topic may have, the errors that name
// the topic, and a transaction left open so that describe's last stable
// offset is below the end.
func TestTopicCommands(t *testing.T) {
	addrs := testbroker.Addrs(t)
	b := strings.Join(addrs, ",")
	p := testbroker.Unique(t, "tc-") + "."
	table, events, odd := p+"table", p+"events", p+"A_b-9.x"
	run := func(args ...string) (string, error) {
		t.Helper()
		return runSluice(testCtx(t), append(args, "--brokers", b)...)
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	out := must("topic", "create", table, events, odd, "--partitions", "3", "--compact", "--config", "retention.ms=86400000")
	for _, name := range []string{table, events, odd} {
		if !strings.Contains(out, "created topic "+name+" (3 partitions)") {
			t.Errorf("create printed %q, no line for %s", out, name)
		}
	}
	if _, err := run("topic", "create", table); err == nil || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Errorf("creating %s again: %v, want an error naming it and TOPIC_ALREADY_EXISTS", table, err)
	}
	if out := must("topic", "create", table, "--if-not-exists"); !strings.Contains(out, "exists already") {
		t.Errorf("create --if-not-exists printed %q", out)
	}
	for _, bad := range [][]string{
		{"topic", "create", p + "x", "--partitions", "0"},
		{"topic", "create", p + "x", "--config", "novalue"},
		{"topic", "create", p + "x", "--compact", "--config", "cleanup.policy=delete"},
	} {
		if _, err := run(bad...); err == nil {
			t.Errorf("sluice %s: no error", strings.Join(bad, " "))
		}
	}

	list := must("topic", "list")
	for _, name := range []string{table, events, odd} {
		if !strings.Contains("\n"+list, "\n"+name+"\n") {
			t.Errorf("list lacks %s:\n%s", name, list)
		}
	}
	if strings.Contains(list, "__consumer_offsets") {
		t.Errorf("list shows the cluster's internal topics without --all:\n%s", list)
	}

	// Three committed records in partition 1 and one in an open
	// transaction: end 4 (a marker follows the commit), last stable 3 or 4.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.TransactionalID(p+"txn"),
		kgo.DefaultProduceTopic(events), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	txn := func(n int, commit bool) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}
	txn(3, true)
	txn(1, false)
	defer func() { _ = cl.EndTransaction(context.Background(), kgo.TryAbort) }()

	out, err = run("topic", "describe", events, p+"missing")
	if err == nil || !strings.Contains(err.Error(), p+"missing") {
		t.Errorf("describe of a missing topic: %v, want an error naming it", err)
	}
	if !strings.Contains(out, "topic "+events+": 3 partitions") {
		t.Errorf("describe printed no header for %s:\n%s", events, out)
	}
	var row []string
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "1" {
			row = f
		}
	}
	// partition leader start end last-stable: the end counts the open
	// transaction's record, the last stable offset stops before it.
	if row == nil || row[2] != "0" || row[3] != "5" || row[4] != "4" {
		t.Errorf("partition 1 reads %v, want start 0, end 5 (3 records, a commit marker, 1 open), last stable 4:\n%s", row, out)
	}
	if !strings.Contains(out, "configs: cleanup.policy=compact retention.ms=86400000") {
		t.Errorf("describe lacks the configs set at create:\n%s", out)
	}

	out, err = run("topic", "delete", odd, p+"missing")
	if err == nil || !strings.Contains(err.Error(), p+"missing") || !strings.Contains(out, "deleted topic "+odd) {
		t.Errorf("delete of %s and a missing topic: %v\n%s", odd, err, out)
	}
	if list := must("topic", "list"); strings.Contains("\n"+list, "\n"+odd+"\n") {
		t.Errorf("list still shows %s after delete:\n%s", odd, list)
	}
}
