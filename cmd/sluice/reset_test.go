package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/testbroker"
)

// resetFixture is a broker holding what an application leaves behind: an
// input topic with committed offsets, internal topics (one with committed
// offsets), its dead-letter and output topics, topics of other applications,
// and local state.
type resetFixture struct {
	addr      string
	p         string // prefixes every name on a shared cluster
	adm       *kadm.Client
	appID     string
	input     string
	internal  []string
	untouched []string
	stateRoot string
	start     time.Time // the input's first record timestamp; then one per 10 minutes
}

const resetRecords = 10 // per input partition

func newResetFixture(t *testing.T) *resetFixture {
	t.Helper()
	addrs := testbroker.Addrs(t)
	// On a shared cluster (SLUICE_TEST_BROKERS), names of this run only.
	p := ""
	if len(testbroker.External()) > 0 {
		p = testbroker.Unique(t, "reset-") + "-"
	}
	f := &resetFixture{addr: addrs[0], p: p, appID: p + "app", input: p + "views"}
	// kgo caches topic listings for MetadataMinAge: keep it short so that
	// the checks see the deletions at once.
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	f.adm = kadm.NewClient(cl)
	ctx := testCtx(t)
	f.internal = []string{f.appID + "-counts-changelog", f.appID + "-by-page-repartition"}
	f.untouched = []string{f.appID + "-dlq", f.p + "page-counts", f.appID + "-notes", f.p + "other-counts-changelog"}
	for _, tp := range append(append([]string{f.input}, f.internal...), f.untouched...) {
		if err := broker.CreateTopic(ctx, addrs, tp, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Timestamps 3 hours ago, then every 10 minutes, so that a datetime or
	// a duration picks a known offset.
	f.start = time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range resetRecords {
			recs = append(recs, &kgo.Record{Topic: f.input, Partition: p, Value: []byte("v"),
				Timestamp: f.start.Add(time.Duration(i) * 10 * time.Minute)})
		}
	}
	pcl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer pcl.Close()
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// What the application committed.
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: f.input, Partition: 0, At: 7, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: f.input, Partition: 1, At: 9, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: f.appID + "-by-page-repartition", Partition: 0, At: 0, LeaderEpoch: -1})
	resp, err := f.adm.CommitOffsets(ctx, f.appID, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	// Local state of this application and of another one.
	f.stateRoot = t.TempDir()
	for _, d := range []string{filepath.Join(f.stateRoot, f.appID, "0_0", "counts"), filepath.Join(f.stateRoot, f.p+"other", "0_0")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "data"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(f.stateRoot, f.appID, ".lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// reset runs `sluice reset` with args after --app-id and --brokers.
func (f *resetFixture) reset(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"reset", "--app-id", f.appID, "--brokers", f.addr}, args...))
	err := root.ExecuteContext(testCtx(t))
	t.Logf("sluice reset %s:\n%s", strings.Join(args, " "), out.String())
	return out.String(), err
}

// committed returns the group's committed offset of input partitions 0 and 1
// (-1: none).
func (f *resetFixture) committed(t *testing.T, topic string) [2]int64 {
	t.Helper()
	resp, err := f.adm.FetchOffsets(testCtx(t), f.appID)
	if err == nil {
		err = resp.Error()
	}
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		t.Fatal(err)
	}
	got := [2]int64{-1, -1}
	for p := range int32(2) {
		if o, ok := resp.Lookup(topic, p); ok && o.Err == nil {
			got[p] = o.At
		}
	}
	return got
}

func (f *resetFixture) existing(t *testing.T) []string {
	t.Helper()
	tds, err := f.adm.ListTopics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return tds.Names()
}

func (f *resetFixture) stateExists(t *testing.T, app string) bool {
	t.Helper()
	_, err := os.Stat(filepath.Join(f.stateRoot, app))
	return err == nil
}

// wantUnchanged checks that nothing of the fixture was reset.
func (f *resetFixture) wantUnchanged(t *testing.T) {
	t.Helper()
	if got := f.committed(t, f.input); got != [2]int64{7, 9} {
		t.Errorf("input offsets %v, want the application's [7 9] unchanged", got)
	}
	if got := f.committed(t, f.appID+"-by-page-repartition"); got[0] != 0 {
		t.Errorf("repartition offsets %v, want partition 0 at 0 unchanged", got)
	}
	topics := f.existing(t)
	for _, tp := range f.internal {
		if !slices.Contains(topics, tp) {
			t.Errorf("internal topic %s was deleted", tp)
		}
	}
	if !f.stateExists(t, f.appID) {
		t.Error("local state was deleted")
	}
}

