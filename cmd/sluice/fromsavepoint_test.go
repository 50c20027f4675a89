package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/store"
)

// writeTestSavepoint writes a savepoint of application app holding one
// store, "old-counts", of two partitions with keys of every length.
func writeTestSavepoint(t *testing.T, dir, app string) {
	t.Helper()
	w, err := savepoint.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := savepoint.Store{Name: "old-counts", Layout: "key-value", KeySerde: "serde.stringSerde", ValueSerde: "serde.int64Serde", Partitions: 2}
	keys := testkeys.Bytes()
	for p := range int32(2) {
		pw, err := w.Part(app, savepoint.TaskID(0, p), st.Name, p)
		if err != nil {
			t.Fatal(err)
		}
		var ws []store.Write
		for i, k := range keys {
			if int32(i%2) == p {
				ws = append(ws, store.Write{Key: k, Value: []byte{0, 0, 0, 0, 0, 0, 0, byte(i)}})
			}
		}
		if err := pw.Engine().Apply(ws, int64(len(ws))); err != nil {
			t.Fatal(err)
		}
		part, err := pw.Close()
		if err != nil {
			t.Fatal(err)
		}
		st.Parts = append(st.Parts, part)
	}
	if err := w.Commit(&savepoint.Manifest{ID: "sp-cli", Application: app, Created: time.Now().UTC(), Stores: []savepoint.Store{st}}); err != nil {
		t.Fatal(err)
	}
}

// TestRunFromSavepointRefusesCorrupt: `sluice run --from-savepoint` with a
// savepoint whose copy does not match its checksum fails, naming the
// copy's directory and the checksum, and nothing is committed. Control:
// the intact savepoint gets past the check (it is refused for the next
// rule instead: its store is one the example does not have, without
// --allow-dropped-state).
func TestRunFromSavepointRefusesCorrupt(t *testing.T) {
	addrs := testbroker.Addrs(t)
	b := strings.Join(addrs, ",")
	p := testbroker.Unique(t, "rsp-") + "-"
	app := p + "app"
	good := filepath.Join(t.TempDir(), "sp")
	writeTestSavepoint(t, good, app)
	bad := filepath.Join(t.TempDir(), "sp-bad")
	writeTestSavepoint(t, bad, app)
	mf := filepath.Join(bad, savepoint.ManifestFile)
	raw, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	var m savepoint.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m.Stores[0].Parts[1].Checksum = "sha256:" + strings.Repeat("0", 64)
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mf, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	run := func(dir string, extra ...string) (string, error) {
		args := []string{"run", "wordcount", "--brokers", b, "--app-id", app, "--state-dir", t.TempDir(), "--log-level", "warn",
			"--input", p + "in", "--output", p + "out", "--dlq", p + "dlq", "--create-topics", "--partitions", "2", "--from-savepoint", dir}
		return runSluice(ctx, append(args, extra...)...)
	}
	out, err := run(bad)
	if !errors.Is(err, savepoint.ErrCorrupt) {
		t.Fatalf("run --from-savepoint (corrupt): %v, want savepoint.ErrCorrupt\n%s", err, out)
	}
	for _, s := range []string{filepath.Join(bad, app, "0_1", "old-counts"), "checksum", `store "old-counts" partition 1`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the refusal does not name %q: %v", s, err)
		}
	}
	_, err = run(good)
	if errors.Is(err, savepoint.ErrCorrupt) || !errors.Is(err, processor.ErrSavepointIncompatible) ||
		!strings.Contains(err.Error(), "--allow-dropped-state") {
		t.Fatalf("run --from-savepoint (intact, with a store the example lacks): %v, want the dropped-state refusal", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, app)
	if err == nil && len(offs) > 0 {
		t.Errorf("a refused start committed offsets: %v", offs)
	}
}
