package processor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
)

// spContents is a manifest's cut and contents, part by part: what two
// savepoints of one cut must share whatever path wrote them.
func spContents(m *savepoint.Manifest) string {
	var b strings.Builder
	for _, in := range m.Inputs {
		fmt.Fprintf(&b, "input %s %+v\n", in.Topic, in.Offsets)
	}
	for _, s := range m.Stores {
		fmt.Fprintf(&b, "store %s %s %d records\n", s.Name, s.Layout, s.Records)
		for _, p := range s.Parts {
			fmt.Fprintf(&b, "  %d %s %d %s end %d\n", p.Partition, p.Dir, p.Records, p.Checksum, p.ChangelogEnd)
		}
	}
	return b.String()
}

func parts(m *savepoint.Manifest) int64 {
	var n int64
	for _, s := range m.Stores {
		n += int64(len(s.Parts))
	}
	return n
}

// takeContinue takes a savepoint that lets the instances go on, and
// returns it with how many of its parts came from checkpoints.
func takeContinue(t *testing.T, addrs []string, appID, dir string) (*savepoint.Manifest, int64) {
	t.Helper()
	before := processor.SavepointPartsTaken()
	m, err := processor.TakeSavepoint(context.Background(), appID, dir, processor.Brokers(addrs...),
		processor.SavepointContinue(), processor.SavepointTimeout(40*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return m, processor.SavepointPartsTaken() - before
}

// TestSavepointCheckpointsEqualChangelogCopies: three savepoints of one
// cut (no input in between; keys of every length, aborted input
// transactions, a key-value, a window and a time store behind repartition
// topics, two instances): every store from the instances' Pebble
// checkpoints; one instance answering as an older sluice (its stores
// copied from the changelogs, the other's checkpointed); every store from
// the changelogs. The three manifests have equal offsets, records and
// checksums, and the checkpointed one is the changelogs' fold below the
// cut (checkCut).
func TestSavepointCheckpointsEqualChangelogCopies(t *testing.T) {
	addrs := testBrokers(t)
	in, out := uniq(t, "spk-in"), uniq(t, "spk-out")
	setup(t, addrs, 4, in, out)
	appID := uniq(t, "spk")
	produceSP(t, addrs, in, 0, 900, true)
	insts := startSP(t, addrs, func() *topology.Topology { return spTopo(in, out) }, appID, 2, nil)
	waitFor(t, 60*time.Second, "the input processed", func() bool { return insts.processed() >= 600 })

	base := t.TempDir()
	all, taken := takeContinue(t, addrs, appID, filepath.Join(base, "checkpoints"))
	if taken != parts(all) || taken != 12 {
		t.Fatalf("%d of %d parts taken from checkpoints, want all 12", taken, parts(all))
	}
	processor.SetSavepointOld(insts.apps[1], true)
	mixed, taken := takeContinue(t, addrs, appID, filepath.Join(base, "mixed"))
	processor.SetSavepointOld(insts.apps[1], false)
	if taken == 0 || taken >= parts(mixed) {
		t.Fatalf("one instance old: %d of %d parts taken from checkpoints, want some but not all", taken, parts(mixed))
	}
	restore := processor.SetSavepointNoCheckpoints(true)
	copied, taken := takeContinue(t, addrs, appID, filepath.Join(base, "changelogs"))
	restore()
	if taken != 0 {
		t.Fatalf("%d parts taken from checkpoints with checkpoints off", taken)
	}
	if a, c := spContents(all), spContents(copied); a != c {
		t.Fatalf("checkpointed savepoint:\n%s\ncopied from the changelogs:\n%s", a, c)
	}
	if a, c := spContents(mixed), spContents(copied); a != c {
		t.Fatalf("mixed savepoint:\n%s\ncopied from the changelogs:\n%s", a, c)
	}
	sp, err := savepoint.Open(filepath.Join(base, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCut(addrs, sp, in, inputBelow(t, addrs, all, in)); err != nil {
		t.Fatal(err)
	}
}

// TestSavepointRefusesCheckpointBeforeCut: instances that hand in a
// checkpoint taken before the cut (the copies of an earlier savepoint,
// before more input was processed) have it refused, and the savepoint,
// copied from the changelogs, is the cut's. Negative control: with the
// offset check off, the stale copies are taken and checkCut sees the
// savepoint is not the cut's.
func TestSavepointRefusesCheckpointBeforeCut(t *testing.T) {
	var stale atomic.Pointer[string] // an earlier savepoint to hand in
	defer processor.SetSavepointCheckpoint(func(eng *store.Pebble, task, name, dir string) (int64, error) {
		old := stale.Load()
		if old == nil {
			return eng.CheckpointTo(dir)
		}
		src := filepath.Join(*old, filepath.FromSlash(savepoint.PartDir(appOf(*old), task, name)))
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return 0, err
		}
		if err := store.CopyDir(src, dir); err != nil {
			return 0, err
		}
		r, err := store.OpenPebbleReadOnly(dir)
		if err != nil {
			return 0, err
		}
		defer r.Close()
		return r.Checkpoint()
	})()

	addrs := testBrokers(t)
	in, out := uniq(t, "spb-in"), uniq(t, "spb-out")
	setup(t, addrs, 4, in, out)
	appID := uniq(t, "spb")
	produceSP(t, addrs, in, 0, 300, false)
	startSP(t, addrs, func() *topology.Topology { return spTopo(in, out) }, appID, 2, nil)
	waitInputCommitted(t, addrs, appID, in)
	base := t.TempDir()
	first := filepath.Join(base, "first")
	if _, taken := takeContinue(t, addrs, appID, first); taken != 12 {
		t.Fatalf("first savepoint: %d parts from checkpoints, want 12", taken)
	}
	produceSP(t, addrs, in, 300, 300, false)
	waitInputCommitted(t, addrs, appID, in)

	stale.Store(&first)
	before := processor.SavepointPartsRefused()
	m, taken := takeContinue(t, addrs, appID, filepath.Join(base, "second"))
	if taken != 0 {
		t.Fatalf("%d stale checkpoints taken", taken)
	}
	// Every store changed since the first savepoint, so each stale copy
	// was handed in and refused (not lost on the way).
	if refused := processor.SavepointPartsRefused() - before; refused != 12 {
		t.Fatalf("%d stale checkpoints refused, want 12", refused)
	}
	sp, err := savepoint.Open(filepath.Join(base, "second"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCut(addrs, sp, in, inputBelow(t, addrs, m, in)); err != nil {
		t.Fatal(err)
	}

	// Negative control: trusted, the stale copies make a savepoint that is
	// not the cut's, and the checker says so.
	restore := processor.SetSavepointTrustCheckpoints(true)
	bad, taken := takeContinue(t, addrs, appID, filepath.Join(base, "trusted"))
	restore()
	if taken != 12 {
		t.Fatalf("control: %d stale checkpoints taken with the check off, want 12", taken)
	}
	sp, err = savepoint.Open(filepath.Join(base, "trusted"))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCut(addrs, sp, in, inputBelow(t, addrs, bad, in)); err == nil {
		t.Fatal("negative control: a savepoint of checkpoints taken before the cut passes the checker")
	}
}

// appOf reads the application id of the savepoint in dir.
func appOf(dir string) string {
	sp, err := savepoint.Open(dir)
	if err != nil {
		return ""
	}
	return sp.Manifest().Application
}

// waitInputCommitted waits until appID's group committed every record of
// its input topic in (the savepoint's drain then waits for the
// repartition topics).
func waitInputCommitted(t *testing.T, addrs []string, appID, in string) {
	t.Helper()
	adm := admin(t, addrs)
	waitFor(t, 60*time.Second, "the input committed", func() bool {
		ends, err := adm.ListEndOffsets(context.Background(), in)
		if err != nil {
			return false
		}
		c := groupOffsets(t, addrs, appID, in)
		ok := true
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > 0 && c[o.Partition].At < o.Offset {
				ok = false
			}
		})
		return ok
	})
}
