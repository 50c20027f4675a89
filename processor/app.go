package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
)

// ErrDataLoss is returned when input records were lost (offset out of range,
// or truncated logs) under exactly_once: sluice stops loudly instead of
// silently resetting.
var ErrDataLoss = errors.New("processor: input records lost")

// App runs a topology as one instance of an application. Instances with the
// same application.id share the work.
type App struct {
	cfg   config
	built *topology.Built
	plan  *exec.Plan
	log   *slog.Logger

	// resolved at Run
	subOf      map[string]int // runtime source topic → sub-topology
	partitions map[int]int32  // sub-topology → tasks
	// internalPartitions: runtime repartition topic → partitions
	internalPartitions map[string]int32
	globals            map[string]store.Engine
	changelogs         map[string]bool
	bnd                bounds // a bounded run's ends (bounded.go)
	txnID              string
	dir                string
	threads            int // num.stream.threads, resolved

	stats   Stats
	status  status
	queries queries // what interactive queries read (query.go)
	// local is the local state reported in the join metadata, memo the
	// static member's last join metadata (standby.go).
	local localState
	memo  *joinMemo
	// spc reads the savepoint control topic (savepoint_member.go);
	// spStopped is the directory of the savepoint that stopped Run.
	spc       *spControl
	spStopped atomic.Pointer[string]
	spDeaf    atomic.Bool // tests: ignore savepoint requests
	// spOld: tests: answer as a sluice that predates savepoint
	// checkpoints (the coordinator copies its stores from the changelogs).
	spOld atomic.Bool
	// spTakeIn: the store copies a start from a savepoint may take in
	// directly (savepoint_takein.go), nil if none.
	spTakeIn *takeIns
	mem      memory // state.memory.budget's split (memory.go)
}

// New validates the configuration and the topology. It starts nothing.
func New(t *topology.Topology, opts ...Opt) (*App, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	built, err := t.Build()
	if err := errors.Join(err, cfg.validate()); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, built: built, plan: exec.BuiltPlan(built), log: cfg.logger, threads: cfg.threads}
	if err := a.checkExternals(); err != nil {
		return nil, err
	}
	if a.threads == 0 {
		a.threads = runtime.GOMAXPROCS(0)
	}
	a.stats.ProcessLatency, a.stats.CommitLatency, a.stats.EndToEndLatency = newHistogram(), newHistogram(), newHistogram()
	return a, nil
}

// Topology is the built topology the app runs.
func (a *App) Topology() *topology.Built { return a.built }

// Stats returns the instance's counters.
func (a *App) Stats() *Stats { return &a.stats }

// Run runs the instance until ctx is canceled (then it commits, closes its
// tasks and leaves the group, returning nil) or a fatal error.
func (a *App) Run(ctx context.Context) error {
	a.dir = statedir.App(a.cfg.stateDir, a.cfg.appID)
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return fmt.Errorf("processor: state.dir: %w", err)
	}
	unlock, err := lockDir(a.dir)
	if err != nil {
		return err
	}
	defer unlock()
	inst := a.cfg.instanceID
	if inst == "" {
		if inst, err = persistentID(a.dir); err != nil {
			return err
		}
	}
	a.txnID = a.cfg.appID + "-" + inst
	if err := a.pingSinks(ctx); err != nil {
		return err
	}
	// A savepoint's refusals come before anything is created or written.
	sp, err := a.openSavepoint()
	if err != nil {
		return err
	}
	// A stop requested while starting (SIGTERM as the instance comes up)
	// is a stop, not a failure, as it is once running.
	stopped := func(err error) error {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	if err := a.prepareTopics(ctx); err != nil {
		return stopped(err)
	}
	a.planMemory()
	defer a.releaseMemory()
	defer a.limitGoMemory()()
	// Savepoints: without the control topic (an ACL refusing it) the
	// instance still runs; a savepoint then names it as not answering.
	if a.spc, err = a.startSavepointControl(ctx); err != nil {
		a.log.Warn("savepoint: no control topic; this instance cannot take part in savepoints", "err", err)
	}
	defer a.spc.close()
	if err := a.seedSavepoint(ctx, sp); err != nil {
		return stopped(err)
	}
	a.bnd.began = time.Now()
	if err := a.takeBounds(ctx); err != nil {
		return stopped(err)
	}
	defer a.summarizeBounded()
	a.queries.setWidths(a.partitions)
	a.scanLocalState()
	if a.cfg.instanceID != "" {
		a.memo = newJoinMemo(a.dir)
	}
	g, err := a.startGlobals(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer g.close()
	a.globals = g.engines
	failures := 0
	for {
		commits := a.stats.Commits.Load()
		err := a.runSession(ctx)
		if err == nil || ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		// Fatal unless named retryable or corrupted (errclass.go): a
		// retryable session is rebuilt (a new producer epoch fences the
		// old one) and its tasks reopen from their committed state; a
		// corrupted store is wiped first, and restores. Sessions that
		// keep failing without a commit stop the instance.
		if err := a.recoverFrom(err); err != nil {
			return err
		}
		if a.stats.Commits.Load() == commits {
			failures++
		} else {
			failures = 1
		}
		if failures >= maxSessionFailures {
			return fmt.Errorf("processor: %d sessions in a row failed without a commit: %w", failures, err)
		}
		a.log.Warn("rebuilding session", "err", err, "attempt", failures)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Duration(failures) * 200 * time.Millisecond):
		}
	}
}

// maxSessionFailures bounds how often a session is rebuilt without a commit
// in between.
const maxSessionFailures = 10