func TestResetToEarliestDeletesInternalTopicsAndState(t *testing.T) {
	f := newResetFixture(t)
	// Negative control: the fixture is what the checks below must see
	// changed.
	f.wantUnchanged(t)
	if t.Failed() {
		t.FailNow()
	}
	out, err := f.reset(t, "--state-dir", f.stateRoot)
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	if got := f.committed(t, f.input); got != [2]int64{0, 0} {
		t.Errorf("input offsets after reset %v, want [0 0]", got)
	}
	if got := f.committed(t, f.appID+"-by-page-repartition"); got != [2]int64{-1, -1} {
		t.Errorf("offsets of a deleted repartition topic %v, want none", got)
	}
	topics := f.existing(t)
	for _, tp := range f.internal {
		if slices.Contains(topics, tp) {
			t.Errorf("internal topic %s still exists", tp)
		}
	}
	for _, tp := range append([]string{f.input}, f.untouched...) {
		if !slices.Contains(topics, tp) {
			t.Errorf("topic %s was deleted; only the application's internal topics may be", tp)
		}
	}
	if f.stateExists(t, f.appID) {
		t.Error("local state <state-dir>/app still exists")
	}
	if !f.stateExists(t, f.p+"other") {
		t.Error("another application's local state was deleted")
	}
	for _, want := range []string{f.input + "/0: 7 -> 0", f.input + "/1: 9 -> 0", f.appID + "-counts-changelog", f.appID + "-by-page-repartition", f.appID + "-dlq", "deleted " + filepath.Join(f.stateRoot, f.appID)} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestResetDryRunChangesNothing(t *testing.T) {
	f := newResetFixture(t)
	out, err := f.reset(t, "--dry-run", "--state-dir", f.stateRoot)
	if err != nil {
		t.Fatalf("reset --dry-run: %v", err)
	}
	f.wantUnchanged(t)
	for _, want := range []string{"dry run", f.input + "/0: 7 -> 0", f.input + "/1: 9 -> 0", f.appID + "-counts-changelog", "would delete " + filepath.Join(f.stateRoot, f.appID)} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestResetWithoutStateDirPrintsThePath(t *testing.T) {
	f := newResetFixture(t)
	// state.dir from the environment names the path but does not wipe it:
	// only the --state-dir flag does.
	t.Setenv("SLUICE_STATE_DIR", f.stateRoot)
	out, err := f.reset(t)
	if err != nil {
		t.Fatalf("reset: %v", err)
	}
	if !f.stateExists(t, f.appID) {
		t.Error("local state deleted without --state-dir")
	}
	if want := "rm -rf " + filepath.Join(f.stateRoot, f.appID); !strings.Contains(out, want) {
		t.Errorf("report lacks %q", want)
	}
	if got := f.committed(t, f.input); got != [2]int64{0, 0} {
		t.Errorf("input offsets after reset %v, want [0 0]", got)
	}
}

func TestResetToDatetimeAndByDuration(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want int64
	}{
		// The record at start+40m is the first at or after start+35m.
		{"rfc3339", []string{"--to-datetime", "+35m"}, 4},
		{"offset zone", []string{"--to-datetime", "+35m@+02:00"}, 4},
		{"no zone is utc", []string{"--to-datetime", "+35m@none"}, 4},
		{"exact timestamp", []string{"--to-datetime", "+50m"}, 5},
		{"after every record", []string{"--to-datetime", "+5h"}, resetRecords},
		// now-95m lies between start+80m and start+90m (start = now-3h).
		{"by duration", []string{"--by-duration", "95m"}, 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newResetFixture(t)
			args := slices.Clone(c.args)
			if args[0] == "--to-datetime" {
				rel, zone, _ := strings.Cut(args[1], "@")
				d, err := time.ParseDuration(strings.TrimPrefix(rel, "+"))
				if err != nil {
					t.Fatal(err)
				}
				at := f.start.Add(d)
				switch zone {
				case "":
					args[1] = at.UTC().Format(time.RFC3339)
				case "none":
					args[1] = at.UTC().Format("2006-01-02T15:04:05")
				default:
					loc := time.FixedZone(zone, 2*3600)
					args[1] = at.In(loc).Format(time.RFC3339)
				}
			}
			if _, err := f.reset(t, args...); err != nil {
				t.Fatalf("reset %v: %v", args, err)
			}
			if got := f.committed(t, f.input); got != [2]int64{c.want, c.want} {
				t.Errorf("reset %v: input offsets %v, want [%d %d]", args, got, c.want, c.want)
			}
		})
	}
}

