//go:build unix

package integration

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/readback"
)

// TestResetReplayProducesIdenticalOutput runs the pageviews example (event
// time: windows, sessions, late records) as a `sluice run` process over a
// fixed input, stops it, resets it with `sluice reset`, runs it again from
// scratch with the same application id, and checks that the second run wrote
// exactly what the first did: the same per-key sequences of closed minutes
// and sessions, the same late and dead-lettered records. The output topics
// then hold both runs, split at their end offsets before the replay.
//
// Three resets are compared:
//   - `sluice reset --state-dir`: identical;
//   - `sluice reset` without --state-dir, the local state left in place: the
//     stores' checkpoints are past the ends of the recreated changelogs, so the
//     tasks wipe them and the replay is identical too;
//   - the negative control, a broken reset that only rewinds the input offsets
//     and keeps the changelogs and the local state: the restored stores hold
//     the first run's windows and watermark, so the replay differs, and the
//     same comparison must say so.
func TestResetReplayProducesIdenticalOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes")
	}
	bin := buildSluice(t)
	addrs := testBrokers(t)
	prefix := uniquePrefix(t)
	const partitions = 3
	input := prefix + "pageviews"
	createTopics(t, addrs, partitions, input)
	views, err := ProduceKeyed(testContext(t, time.Minute), addrs, input, GeneratePageViews(11, 4_000, partitions))
	if err != nil {
		t.Fatal(err)
	}
	exp := ExpectPageViews(views)
	if len(exp.PerMinute) == 0 || len(exp.Sessions) == 0 || len(exp.Late) == 0 || len(exp.Dead) == 0 {
		t.Fatal("the input does not exercise every output")
	}

	for _, c := range []struct {
		name, tag string
		reset     func(t *testing.T, h *harness) // with the application stopped
		identical bool
		// wipes: the replay must log that it wiped stores inconsistent
		// with their changelogs (and must not otherwise).
		wipes bool
	}{
		{"reset with state-dir", "wipe", func(t *testing.T, h *harness) {
			sluiceReset(t, bin, addrs, h.appID, "--to-earliest", "--state-dir", h.instances[0].dir)
		}, true, false},
		{"reset keeping local state", "keep", func(t *testing.T, h *harness) {
			out := sluiceReset(t, bin, addrs, h.appID)
			if !strings.Contains(out, "rm -rf") {
				t.Errorf("reset without --state-dir does not say what to delete:\n%s", out)
			}
		}, true, true},
		{"negative control: offsets only", "neg", func(t *testing.T, h *harness) {
			rewindGroup(t, addrs, h.appID, input)
		}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := prefix + c.tag
			topics := PageViewTopics{Input: input, PerMinute: p + "-per-minute", Late: p + "-late", Sessions: p + "-sessions", DLQ: p + "-dlq"}
			createTopics(t, addrs, partitions, topics.outputs()...)
			appID := p + "-pv"
			run := []string{"run", "pageviews", "--input", topics.Input, "--per-minute", topics.PerMinute, "--late", topics.Late, "--sessions", topics.Sessions, "--dlq", topics.DLQ}
			// Dynamic membership: SIGTERM leaves the group at once, so the
			// reset need not wait out a static member's session.
			h := newHarness(t, bin, addrs, appID, "exactly_once", true, run, t.TempDir(), 1)
			h.waitFinished(time.Now().Add(3*time.Minute), input, topics.outputs())

			if c.identical {
				// While the instance runs, reset refuses and changes
				// nothing.
				out, err := exec.Command(bin, "reset", "--app-id", appID, "--brokers", strings.Join(addrs, ","), "--state-dir", h.instances[0].dir).CombinedOutput()
				if err == nil || !strings.Contains(string(out), "refusing") {
					t.Errorf("reset of a running application: %v, want a refusal:\n%s", err, out)
				}
			}
			h.stopAll(time.Minute)
			split := endOffsets(t, addrs, topics.outputs())

			c.reset(t, h)
			h.start(h.instances[0])
			h.waitFinished(time.Now().Add(3*time.Minute), input, topics.outputs())
			h.stopAll(time.Minute)

			logs, err := os.ReadFile(h.instances[0].logPath)
			if err != nil {
				t.Fatal(err)
			}
			if wiped := bytes.Contains(logs, []byte("inconsistent with its changelog")); wiped != c.wipes {
				t.Errorf("instance logged wiping an inconsistent store: %v, want %v (log %s)", wiped, c.wipes, h.instances[0].logPath)
			}
			first, second := readRuns(t, addrs, topics.outputs(), split)
			if v := CheckPageViews(topics, exp, first); len(v) > 0 {
				t.Fatalf("the first run is wrong; nothing to compare:\n%s", joinLines(v[:min(10, len(v))]))
			}
			var diffs []string
			for _, topic := range []string{topics.PerMinute, topics.Sessions} {
				if d := SameSequences(PerKeySequences(first[topic]), PerKeySequences(second[topic])); len(d) > 0 {
					diffs = append(diffs, topic+": different sequences for keys "+strings.Join(d[:min(5, len(d))], ", "))
				}
			}
			for _, topic := range []string{topics.Late, topics.DLQ} {
				if !slices.Equal(SortedRecords(first[topic]), SortedRecords(second[topic])) {
					diffs = append(diffs, topic+": different records")
				}
			}
			t.Logf("first run: %d per-minute, %d sessions, %d late, %d dead; replay: %d, %d, %d, %d",
				len(first[topics.PerMinute]), len(first[topics.Sessions]), len(first[topics.Late]), len(first[topics.DLQ]),
				len(second[topics.PerMinute]), len(second[topics.Sessions]), len(second[topics.Late]), len(second[topics.DLQ]))
			switch {
			case c.identical && len(diffs) > 0:
				t.Errorf("the replay after the reset differs from the first run:\n  %s", strings.Join(diffs, "\n  "))
			case !c.identical && len(diffs) == 0:
				t.Error("negative control: a reset that kept the changelogs and local state replayed identically; the comparison cannot see a broken reset")
			case !c.identical:
				t.Logf("negative control detected: %s", strings.Join(diffs, "; "))
			}
		})
	}
}

