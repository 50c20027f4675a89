//go:build unix

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/keyhash"
	"github.com/sluice-streams/sluice/internal/testkeys"
)

// The savepoint tests run real sluice processes: an application A runs and
// is SIGKILLed while the first part of the input arrives; `sluice savepoint
// create` stops it with a savepoint while more input is being written (so
// records are in flight in its repartition topic); a fork B, a new
// application id, starts from the savepoint with two processes and is
// SIGKILLed in turn while the rest arrives. What A wrote before the cut and
// B after it must be exactly what one uninterrupted run writes: the
// exactly-once checkers compute that from the input log alone.

// takeSavepoint runs `sluice savepoint create` for h's application and
// waits for every instance of h to stop on its own with exit status 0.
func takeSavepoint(t *testing.T, h *harness, dir string) {
	t.Helper()
	for _, inst := range h.instances {
		inst.signalled = true // their exit is the expected one
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, h.bin, "savepoint", "create", "--app-id", h.appID, "--to", dir,
		"--brokers", strings.Join(h.addrs, ","), "--timeout", "90s").CombinedOutput()
	if err != nil {
		t.Fatalf("sluice savepoint create: %v\n%s", err, out)
	}
	t.Logf("sluice savepoint create:\n%s", out)
	for _, inst := range h.instances {
		select {
		case <-inst.done:
			if inst.err != nil {
				t.Errorf("%s stopped with a savepoint but exited with %v", inst.id, inst.err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s still runs a minute after the stop-with-savepoint", inst.id)
		}
	}
	out, err = exec.Command(h.bin, "state", "ls", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("sluice state ls %s: %v\n%s", dir, err, out)
	}
	t.Logf("sluice state ls:\n%s", out)
}

// resetApp runs `sluice reset` for h's stopped application. Static
// members (--instance-id) stay in the group until their session times out
// (10 s), and reset refuses until then: it is retried for half a minute.
func resetApp(t *testing.T, h *harness) {
	t.Helper()
	for try := 0; ; try++ {
		out, err := exec.Command(h.bin, "reset", "--app-id", h.appID, "--brokers", strings.Join(h.addrs, ",")).CombinedOutput()
		if err == nil {
			return
		}
		if try == 15 || !strings.Contains(string(out), "live member") {
			t.Fatalf("sluice reset: %v\n%s", err, out)
		}
		time.Sleep(2 * time.Second)
	}
}

func TestSavepointForkBilling(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	if !forkBilling(t, true) {
		t.Error("the fork from the savepoint is not one exactly-once run")
	}
}

// TestSavepointForkBillingControl is the fork test's negative control: B
// starts as a new application without the savepoint, so it reads the input
// from its start with empty stores, and the checker must fail. Opt-in
// (SLUICE_CHAOS_NEGATIVE=1): it spends a minute proving the check can fail.
func TestSavepointForkBillingControl(t *testing.T) {
	if os.Getenv("SLUICE_CHAOS_NEGATIVE") != "1" {
		t.Skip("negative control; set SLUICE_CHAOS_NEGATIVE=1 to run it")
	}
	if forkBilling(t, false) {
		t.Error("a fork without the savepoint passed the check: the check cannot tell")
	}
}

// forkBilling runs A, the savepoint and B (from the savepoint, or without
// it) and reports whether the checker passed.
func forkBilling(t *testing.T, fromSavepoint bool) bool {
	cfg := chaosConfigFromEnv(t)
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 0x5a7e))
	bin := buildSluice(t)
	addrs := chaosBrokers(t)
	topics := DefaultTopics()
	createTopics(t, addrs, chaosPartitions, topics.Input, topics.Accepted, topics.Totals, topics.DLQ)
	bills := GenerateBills(cfg.seed, 20_000, 200)
	half := len(bills) / 2
	run := []string{"run", "billing", "--max-record-bytes", strconv.Itoa(BillingMaxRecordBytes)}
	finishBy := time.Now().Add(8 * time.Minute)

	a := newHarness(t, bin, addrs, fmt.Sprintf("billing-sp-a-%d", cfg.seed&0xffff), cfg.guarantee, false, run, t.TempDir(), 2)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	first := make(chan produceResult, 1)
	go produceInChunks(ctx, addrs, topics.Input, bills[:half], 4, time.Second, first)
	in1, _ := a.chaos(rng, 2, first, finishBy)

	// The rest starts arriving now; the savepoint is taken under it.
	second := make(chan produceResult, 1)
	go produceInChunks(ctx, addrs, topics.Input, bills[half:], 6, 700*time.Millisecond, second)
	dir := filepath.Join(t.TempDir(), "savepoint")
	takeSavepoint(t, a, dir)

	runB := slices.Clone(run)
	if fromSavepoint {
		runB = append(runB, "--from-savepoint", dir, "--allow-other-app")
	}
	b := newHarness(t, bin, addrs, fmt.Sprintf("billing-sp-b-%d", cfg.seed&0xffff), cfg.guarantee, false, runB, t.TempDir(), 2)
	in2, _ := b.chaos(rng, 2, second, finishBy)
	b.waitFinished(finishBy, topics.Input, topics.outputs())
	b.stopAll(time.Minute)

	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := CheckBillingFork(cctx, addrs, topics, append(in1, in2...), a.appID, b.appID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %s", cfg.seed, rep)
	return rep.OK()
}

func TestSavepointForkPageViews(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	savepointPageViews(t, false)
}

// TestSavepointUpgradePageViews is the upgrade recipe: stop with a
// savepoint, `sluice reset` the application (what it leaves has no state),
// and start the same application id from the savepoint.
func TestSavepointUpgradePageViews(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	savepointPageViews(t, true)
}

// savepointPageViews runs A, stops it with a savepoint and goes on as B:
// a fork (a new application id), or with upgrade the same id after a reset.
func savepointPageViews(t *testing.T, upgrade bool) {
	cfg := chaosConfigFromEnv(t)
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 0x5a7f))
	bin := buildSluice(t)
	addrs := chaosBrokers(t)
	topics := DefaultPageViewTopics()
	createTopics(t, addrs, chaosPartitions, append([]string{topics.Input}, topics.outputs()...)...)
	gen := GeneratePageViews(cfg.seed, 20_000, chaosPartitions)
	half := len(gen) / 2
	finishBy := time.Now().Add(8 * time.Minute)
	run := func(app string, extra ...string) *harness {
		args := append([]string{"run", "pageviews", "--input", topics.Input, "--per-minute", topics.PerMinute,
			"--late", topics.Late, "--sessions", topics.Sessions, "--dlq", topics.DLQ}, extra...)
		return newHarness(t, bin, addrs, app, cfg.guarantee, false, args, t.TempDir(), 2)
	}
	produce := func(ctx context.Context, rs []GenRecord, chunks int, every time.Duration, out chan<- produceResult) {
		var all []InputRecord
		size := (len(rs) + chunks - 1) / chunks
		for i := 0; i < len(rs); i += size {
			in, err := ProduceKeyed(ctx, addrs, topics.Input, rs[i:min(i+size, len(rs))])
			if err != nil {
				out <- produceResult{err: err}
				return
			}
			all = append(all, in...)
			select {
			case <-ctx.Done():
				out <- produceResult{err: ctx.Err()}
				return
			case <-time.After(every):
			}
		}
		out <- produceResult{input: all}
	}

	a := run(fmt.Sprintf("pageviews-sp-a-%d", cfg.seed&0xffff))
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	first := make(chan produceResult, 1)
	go produce(ctx, gen[:half], 4, time.Second, first)
	in1, _ := a.chaos(rng, 2, first, finishBy)
	second := make(chan produceResult, 1)
	go produce(ctx, gen[half:], 6, 700*time.Millisecond, second)
	dir := filepath.Join(t.TempDir(), "savepoint")
	takeSavepoint(t, a, dir)

	var b *harness
	if upgrade {
		resetApp(t, a)
		b = run(a.appID, "--from-savepoint", dir)
	} else {
		b = run(fmt.Sprintf("pageviews-sp-b-%d", cfg.seed&0xffff), "--from-savepoint", dir, "--allow-other-app")
	}
	in2, _ := b.chaos(rng, 2, second, finishBy)
	b.waitFinished(finishBy, topics.Input, topics.outputs())
	b.stopAll(time.Minute)

	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exp := ExpectPageViews(append(in1, in2...))
	out, err := ReadOutputs(cctx, addrs, topics.outputs())
	if err != nil {
		t.Fatal(err)
	}
	if v := CheckPageViews(topics, exp, out); len(v) > 0 {
		t.Errorf("the fork from the savepoint is not one exactly-once run (seed %d):\n%s", cfg.seed, joinLines(v))
	}
}

