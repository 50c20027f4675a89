package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/groupview"
	"github.com/sluice-streams/sluice/internal/testapp"
	"github.com/sluice-streams/sluice/internal/testbroker"
)

// TestGroupDescribe runs wordcount in-process and describes it with
// `sluice group describe`: the JSON has exactly the contract's fields and
// the offsets produced; the text tables show the instance and a row per
// input partition; once the app stopped, the empty group is an error after
// the committed lag (exactly what was produced since) is printed; an
// unknown application, unreachable brokers and a bad --format are clear
// errors.
func TestGroupDescribe(t *testing.T) {
	addrs := testbroker.Addrs(t)
	b := strings.Join(addrs, ",")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p := testbroker.Unique(t, "grp-")
	wc := testapp.WordCount(t, ctx, addrs, p, "127.0.0.1:18090")
	app, in := wc.App, wc.Input
	produced := map[int32]int64{}
	produce := func(part int32, n int) {
		t.Helper()
		// Lines of every shape: empty, one word, non-UTF-8 bytes.
		shapes := []string{"", "a", "the quick fox", "\xff\xfe x"}
		lines := make([]string, n)
		for i := range lines {
			lines[i] = shapes[i%len(shapes)]
		}
		wc.Produce(t, part, lines...)
		produced[part] += int64(n)
	}
	produce(0, 6)
	produce(1, 9)

	run := func(args ...string) (string, error) {
		t.Helper()
		return runSluice(ctx, append([]string{"group", "describe"}, args...)...)
	}
	// Caught up: the input's committed offsets are what was produced.
	var v groupview.View
	var raw string
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		raw, err = run("--app-id", p, "--brokers", b, "--format", "json")
		if err == nil {
			v = groupview.View{}
			if err = json.Unmarshal([]byte(raw), &v); err == nil {
				if committedIn(v, in) == fmt.Sprint(produced) {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view never showed the input committed at %v: %v\n%s", produced, err, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v.State != "Stable" || v.Application != p || v.Generation < 1 || len(v.Instances) != 1 || v.Instances[0].Endpoint != "127.0.0.1:18090" {
		t.Errorf("view: %+v", v)
	}
	// Wordcount's tasks: splitting (0_p) and counting (1_p), as /tasks
	// names them.
	var ids []string
	for _, tk := range v.Instances[0].Tasks {
		ids = append(ids, tk.ID)
	}
	var want []string
	for _, st := range app.Status().Tasks {
		want = append(want, st.ID)
	}
	if !slices.Equal(ids, []string{"0_0", "0_1", "1_0", "1_1"}) || !slices.Equal(ids, want) {
		t.Errorf("tasks %v, want 0_0 0_1 1_0 1_1 as Status says (%v)", ids, want)
	}
	checkContract(t, raw)

	text, err := run("--app-id", p, "--brokers", b)
	if err != nil {
		t.Fatalf("text: %v\n%s", err, text)
	}
	t.Logf("sluice group describe:\n%s", text)
	for _, want := range []string{
		"application " + p + ": group Stable, generation ",
		"ENDPOINT", "ACTIVE-TASKS", "STANDBY-TASKS",
		"127.0.0.1:18090", "0_0,0_1,1_0,1_1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if row := partitionRow(text, in, "1"); !slices.Equal(row, []string{"127.0.0.1:18090", "0_1", in, "1", "9", "9", "0"}) {
		t.Errorf("row of %s/1: %v\n%s", in, row, text)
	}

	// Stopped: the group is empty; what is produced now is its lag.
	if err := wc.Stop(); err != nil {
		t.Fatal(err)
	}
	produce(1, 3)
	text, err = run("--app-id", p, "--brokers", b)
	t.Logf("sluice group describe, the app stopped:\n%s", text)
	if err == nil || !strings.Contains(err.Error(), "no instance running") || !strings.Contains(text, "group Empty") {
		t.Errorf("empty group: %v\n%s", err, text)
	}
	if row := partitionRow(text, in, "1"); !slices.Equal(row, []string{"-", "-", in, "1", "9", "12", "3"}) {
		t.Errorf("empty group, row of %s/1: %v, want committed 9, end 12, lag 3\n%s", in, row, text)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--app-id", p + "-none", "--brokers", b}, `no application "` + p + `-none"`},
		{[]string{"--app-id", p, "--brokers", "127.0.0.1:1", "--timeout", "1s"}, "no answer from the brokers 127.0.0.1:1"},
		{[]string{"--app-id", p, "--brokers", b, "--format", "yaml"}, `--format "yaml"`},
		{[]string{"--brokers", b}, "application.id"},
	} {
		out, err := run(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("group describe %s: %v (%s), want an error with %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}

// committedIn is the committed offset of each partition of topic in v, as
// map[partition]offset printed.
func committedIn(v groupview.View, topic string) string {
	got := map[int32]int64{}
	for _, in := range v.Instances {
		for _, tk := range in.Tasks {
			for _, p := range tk.Partitions {
				if p.Topic == topic {
					got[p.Partition] = p.Committed
				}
			}
		}
	}
	return fmt.Sprint(got)
}

// partitionRow returns the fields of the text's partition row of topic and
// partition.
func partitionRow(text, topic, partition string) []string {
	for line := range strings.SplitSeq(text, "\n") {
		if f := strings.Fields(line); len(f) == 7 && f[2] == topic && f[3] == partition {
			return f
		}
	}
	return nil
}

// checkContract checks that the JSON has exactly the fields of the
// /instances contract, at every level (a renamed or dropped field breaks
// the console coded against it).
func checkContract(t *testing.T, raw string) {
	t.Helper()
	var top map[string]any
	if err := json.Unmarshal([]byte(raw), &top); err != nil {
		t.Fatal(err)
	}
	keys := func(m any) []string {
		mm, _ := m.(map[string]any)
		return slices.Sorted(maps.Keys(mm))
	}
	eq := func(what string, got []string, want ...string) {
		t.Helper()
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: fields %v, want %v", what, got, want)
		}
	}
	eq("view", keys(top), "application", "state", "generation", "lag", "instances")
	insts, _ := top["instances"].([]any)
	if len(insts) == 0 {
		t.Fatalf("no instances: %s", raw)
	}
	eq("instance", keys(insts[0]), "member_id", "client_id", "host", "endpoint", "tasks", "standbys", "lag")
	tasks, _ := insts[0].(map[string]any)["tasks"].([]any)
	if len(tasks) == 0 {
		t.Fatalf("no tasks: %s", raw)
	}
	eq("task", keys(tasks[0]), "id", "partitions", "lag")
	parts, _ := tasks[0].(map[string]any)["partitions"].([]any)
	if len(parts) == 0 {
		t.Fatalf("no partitions: %s", raw)
	}
	eq("partition", keys(parts[0]), "topic", "partition", "committed", "end", "lag")
	if _, ok := insts[0].(map[string]any)["standbys"].([]any); !ok {
		t.Errorf("standbys is not a list (null?): %s", raw)
	}
}
