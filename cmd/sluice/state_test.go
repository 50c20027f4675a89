package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/internal/broker"
	"github.com/sluice-streams/sluice/internal/filesnap"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/state"
	"github.com/sluice-streams/sluice/store"
)

// stateRun is one in-process `sluice run` of an example on the test broker.
type stateRun struct {
	addrs []string
	appID string
	root  string // state.dir
	stop  context.CancelFunc
	done  chan error
}

// startExample runs example with args (topic flags) under a fresh state
// dir until stopped.
func startExample(t *testing.T, addrs []string, example, appID string, args ...string) *stateRun {
	t.Helper()
	r := &stateRun{addrs: addrs, appID: appID, root: t.TempDir(), done: make(chan error, 1)}
	var ctx context.Context
	ctx, r.stop = context.WithCancel(t.Context())
	root := newRootCmd()
	root.SetArgs(append([]string{"run", example, "--app-id", appID, "--brokers", strings.Join(r.addrs, ","),
		"--state-dir", r.root, "--log-level", "error", "--commit-interval", "100ms"}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	go func() { r.done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() { r.stop(); <-r.done })
	return r
}

// stopClean stops the instance (a clean shutdown commits) and fails on its
// error.
func (r *stateRun) stopClean(t *testing.T) {
	t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		r.done <- nil // for the cleanup
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the instance did not stop in 30s")
	}
}

// waitConsumed waits until the group has committed every partition of the
// topics to their end: user topics exactly, internal (transactional) ones
// up to their last commit marker.
func (r *stateRun) waitConsumed(t *testing.T, user []string, internal []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ok := true
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		ends, err1 := adm.ListEndOffsets(ctx, append(append([]string{}, user...), internal...)...)
		committed, err2 := adm.FetchOffsets(ctx, r.appID)
		cancel()
		if err1 != nil || err2 != nil {
			ok = false
		} else {
			isUser := map[string]bool{}
			for _, u := range user {
				isUser[u] = true
			}
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err != nil {
					ok = false // an end not known is no end reached
					return
				}
				if o.Offset == 0 {
					return
				}
				c, found := committed.Lookup(o.Topic, o.Partition)
				slack := int64(1)
				if isUser[o.Topic] {
					slack = 0
				}
				if !found || c.At < o.Offset-slack {
					ok = false
				}
			})
		}
		if ok {
			return
		}
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("the instance stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group did not consume its inputs in time: %v %v", err1, err2)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func produceAll(t *testing.T, addrs []string, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// stateCmd runs `sluice state args...`.
func stateCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(append([]string{"state"}, args...))
	err := root.ExecuteContext(testCtx(t))
	return out.String(), err
}