// TestSavepointRescalePageViews rescales pageviews from a savepoint: A
// reads a 4-partition input, `sluice savepoint create` stops it, the input
// grows to 8 partitions (Kafka keeps the records' partitions and hashes new
// ones over 8), and B starts from the savepoint with its repartition topic
// and stores on 8 partitions. Every window and session open at the cut is
// moved to the task that owns its key under 8, with the time state merged,
// and must continue exactly: the per-minute counts and the sessions equal
// a computation over the whole input that knows nothing of partitions.
// The views are out of order only within the watermark's bound (the
// generator's far-late views are left out), so no view's lateness depends
// on the partitioning (internal/rescale's doc says why it could).
func TestSavepointRescalePageViews(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	if v := rescalePageViews(t, true); len(v) > 0 {
		t.Errorf("after rescaling 4 → 8 from the savepoint:\n%s", joinLines(v))
	}
}

// TestSavepointRescalePageViewsControl is its negative control: B starts
// on the 8 partitions without the savepoint, and the check must fail.
// Opt-in (SLUICE_CHAOS_NEGATIVE=1).
func TestSavepointRescalePageViewsControl(t *testing.T) {
	if os.Getenv("SLUICE_CHAOS_NEGATIVE") != "1" {
		t.Skip("negative control; set SLUICE_CHAOS_NEGATIVE=1 to run it")
	}
	if v := rescalePageViews(t, false); len(v) == 0 {
		t.Error("a rescaled run without the savepoint passed the check: the check cannot tell")
	}
}

