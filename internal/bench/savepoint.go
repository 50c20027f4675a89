package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/state"
	"github.com/sluice-streams/sluice/txn"
)

// The savepoint scenario (issue 19, "Performance"): how fast a savepoint
// of a key-value store is taken and started from, next to a restore from
// the changelog, in one invocation on one broker. It is not in Scenarios:
// it is not a throughput run under two guarantees, and at the sizes that
// matter (millions of keys) it is slow; `sluice bench --only savepoint`
// runs it alone (RunSavepoint).

// SavepointScenario is the name `sluice bench --only` knows it by.
const SavepointScenario = "savepoint"

// The phases of RunSavepoint, in run order, as Result.Scenario.
const (
	SavepointPhaseLoad    = "savepoint-load"    // count N distinct keys (the store to save)
	SavepointPhaseRestore = "savepoint-restore" // a fresh instance restoring the store from its changelog
	SavepointPhaseTake    = "savepoint-take"    // TakeSavepoint with stop
	SavepointPhaseStart   = "savepoint-start"   // a fork from the savepoint: seed, then restore
	// SavepointPhaseSeed is the part of SavepointPhaseStart until the seed
	// transaction committed (from the instance's log line); its CPU is not
	// separated from the start's.
	SavepointPhaseSeed = "savepoint-start-seed"
)

// seedClock is a slog handler that passes records on and notes when the
// instance logged that the seed committed.
type seedClock struct {
	slog.Handler
	at *atomic.Pointer[time.Time]
}

func (h seedClock) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "seeded the application from the savepoint" {
		now := time.Now()
		h.at.Store(&now)
	}
	return h.Handler.Handle(ctx, r)
}

func (h seedClock) WithAttrs(as []slog.Attr) slog.Handler {
	return seedClock{h.Handler.WithAttrs(as), h.at}
}

func (h seedClock) WithGroup(name string) slog.Handler {
	return seedClock{h.Handler.WithGroup(name), h.at}
}

// SavepointResult is the savepoint scenario's measurement: one Result per
// phase (Records is the number of keys), and the savepoint's size.
type SavepointResult struct {
	Phases []Result `json:"phases"`
	// Bytes is the savepoint directory's size on disk (apparent sizes of
	// its files, the manifest included).
	Bytes int64 `json:"savepoint_bytes"`
}

// savepointTimeout bounds each phase: 10,000,000 keys on a loaded
// two-CPU machine take minutes per phase.
const savepointTimeout = 30 * time.Minute

// savepointChunk is how many input records RunSavepoint makes and produces
// at a time.
const savepointChunk = 1 << 20