// sluiceReset runs the binary's reset and returns its output; it must
// succeed.
func sluiceReset(t *testing.T, bin string, addrs []string, appID string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"reset", "--app-id", appID, "--brokers", strings.Join(addrs, ",")}, args...)...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("sluice reset did not finish within 2 minutes:\n%s", out)
	}
	if err != nil {
		t.Fatalf("sluice reset %v: %v\n%s", args, err, out)
	}
	t.Logf("sluice reset %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// rewindGroup is the broken reset of the negative control: the group's
// offsets on topic go back to the start; nothing else changes.
func rewindGroup(t *testing.T, addrs []string, group, topic string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	adm := newAdmin(t, addrs)
	lo, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := adm.CommitOffsets(ctx, group, lo.Offsets())
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("rewinding %s: %v", group, err)
	}
}

func endOffsets(t *testing.T, addrs []string, topics []string) map[string]map[int32]int64 {
	t.Helper()
	ends, err := listOffsets(testContext(t, 30*time.Second), newAdmin(t, addrs).ListEndOffsets, topics)
	if err != nil {
		t.Fatal(err)
	}
	return ends
}

// readRuns reads the committed records of topics and splits them at split:
// the first run wrote below it, the replay at or above.
func readRuns(t *testing.T, addrs []string, topics []string, split map[string]map[int32]int64) (first, second Outputs) {
	t.Helper()
	first, second = Outputs{}, Outputs{}
	for _, topic := range topics {
		rs, err := readback.ReadCommitted(testContext(t, time.Minute), addrs, topic)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			hs := map[string]string{}
			for _, h := range r.Headers {
				hs[h.Key] = string(h.Value)
			}
			o := OutRecord{Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: hs}
			if r.Offset < split[topic][r.Partition] {
				first[topic] = append(first[topic], o)
			} else {
				second[topic] = append(second[topic], o)
			}
		}
	}
	return first, second
}