func rescalePageViews(t *testing.T, fromSavepoint bool) []string {
	cfg := chaosConfigFromEnv(t)
	bin := buildSluice(t)
	addrs := chaosBrokers(t)
	topics := DefaultPageViewTopics()
	createTopics(t, addrs, 4, append([]string{topics.Input}, topics.outputs()...)...)
	var views []GenRecord
	maxTS := int64(0)
	gen := GeneratePageViews(cfg.seed, 16_000, 4)
	for _, r := range gen[:len(gen)-4] { // not its end markers: ours come below
		var v struct {
			TS int64 `json:"ts"`
		}
		if json.Unmarshal(r.Value, &v) == nil {
			if v.TS < maxTS-pvBound-5_000 {
				continue // far late
			}
			maxTS = max(maxTS, v.TS)
		}
		views = append(views, GenRecord{Partition: -1, Key: r.Key, Value: r.Value})
	}
	// One view per partition of 8, far in the future, so that every
	// partition's watermark passes the rest.
	var markers []GenRecord
	for i, seen := 0, map[int32]bool{}; len(seen) < 8 && i < 10_000; i++ {
		user := "end-" + strconv.Itoa(i)
		if p := keyhash.Partition([]byte(user), 8); !seen[p] {
			seen[p] = true
			markers = append(markers, GenRecord{Partition: -1, Key: []byte(user),
				Value: mustMarshal(map[string]any{"user": user, "page": "/end", "ts": maxTS + 3*pvGap})})
		}
	}
	run := func(app string, extra ...string) *harness {
		args := append([]string{"run", "pageviews", "--input", topics.Input, "--per-minute", topics.PerMinute,
			"--late", topics.Late, "--sessions", topics.Sessions, "--dlq", topics.DLQ}, extra...)
		return newHarness(t, bin, addrs, app, cfg.guarantee, false, args, t.TempDir(), 2)
	}
	ctx := testContext(t, 8*time.Minute)
	half := len(views) / 2
	in1, err := ProduceKeyed(ctx, addrs, topics.Input, views[:half])
	if err != nil {
		t.Fatal(err)
	}
	a := run(fmt.Sprintf("pageviews-rs-a-%d", cfg.seed&0xffff))
	a.waitFinished(time.Now().Add(3*time.Minute), topics.Input, topics.outputs())
	dir := filepath.Join(t.TempDir(), "savepoint")
	takeSavepoint(t, a, dir)

	if _, err := newAdmin(t, addrs).CreatePartitions(ctx, 4, topics.Input); err != nil {
		t.Fatalf("growing %s to 8 partitions: %v", topics.Input, err)
	}
	in2, err := ProduceKeyed(ctx, addrs, topics.Input, append(slices.Clone(views[half:]), markers...))
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	if fromSavepoint {
		extra = []string{"--from-savepoint", dir, "--allow-other-app"}
	}
	b := run(fmt.Sprintf("pageviews-rs-b-%d", cfg.seed&0xffff), extra...)
	b.waitFinished(time.Now().Add(4*time.Minute), topics.Input, topics.outputs())
	b.stopAll(time.Minute)

	out, err := ReadOutputs(ctx, addrs, topics.outputs())
	if err != nil {
		t.Fatal(err)
	}
	exp := expectUnpartitioned(append(in1, in2...), maxTS+3*pvGap-pvBound-1)
	t.Logf("expected: %d closed minutes, %d closed sessions, %d unreadable views", len(exp.PerMinute), len(exp.Sessions), len(exp.Dead))
	if len(exp.PerMinute) == 0 || len(exp.Sessions) == 0 || len(exp.Dead) == 0 {
		t.Fatal("the input does not exercise every output")
	}
	return CheckPageViews(topics, exp, out)
}