// RunSavepoint loads cfg.Records distinct keys into a count store on a
// fresh embedded broker (exactly_once), then measures, each from a start
// to the state being usable: (1) a fresh instance with an empty state
// directory restoring the store from its changelog until it is ready;
// (2) TakeSavepoint stopping that instance; (3) a fork (FromSavepoint,
// AllowOtherApp, a new application id) seeding its changelog from the
// savepoint and restoring until it is ready. After each, the store it
// left (the restored state directory, the savepoint, the fork's state
// directory) must hold exactly the keys, each counted once.
func RunSavepoint(ctx context.Context, cfg Config) (SavepointResult, error) {
	var out SavepointResult
	n := cfg.Records
	if n <= 0 {
		return out, errors.New("bench: savepoint: records must be positive")
	}
	addrs, stopBroker, err := startBroker(ctx, cfg)
	if err != nil {
		return out, err
	}
	defer stopBroker()
	// In chunks: 10,000,000 records held at once would take gigabytes.
	for from := 0; from < n; from += savepointChunk {
		recs, _ := unique(min(savepointChunk, n-from), nil)
		for i, r := range recs {
			r.Key = fmt.Appendf(r.Key[:0], "%010d", from+i)
		}
		if err := preload(ctx, addrs, recs); err != nil {
			return out, err
		}
	}
	dir, err := os.MkdirTemp("", "sluice-bench-savepoint-")
	if err != nil {
		return out, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	const app, fork = "bench-sp", "bench-sp-fork"
	opts := func(appID, stateDir string, more ...processor.Opt) []processor.Opt {
		return append([]processor.Opt{processor.ApplicationID(appID), processor.Brokers(addrs...),
			processor.Guarantee(txn.ExactlyOnce), processor.CommitInterval(cfg.CommitInterval),
			processor.StateDir(stateDir), processor.TransactionTimeout(10 * time.Minute)}, more...)
	}
	phase := func(name, note string, took time.Duration, cpu time.Duration) Result {
		return Result{Scenario: name, Guarantee: txn.ExactlyOnce.String(), Records: n,
			Seconds: took.Seconds(), PerSecond: float64(n) / took.Seconds(),
			CPUMicrosPerRecord: float64(cpu.Microseconds()) / float64(n), Note: note}
	}
	pctx, cancel := context.WithTimeout(ctx, savepointTimeout)
	defer cancel()

	// Load: count the keys, one changelog record each.
	cpu0, start := cpuTime(), time.Now()
	stop, a, wctx, err := start0(pctx, opts(app, filepath.Join(dir, "load")))
	if err != nil {
		return out, err
	}
	_, werr := waitCommitted(wctx, a.Stats().Processed.Load, int64(n))
	if err := stop(); werr == nil {
		werr = err
	}
	if werr != nil {
		return out, fmt.Errorf("bench: savepoint: load: %w", werr)
	}
	out.Phases = append(out.Phases, phase(SavepointPhaseLoad, "count N distinct keys from the input (the store to save)", time.Since(start), cpuTime()-cpu0))
	if err := verifySavedCounts(filepath.Join(dir, "load"), n); err != nil {
		return out, fmt.Errorf("bench: savepoint: the loaded state: %w", err)
	}

	// (1) Restore from the changelog into an empty state directory.
	restored := filepath.Join(dir, "restored")
	cpu0, start = cpuTime(), time.Now()
	stop, a, wctx, err = start0(pctx, opts(app, restored))
	if err != nil {
		return out, err
	}
	if err := waitReady(wctx, a, int64(n)); err != nil {
		stop()
		return out, fmt.Errorf("bench: savepoint: restore: %w", err)
	}
	out.Phases = append(out.Phases, phase(SavepointPhaseRestore, "a fresh instance restoring the store from its changelog until ready", time.Since(start), cpuTime()-cpu0))

	// (2) Take a savepoint, stopping that instance.
	sp := filepath.Join(dir, "sp")
	cpu0, start = cpuTime(), time.Now()
	_, err = processor.TakeSavepoint(pctx, app, sp, processor.Brokers(addrs...), processor.SavepointTimeout(savepointTimeout))
	took, cpu := time.Since(start), cpuTime()-cpu0
	if serr := stop(); err == nil {
		err = serr
	}
	if err != nil {
		return out, fmt.Errorf("bench: savepoint: take: %w", err)
	}
	if out.Bytes, err = dirBytes(sp); err != nil {
		return out, err
	}
	out.Phases = append(out.Phases, phase(SavepointPhaseTake, fmt.Sprintf("TakeSavepoint with stop: the stores checkpointed by the instance (copied from their changelogs on main); %.1f MiB on disk", float64(out.Bytes)/(1<<20)), took, cpu))
	if err := verifySavedCounts(restored, n); err != nil {
		return out, fmt.Errorf("bench: savepoint: the restored state: %w", err)
	}
	if err := verifySavedCounts(sp, n); err != nil {
		return out, fmt.Errorf("bench: savepoint: the savepoint: %w", err)
	}

	// (3) Start a fork from the savepoint.
	forked := filepath.Join(dir, "fork")
	cpu0, start = cpuTime(), time.Now()
	var seeded atomic.Pointer[time.Time]
	logger := slog.New(seedClock{slog.Default().Handler(), &seeded})
	stop, a, wctx, err = start0(pctx, opts(fork, forked, processor.FromSavepoint(sp), processor.AllowOtherApp(), processor.Logger(logger)))
	if err != nil {
		return out, err
	}
	werr = waitReady(wctx, a, int64(n))
	took, cpu = time.Since(start), cpuTime()-cpu0
	if err := stop(); werr == nil {
		werr = err
	}
	if werr != nil {
		return out, fmt.Errorf("bench: savepoint: start: %w", werr)
	}
	out.Phases = append(out.Phases, phase(SavepointPhaseStart, "a fork from the savepoint: seed its changelog, then take the copies in or restore, until ready", took, cpu))
	if at := seeded.Load(); at != nil {
		seed := phase(SavepointPhaseSeed, fmt.Sprintf("of the start: open and verify the savepoint, seed its changelog; the rest (%.2f s) is the tasks' take-in and restore", took.Seconds()-at.Sub(start).Seconds()), at.Sub(start), 0)
		seed.CPUMicrosPerRecord = 0
		out.Phases = append(out.Phases, seed)
	}
	if err := verifySavedCounts(forked, n); err != nil {
		return out, fmt.Errorf("bench: savepoint: the fork's state: %w", err)
	}
	for i := range out.Phases {
		out.Phases[i].Note += "; verified: exactly N keys, each counted once"
	}
	return out, nil
}

// start0 runs the count topology until stop. wctx ends when the job
// stops by itself (its error as the cause), so that a wait on it does not
// outlive a failed job.
func start0(ctx context.Context, opts []processor.Opt) (stop func() error, a *processor.App, wctx context.Context, err error) {
	wctx, exited := context.WithCancelCause(ctx)
	stopApp, a, err := start(ctx, countTopology(), func(err error) {
		exited(fmt.Errorf("bench: the job stopped: %v", err))
	}, opts...)
	if err != nil {
		exited(nil)
		return nil, nil, nil, err
	}
	return func() error { defer exited(nil); return stopApp() }, a, wctx, nil
}

// waitReady waits until a has restored at least n changelog records and
// is ready (every task it owns restored and running).
func waitReady(ctx context.Context, a *processor.App, n int64) error {
	for {
		if a.Stats().Restored.Load() >= n && a.Status().Ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restored %d of %d records: %w", a.Stats().Restored.Load(), n, context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// verifySavedCounts reads the count store in dir (a state directory or a
// savepoint) and checks it holds exactly the keys unique made for n, each
// counted once.
func verifySavedCounts(dir string, n int) error {
	r, err := state.Open(dir, state.WithTopology(countTopology()))
	if err != nil {
		return err
	}
	defer r.Close()
	return checkCounts(n, func(fn func(k string, v int64) error) error {
		return state.KeyValues(r, "counts", serde.String, serde.Int64, func(kv state.KeyValue[string, int64]) error {
			return fn(kv.Key, kv.Value)
		})
	})
}

// checkCounts checks that each yields exactly the keys "%010d" of 0..n-1,
// each once and with the value 1. A bitset, not a map: 10,000,000 keys.
func checkCounts(n int, each func(fn func(k string, v int64) error) error) error {
	seen := make([]uint64, (n+63)/64)
	got := 0
	err := each(func(k string, v int64) error {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= n || len(k) != 10 {
			return fmt.Errorf("unexpected key %q", k)
		}
		if seen[i/64]&(1<<(i%64)) != 0 {
			return fmt.Errorf("key %q twice", k)
		}
		seen[i/64] |= 1 << (i % 64)
		if v != 1 {
			return fmt.Errorf("key %q counted %d times, want 1", k, v)
		}
		got++
		return nil
	})
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%d keys, want %d", got, n)
	}
	return nil
}

// dirBytes is the sum of the sizes of the regular files under dir.
func dirBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	return total, nil
}