func TestResetInputTopics(t *testing.T) {
	f := newResetFixture(t)
	// page-counts has no committed offsets; named, it is reset too.
	if _, err := f.reset(t, "--input-topics", f.p+"page-counts", "--to-datetime", f.start.Add(15*time.Minute).Format(time.RFC3339)); err != nil {
		t.Fatal(err)
	}
	if got := f.committed(t, f.p+"page-counts"); got != [2]int64{0, 0} {
		t.Errorf("page-counts offsets %v, want [0 0] (empty topic: its end)", got)
	}
	if got := f.committed(t, f.input); got != [2]int64{2, 2} {
		t.Errorf("input offsets %v, want [2 2]", got)
	}
	if _, err := f.reset(t, "--input-topics", "no-such-topic"); err == nil || !strings.Contains(err.Error(), "no-such-topic does not exist") {
		t.Errorf("reset of a missing input topic: %v, want an error naming it", err)
	}
	if _, err := f.reset(t, "--input-topics", f.appID+"-counts-changelog"); err == nil || !strings.Contains(err.Error(), "internal topic") {
		t.Errorf("reset naming an internal topic as input: %v, want a refusal", err)
	}
}

func TestResetRefusesLiveMembers(t *testing.T) {
	for _, static := range []bool{false, true} {
		name := "dynamic"
		if static {
			name = "static"
		}
		t.Run(name, func(t *testing.T) {
			f := newResetFixture(t)
			opts := []kgo.Opt{kgo.SeedBrokers(f.addr), kgo.ConsumerGroup(f.appID), kgo.ConsumeTopics(f.input),
				kgo.ClientID("live-instance"), kgo.DisableAutoCommit()}
			if static {
				opts = append(opts, kgo.InstanceID("inst-7"))
			}
			member, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer member.Close()
			// Poll until the member has joined (bounded).
			deadline := time.Now().Add(20 * time.Second)
			for {
				pctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
				member.PollFetches(pctx)
				cancel()
				if _, gen := member.GroupMetadata(); gen >= 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("consumer did not join the group within 20s")
				}
			}
			_, err = f.reset(t, "--state-dir", f.stateRoot)
			if err == nil {
				t.Fatal("reset succeeded while a member is alive")
			}
			for _, want := range []string{"refusing", "live-instance", "127.0.0.1"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q lacks %q", err, want)
				}
			}
			if static && !strings.Contains(err.Error(), "static member") {
				t.Errorf("refusal %q does not explain static members", err)
			}
			// The dry run refuses too.
			if _, err := f.reset(t, "--dry-run"); err == nil {
				t.Error("reset --dry-run succeeded while a member is alive")
			}
			f.wantUnchanged(t)
			if static {
				return // a static member stays until its session times out
			}
			// Once it leaves, the same reset goes through: it was the
			// member that made it refuse.
			member.Close()
			if _, err := f.reset(t, "--state-dir", f.stateRoot); err != nil {
				t.Fatalf("reset after the member left: %v", err)
			}
			if got := f.committed(t, f.input); got != [2]int64{0, 0} {
				t.Errorf("input offsets after reset %v, want [0 0]", got)
			}
		})
	}
}

func TestResetRefusesStateInUse(t *testing.T) {
	f := newResetFixture(t)
	lock, err := os.OpenFile(filepath.Join(f.stateRoot, f.appID, ".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	_, err = f.reset(t, "--state-dir", f.stateRoot)
	if err == nil || !strings.Contains(err.Error(), "in use by a running instance") {
		t.Fatalf("reset with the state dir locked: %v, want a refusal", err)
	}
	f.wantUnchanged(t)
	// Released, the reset goes through.
	syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := f.reset(t, "--state-dir", f.stateRoot); err != nil {
		t.Fatal(err)
	}
	if f.stateExists(t, f.appID) {
		t.Error("local state still exists")
	}
}

func TestResetFlagErrors(t *testing.T) {
	f := newResetFixture(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--to-earliest", "--by-duration", "1h"}, "at most one"},
		{[]string{"--to-datetime", "2026-11-29T10:00:00Z", "--by-duration", "1h"}, "at most one"},
		{[]string{"--to-datetime", "yesterday"}, "want RFC 3339"},
		{[]string{"--by-duration", "-1h"}, "must be positive"},
	} {
		if _, err := f.reset(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("reset %v: %v, want an error with %q", c.args, err, c.want)
		}
	}
	f.wantUnchanged(t)

	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetArgs([]string{"reset", "--brokers", f.addr})
	t.Setenv("SLUICE_APPLICATION_ID", f.appID)
	if err := root.ExecuteContext(testCtx(t)); err == nil || !strings.Contains(err.Error(), "--app-id is required") {
		t.Errorf("reset without --app-id (but with SLUICE_APPLICATION_ID): %v, want --app-id required", err)
	}
	f.wantUnchanged(t)
}