// expectUnpartitioned is the pageviews oracle for input without late views,
// computed over the whole input regardless of partitions: every minute's
// count per page and every user's sessions (views within the gap of each
// other merge), those that close below the final watermark wm.
func expectUnpartitioned(input []InputRecord, wm int64) PageViewExpectation {
	exp := PageViewExpectation{PerMinute: map[string]int64{}, Sessions: map[string]int64{}, Late: map[string]int{}, Dead: map[string]bool{}}
	byUser := map[string][]int64{}
	for _, r := range input {
		v, ok := parsePageView(r.Value)
		if !ok {
			exp.Dead[fmt.Sprintf("%d@%d", r.Partition, r.Offset)] = true
			continue
		}
		if start := v.TS - v.TS%pvWindow; start+pvWindow-1+pvLateness <= wm {
			exp.PerMinute[v.Page+"|"+strconv.FormatInt(start, 10)]++
		}
		byUser[string(r.Key)] = append(byUser[string(r.Key)], v.TS)
	}
	for user, ts := range byUser {
		slices.Sort(ts)
		first, last, n := ts[0], ts[0], int64(1)
		closeSession := func() {
			if last+pvGap+pvLateness <= wm {
				exp.Sessions[fmt.Sprintf("%s|%d|%d", user, first, last)] = n
			}
		}
		for _, x := range ts[1:] {
			if x <= last+pvGap {
				last, n = x, n+1
				continue
			}
			closeSession()
			first, last, n = x, x, 1
		}
		closeSession()
	}
	return exp
}