// snapshot is every file under dir: what a read-only tool must leave as
// it was.
func snapshot(t *testing.T, dir string) filesnap.Snapshot {
	t.Helper()
	s, err := filesnap.Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sameSnapshot(a, b filesnap.Snapshot) error {
	if d := filesnap.Diff(a, b); d != "" {
		return errors.New(d)
	}
	return nil
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStateToolsWordcount runs wordcount over words of every length and
// UUIDs, stops it, and reads the counts back through the CLI and the Go
// reader: they equal the oracle computed from the input. While the
// instance runs its directory is refused; reading a stopped one leaves
// every file as it was; a missing store or key and a corrupt store are
// clear errors.
func TestStateToolsWordcount(t *testing.T) {
	in := testbroker.Unique(t, "st-lines-")
	app := "sluice-wordcount" // the default id: the tool finds the example by it
	var ex []string
	if len(testbroker.External()) > 0 { // a shared cluster: an id of this run's own, the example named
		app, ex = testbroker.Unique(t, "st-wc-"), []string{"--example", "wordcount"}
	}
	wc := func(args ...string) (string, error) { return stateCmd(t, append(args, ex...)...) }
	ctx := testCtx(t)
	addrs := testbroker.Addrs(t)
	for _, tp := range []string{in, in + "-out", in + "-dlq"} {
		if err := broker.CreateTopic(ctx, addrs, tp, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Lines: each test key (every length 0..140, mixed 1-4 byte runes)
	// and 50 UUIDs, repeated 1-3 times, some two to a line.
	oracle := map[string]int64{}
	var recs []*kgo.Record
	lines := append(testkeys.Lengths(), testkeys.UUIDs(50)...)
	for i, line := range lines {
		if i%7 == 0 && i+1 < len(lines) {
			line += " " + lines[i+1]
		}
		for range i%3 + 1 {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte(line)})
			for _, w := range examples.Words(line) {
				oracle[w]++
			}
		}
	}
	run := startExample(t, addrs, "wordcount", app, "--input", in, "--output", in+"-out", "--dlq", in+"-dlq")
	produceAll(t, addrs, recs)
	run.waitConsumed(t, []string{in}, []string{app + "-counts-repartition"})

	appDir := filepath.Join(run.root, app)
	// Running: refused, by the CLI and by the Go reader.
	if _, err := wc("ls", appDir); err == nil || !strings.Contains(err.Error(), "running") {
		t.Fatalf("state ls of a running instance's dir: %v, want a refusal", err)
	}
	if _, err := state.Open(run.root); !errors.Is(err, state.ErrInUse) {
		t.Fatalf("Open of a running instance's root: %v, want ErrInUse", err)
	}
	run.stopClean(t)

	before := snapshot(t, run.root)
	// ls: every store, counts summing to the oracle's keys.
	out, err := wc("ls", run.root, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var records int64
	var parts int
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var s state.StoreInfo
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		if s.Store == "counts" {
			parts++
			records += s.Records
			if s.Layout != "key-value" || s.ChangelogOffset < 0 || s.SizeBytes <= 0 {
				t.Errorf("store %+v: want a key-value store with a checkpoint and a size", s)
			}
		}
	}
	if err := sameSnapshot(before, snapshot(t, run.root)); err != nil {
		t.Fatalf("state ls changed the state dir: %v", err)
	}
	if parts != 3 || records != int64(len(oracle)) {
		t.Fatalf("ls: %d partitions of counts holding %d records, want 3 holding %d:\n%s", parts, records, len(oracle), out)
	}
	// dump: decoded through the example's serdes.
	out, err = wc("dump", appDir, "counts", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	dec = json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e struct {
			Key       string
			Value     int64
			KeyBase64 string `json:"key_base64"`
		}
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		if kb, _ := base64.StdEncoding.DecodeString(e.KeyBase64); string(kb) != e.Key {
			t.Fatalf("key %q, key_base64 %q", e.Key, e.KeyBase64)
		}
		got[e.Key] += e.Value
	}
	if err := sameCounts(got, oracle); err != nil {
		t.Fatalf("state dump: %v", err)
	}
	// Negative control: the checker sees one count off.
	for k := range oracle {
		got[k]++
		if sameCounts(got, oracle) == nil {
			t.Fatal("sameCounts missed a count off by one")
		}
		got[k]--
		break
	}
	if out, err := wc("dump", appDir, "counts", "--limit", "5"); err != nil || strings.Count(out, "\n") != 5 {
		t.Fatalf("dump --limit 5: %v\n%s", err, out)
	}
	// get: every key of every length, by its text and by its base64.
	for _, w := range []string{examples.Words(testkeys.Len(1, 0))[0], examples.Words(testkeys.Len(140, 0))[0], testkeys.UUIDs(1)[0]} {
		out, err := wc("get", appDir, "counts", w)
		if want := fmt.Sprintf("\t%s\t%d\n", w, oracle[w]); err != nil || !strings.HasSuffix(out, want) {
			t.Fatalf("get %q: %v %q, want ...%q", w, err, out, want)
		}
		out, err = wc("get", appDir, "counts", "--key-base64", base64.StdEncoding.EncodeToString([]byte(w)))
		if want := fmt.Sprintf("\t%s\t%d\n", w, oracle[w]); err != nil || !strings.HasSuffix(out, want) {
			t.Fatalf("get --key-base64 %q: %v %q", w, err, out)
		}
	}
	// The Go reader, typed through the caller's serdes.
	r, err := state.Open(run.root)
	if err != nil {
		t.Fatal(err)
	}
	got = map[string]int64{}
	if err := state.KeyValues(r, "counts", serde.String, serde.Int64, func(kv state.KeyValue[string, int64]) error {
		got[kv.Key] += kv.Value
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := sameCounts(got, oracle); err != nil {
		t.Fatalf("state.KeyValues: %v", err)
	}
	uuid := testkeys.UUIDs(1)[0]
	if n, err := state.Lookup(r, "counts", serde.String, serde.Int64, uuid); err != nil || n != oracle[uuid] {
		t.Fatalf("Lookup(%q) = %d, %v; want %d", uuid, n, err, oracle[uuid])
	}
	if _, err := state.Lookup(r, "counts", serde.String, serde.Int64, "no-such-word"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Lookup of a missing key: %v, want ErrNotFound", err)
	}
	r.Close()
	// Missing store and key: clear errors.
	if _, err := wc("dump", appDir, "no-such-store"); err == nil || !strings.Contains(err.Error(), `no such store: "no-such-store" (have counts`) {
		t.Fatalf("dump of a missing store: %v", err)
	}
	if _, err := wc("get", appDir, "counts", "no-such-word"); err == nil || !strings.Contains(err.Error(), `key not found: key "no-such-word" in store "counts"`) {
		t.Fatalf("get of a missing key: %v", err)
	}
	if _, err := wc("ls", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a state directory") {
		t.Fatalf("ls of an empty dir: %v", err)
	}
	// Nothing was written by any of it.
	if err := sameSnapshot(before, snapshot(t, run.root)); err != nil {
		t.Fatalf("the state tools changed the state dir: %v", err)
	}
	// Negative control: opening a copy read-write (as an instance does)
	// is seen by the snapshot.
	cp := t.TempDir()
	copyDir(t, run.root, cp)
	cpBefore := snapshot(t, cp)
	eng, err := store.OpenPebble(filepath.Join(cp, app, "1_0", "counts"))
	if err != nil {
		t.Fatal(err)
	}
	eng.Close()
	if sameSnapshot(cpBefore, snapshot(t, cp)) == nil {
		t.Fatal("the snapshot missed a read-write open")
	}
	// A corrupt store: an error naming the store's directory and file.
	storeDir := filepath.Join(cp, app, "1_0", "counts")
	manifests, _ := filepath.Glob(filepath.Join(storeDir, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("no MANIFEST in the store")
	}
	for _, m := range manifests {
		b, _ := os.ReadFile(m)
		for i := range b {
			b[i] ^= 0x5a
		}
		if err := os.WriteFile(m, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = wc("ls", cp)
	if err == nil || !strings.Contains(err.Error(), storeDir) || !strings.Contains(err.Error(), "MANIFEST") {
		t.Fatalf("ls of a corrupt store: %v, want an error naming %s and its MANIFEST", err, storeDir)
	}
	t.Logf("corrupt store: %v", err)
}

func sameCounts(got, want map[string]int64) error {
	for k, n := range want {
		if got[k] != n {
			return fmt.Errorf("key %q (%d bytes): %d, want %d", k, len(k), got[k], n)
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("key %q: %d, not in the input", k, n)
		}
	}
	return nil
}