// TestSavepointMigrateWordCount is the migrate recipe with real processes:
// wordcount (its store "counts" holding 8-byte counts) runs and stops with
// a savepoint; after `sluice reset`, wordcount-v2 (the same counts held as
// decimal text, with the store's migration registered) starts the same
// application from the savepoint. Every word's counts must go on from where
// they were: per word, the counts written are strictly increasing across
// both versions and end at the word's count in the whole input. A store
// that came back empty would count from 1 again; one whose 8-byte values
// were read as text would not decode.
func TestSavepointMigrateWordCount(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sluice processes for about a minute")
	}
	cfg := chaosConfigFromEnv(t)
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 0x5a80))
	bin := buildSluice(t)
	addrs := startBroker(t)
	prefix := uniquePrefix(t)
	in, out, dlq := prefix+"lines", prefix+"counts", prefix+"lines-dlq"
	createTopics(t, addrs, 4, in, out, dlq)
	// Words of every length and UUIDs, lower-case (wordcount lower-cases),
	// and now and then a line that is not UTF-8 (dead-lettered).
	var vocab []string
	for _, k := range append(testkeys.Lengths(), testkeys.UUIDs(20)...) {
		if w := strings.Fields(strings.ToLower(k)); len(w) == 1 && w[0] == k {
			vocab = append(vocab, k)
		}
	}
	var lines []GenRecord
	want := map[string]int64{}
	for i := range 6000 {
		if i%300 == 7 {
			lines = append(lines, GenRecord{Partition: -1, Value: []byte{0xff, 0xfe, 'x'}})
			continue
		}
		var ws []string
		for range 1 + rng.IntN(6) {
			w := vocab[rng.IntN(len(vocab))]
			ws = append(ws, w)
			want[w]++
		}
		lines = append(lines, GenRecord{Partition: -1, Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Join(ws, " "))})
	}
	run := func(example string, extra ...string) *harness {
		args := append([]string{"run", example, "--input", in, "--output", out, "--dlq", dlq}, extra...)
		return newHarness(t, bin, addrs, prefix+"wc", cfg.guarantee, false, args, t.TempDir(), 2)
	}
	ctx := testContext(t, 8*time.Minute)
	half := len(lines) / 2
	if _, err := ProduceKeyed(ctx, addrs, in, lines[:half]); err != nil {
		t.Fatal(err)
	}
	a := run("wordcount")
	a.waitFinished(time.Now().Add(3*time.Minute), in, []string{out, dlq})
	dir := filepath.Join(t.TempDir(), "savepoint")
	takeSavepoint(t, a, dir)
	before, err := ReadOutputs(ctx, addrs, []string{out})
	if err != nil {
		t.Fatal(err)
	}
	resetApp(t, a)
	if _, err := ProduceKeyed(ctx, addrs, in, lines[half:]); err != nil {
		t.Fatal(err)
	}
	b := run("wordcount-v2", "--from-savepoint", dir)
	b.waitFinished(time.Now().Add(4*time.Minute), in, []string{out, dlq})
	b.stopAll(time.Minute)
	after, err := ReadOutputs(ctx, addrs, []string{out})
	if err != nil {
		t.Fatal(err)
	}
	if v := checkCounts(after[out], want); len(v) > 0 {
		t.Errorf("the counts did not go on across the migration:\n%s", joinLines(v))
	}
	// Negative control: what wordcount wrote before the savepoint is not
	// the whole input's count, and the check says so.
	if v := checkCounts(before[out], want); len(v) == 0 {
		t.Error("the first half's counts passed as the whole input's: the check cannot tell")
	}
}

// checkCounts requires each word's counts, in the order written, to be
// strictly increasing decimal numbers ending at want's count, and no other
// word.
func checkCounts(rs []OutRecord, want map[string]int64) []string {
	var v []string
	last := map[string]int64{}
	for _, r := range rs {
		n, err := strconv.ParseInt(string(r.Value), 10, 64)
		switch {
		case err != nil:
			v = append(v, fmt.Sprintf("word %q: count %q is not decimal", clip(r.Key), clip(r.Value)))
		case n <= last[string(r.Key)]:
			v = append(v, fmt.Sprintf("word %q: count %d after %d", clip(r.Key), n, last[string(r.Key)]))
		default:
			last[string(r.Key)] = n
		}
	}
	for _, w := range sortedKeys(want) {
		if last[w] != want[w] {
			v = append(v, fmt.Sprintf("word %q: last count %d, want %d", clipString(w), last[w], want[w]))
		}
	}
	for w := range last {
		if _, ok := want[w]; !ok {
			v = append(v, fmt.Sprintf("word %q was never in the input", clipString(w)))
		}
	}
	return v[:min(len(v), 30)]
}
