package processor

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/rescale"
	"github.com/sluice-streams/sluice/savepoint"
)

// Starting from a savepoint (FromSavepoint). Before the instance joins its
// group, Run
//
//  1. opens the savepoint and verifies every store copy against the
//     manifest (package savepoint's errors name the file and the problem),
//     and refuses one of another application unless AllowOtherApp;
//  2. checks the savepoint against the topology store by store and
//     returns every refusal at once (ErrSavepointIncompatible), before it
//     creates a topic or writes a record;
//  3. seeds: with the transactional id <application.id>-savepoint-seed,
//     whose InitProducerID fences any other instance seeding at the same
//     time, it looks for the seed marker on the application's savepoint
//     control topic. Found, for this savepoint: the application was
//     seeded already (by another replica, or before a restart), and the
//     instance just joins. Found for another savepoint, or not found while
//     the application has committed offsets or committed changelog
//     records: ErrApplicationHasState. Otherwise every entry of the
//     savepoint, migrated where the topology migrates its store and
//     redistributed where the partition count changed, is produced to the
//     new application's changelogs, the input offsets are committed for
//     the group (TxnOffsetCommit with generation -1 and no member: the
//     group is empty), and the marker is produced, all in ONE transaction:
//     a crash or a fence anywhere leaves either all of it or none of it
//     (invariant 1 at the scale of the whole start), so a retry never
//     doubles a record;
//  4. joins the group as usual: the tasks restore their stores from the
//     seeded changelogs and resume the inputs at the committed offsets.
//
// Why the offsets go into the transaction rather than after it: a commit
// after it could be lost to a crash between the two, leaving an
// application whose changelogs say "seeded" while its inputs start from
// the beginning (every record counted twice). kfake and Kafka both accept
// a TxnOffsetCommit with generation -1 and an empty member id for a group
// with no members (the producer-only sendOffsetsToTransaction), which is
// what the group is before its first instance joins.

// Errors of a start from a savepoint. The savepoint package's ErrIncomplete,
// ErrCorrupt and ErrFormat are wrapped unchanged.
var (
	// ErrSavepointIncompatible: the savepoint does not fit the topology.
	// The joined error holds one wrapped ErrSavepointIncompatible per
	// store and rule broken.
	ErrSavepointIncompatible = errors.New("processor: savepoint incompatible with the topology")
	// ErrSavepointOtherApp: the savepoint was taken of another
	// application id and AllowOtherApp was not given.
	ErrSavepointOtherApp = errors.New("processor: savepoint of another application")
	// ErrApplicationHasState: the application has committed offsets or
	// changelog records, or was seeded from another savepoint: a start
	// from a savepoint would mix two states.
	ErrApplicationHasState = errors.New("processor: application already has state")
)

// savepointStart is the configuration of a start from a savepoint.
type savepointStart struct {
	dir                         string
	allowDropped, allowOtherApp bool
}

// FromSavepoint starts the application from the savepoint in dir (taken
// by `sluice savepoint create`): its stores and changelogs are filled from
// the savepoint and its inputs resume at the savepoint's offsets. The
// application must have no state of its own (a new application id, or one
// reset with `sluice reset`); every replica may be given the same
// savepoint, the first one seeds and the others find it done. The
// topology's stores must be compatible with the savepoint's (see
// topology.MigrateStore and AllowDroppedState). Flag --from-savepoint.
// Default: none (start from the application's committed state).
func FromSavepoint(dir string) Opt { return opt(func(c *config) { c.savepoint.dir = dir }) }

// AllowDroppedState lets a start from a savepoint discard the savepoint's
// stores that the topology no longer has. Flag --allow-dropped-state.
// Default: such a store refuses the start.
func AllowDroppedState() Opt { return opt(func(c *config) { c.savepoint.allowDropped = true }) }

// AllowOtherApp lets a start from a savepoint take a savepoint of another
// application id: a fork of that application. Flag --allow-other-app.
// Default: such a savepoint refuses the start (ErrSavepointOtherApp).
func AllowOtherApp() Opt { return opt(func(c *config) { c.savepoint.allowOtherApp = true }) }

// rescaleRoute is package rescale's Route, a variable so that a test's
// negative control can route wrong and see the check catch it.
var rescaleRoute = rescale.Route

// resizeTime lays the merged time state v of a task of sub out for its
// new input widths, if they changed: the inputs of its tracker are one per
// user topic and, per repartition topic, one per partition of it.
func (a *App) resizeTime(sub *exec.SubTopology, m *savepoint.Manifest, v []byte) ([]byte, error) {
	oldW := a.subWidths(func(topic string) int32 {
		if in := m.Input(topic); in != nil {
			return in.Partitions
		}
		return 0
	})
	groups := func(widths map[int]int32) []int {
		var g []int
		for _, src := range sub.Sources {
			for _, t := range src.Topics {
				w := 1
				if src.Internal {
					w = max(1, int(widths[a.writerOf(t)]))
				}
				g = append(g, w)
			}
		}
		return g
	}
	old, now := groups(oldW), groups(a.partitions)
	if slices.Equal(old, now) {
		return v, nil
	}
	return rescale.ResizeTimeState(v, old, now)
}

// writerOf is the sub-topology writing the repartition topic t (named as
// in the plan), -1 if none.
func (a *App) writerOf(t string) int {
	for _, sub := range a.plan.Subs {
		for _, n := range sub.Nodes {
			if n.Kind == exec.KindSink && n.Internal && n.Topics[0] == t {
				return sub.ID
			}
		}
	}
	return -1
}

// subWidths is every sub-topology's partition count for the user topics'
// counts given, by prepareTopics' rule: the widest of its user topics and
// of the repartition topics it reads, which are as wide as their writers.
func (a *App) subWidths(count func(topic string) int32) map[int]int32 {
	w := map[int]int32{}
	for range len(a.plan.Subs) + 1 {
		for _, sub := range a.plan.Subs {
			topics, internal := sub.SourceTopics()
			var n int32
			for i, t := range topics {
				if internal[i] {
					n = max(n, w[a.writerOf(t)])
				} else {
					n = max(n, count(t))
				}
			}
			w[sub.ID] = n
		}
	}
	return w
}

// seedMarkerKey is the key of the seed marker on the savepoint control
// topic; its value is a seedMarker as JSON. Other records of the topic
// (the savepoint protocol's) are ignored here.
const seedMarkerKey = "sluice.savepoint.seeded"

// seedMarker says which savepoint an application was seeded from.
type seedMarker struct {
	Savepoint   string    `json:"savepoint"`
	Application string    `json:"application"`
	Fingerprint string    `json:"topology_fingerprint"`
	Seeded      time.Time `json:"seeded"`
	Records     int64     `json:"records"`
	// stores is the seed's seedStoresKey record, read with the marker
	// (nil if the seed wrote none: an older sluice).
	stores *seedStores
}

// seedTxnID is the transactional id every seeder of the application
// shares, so that the last to initialise fences the others.
func seedTxnID(appID string) string { return appID + "-savepoint-seed" }

// openSavepoint opens, verifies and checks the savepoint a start was given;
// nil when none. It writes nothing.
func (a *App) openSavepoint() (*savepoint.Savepoint, error) {
	c := a.cfg.savepoint
	if c.dir == "" {
		return nil, nil
	}
	sp, err := savepoint.Open(c.dir)
	if err != nil {
		return nil, fmt.Errorf("processor: from savepoint: %w", err)
	}
	m := sp.Manifest()
	if m.Application != a.cfg.appID && !c.allowOtherApp {
		return nil, fmt.Errorf("%w: %s was taken of application %q, this is %q; to fork it into %q, start with --allow-other-app (processor.AllowOtherApp)",
			ErrSavepointOtherApp, c.dir+"/"+savepoint.ManifestFile, m.Application, a.cfg.appID, a.cfg.appID)
	}
	if err := sp.Verify(); err != nil {
		return nil, fmt.Errorf("processor: from savepoint: %w", err)
	}
	if err := a.checkCompatible(m); err != nil {
		return nil, err
	}
	return sp, nil
}

// checkCompatible applies the compatibility rules store by store and
// returns every refusal, joined.
func (a *App) checkCompatible(m *savepoint.Manifest) error {
	var errs []error
	refuse := func(store, rule, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: store %q: %s: %s", ErrSavepointIncompatible, store, rule, fmt.Sprintf(format, args...)))
	}
	for _, s := range m.Stores {
		spec, ok := a.plan.Stores[s.Name]
		if !ok {
			if !a.cfg.savepoint.allowDropped {
				refuse(s.Name, "dropped state", "the savepoint holds it (%d records) but the topology has no such store; start with --allow-dropped-state (processor.AllowDroppedState) to discard it", s.Records)
			} else {
				a.log.Warn("savepoint store dropped: the topology has no such store", "store", s.Name, "records", s.Records)
			}
			continue
		}
		kind := exec.StoreLayout(spec)
		if s.Layout != "" && kind != "" && !a.sameLayout(s.Layout, s.Name, kind) {
			refuse(s.Name, "layout changed", "the savepoint holds a %s store, the topology a %s store", s.Layout, kind)
			continue
		}
		mig := a.plan.Migrations[s.Name]
		if spec.Source != "" {
			// Its changelog is its source topic: it restores from there
			// up to the committed offset, as always.
			if mig != nil {
				refuse(s.Name, "migration of a source table", "the table is read from topic %s, which is its changelog; it is not seeded from a savepoint and cannot be migrated", spec.Source)
			}
			continue
		}
		if mig == nil && (s.KeySerde != spec.KeySerde || s.ValueSerde != spec.ValueSerde) {
			refuse(s.Name, "serde changed", "key serde %q → %q, value serde %q → %q; register a migration (topology.MigrateStore or topology.MigrateKeyValues)",
				s.KeySerde, spec.KeySerde, s.ValueSerde, spec.ValueSerde)
			continue
		}
		if mig != nil && mig.KeyValue && kind != layout.KindKV {
			refuse(s.Name, "typed migration of a store that is not key-value", "its layout is %q; use topology.MigrateStore over the raw entries", kind)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.plan.Stores)) {
		if m.Store(name) == nil {
			a.log.Info("store not in the savepoint: it starts empty", "store", name)
		}
	}
	return errors.Join(errs...)
}

// sameLayout reports whether a savepoint's layout name for store fits
// the topology's store of layout kind. Names a savepoint took from the
// state reader's reading of the plan (which tells sliding from window
// stores, and subscriptions from key-value stores, only by Store.Layout)
// are compared with that same reading of the new plan.
func (a *App) sameLayout(saved, store string, kind layout.StoreKind) bool {
	return saved == string(kind) || saved == planLayoutWithoutKind(a.plan, store)
}

// planLayoutWithoutKind is a store's layout as read from the plan's query
// hooks and flags alone, ignoring Store.Layout: state.Reader's reading.
func planLayoutWithoutKind(plan *exec.Plan, name string) string {
	spec := plan.Stores[name]
	switch {
	case spec.TimeState:
		return string(layout.KindTime)
	case spec.Query != nil && spec.Query.Windows != nil:
		return string(layout.KindWindow)
	case spec.Query != nil:
		return string(layout.KindKV)
	case spec.Windowed:
		other, ok := strings.CutSuffix(name, "-left")
		if ok {
			other += "-right"
		} else if other, ok = strings.CutSuffix(name, "-right"); ok {
			other += "-left"
		}
		for _, sub := range plan.Subs {
			for _, n := range sub.Nodes {
				if ok && slices.Contains(n.Stores, name) && slices.Contains(n.Stores, other) {
					return string(layout.KindJoin)
				}
			}
		}
		return string(layout.KindTimers)
	}
	return string(layout.KindState)
}

// seedSavepoint seeds the application from sp (step 3 of the file's
// comment), retrying when another seeder fences it.
func (a *App) seedSavepoint(ctx context.Context, sp *savepoint.Savepoint) error {
	if sp == nil {
		return nil
	}
	cl, err := kgo.NewClient(a.cfg.kgoOpts()...)
	if err != nil {
		return fmt.Errorf("processor: from savepoint: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	control := names.SavepointControl(a.cfg.appID)
	if err := ensureControlTopic(ctx, adm, a.cfg.appID); err != nil {
		return fmt.Errorf("processor: from savepoint: %w", err)
	}
	const attempts = 6
	for attempt := 1; ; attempt++ {
		// Seeded already (the common case for every replica but the
		// first): join without fencing the seeder that did it.
		mk, err := a.readMarker(ctx, adm, control, false)
		if err != nil {
			return err
		}
		if mk != nil {
			return a.markerAllows(mk, sp)
		}
		err = a.seedOnce(ctx, adm, sp, control)
		if err == nil || !fencedSeed(err) || attempt == attempts {
			return err
		}
		// Another seeder took over: wait for its marker, or for its
		// transaction to end (committed or timed out), then look again.
		a.log.Info("another instance is seeding from the savepoint; waiting for it", "attempt", attempt, "err", err)
		if mk, err := a.awaitMarker(ctx, adm, control, a.seedTxnTimeout()+5*time.Second); err != nil {
			return err
		} else if mk != nil {
			return a.markerAllows(mk, sp)
		}
	}
}

// markerAllows reports whether an application seeded as mk may start
// with sp: only if it was sp that seeded it.
func (a *App) markerAllows(mk *seedMarker, sp *savepoint.Savepoint) error {
	if mk.Savepoint == sp.Manifest().ID {
		a.log.Info("application already seeded from this savepoint; joining", "savepoint", mk.Savepoint, "seeded", mk.Seeded)
		a.setTakeIns(sp, mk.stores)
		return nil
	}
	return fmt.Errorf("%w: application %q was seeded from savepoint %q, not from %q (%s); reset it (sluice reset) to start it from another savepoint",
		ErrApplicationHasState, a.cfg.appID, mk.Savepoint, sp.Manifest().ID, sp.Dir())
}

// seedTxnTimeout is the seed's transaction timeout: long enough for a
// large savepoint's records, within Kafka's default
// transaction.max.timeout.ms (15 minutes). A seeder that dies mid-seed
// holds nobody up for it: the next seeder's InitProducerID, with the same
// transactional id, aborts its transaction at once.
func (a *App) seedTxnTimeout() time.Duration { return max(a.cfg.txnTimeout, 5*time.Minute) }

// fencedSeed reports an error of a seeder that another seeder fenced.
func fencedSeed(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) || errors.Is(err, kerr.InvalidTxnState) ||
		errors.Is(err, kerr.ConcurrentTransactions)
}

// seedOnce is one attempt to seed, as the only seeder: its
// InitProducerID fences the others.
func (a *App) seedOnce(ctx context.Context, adm *kadm.Client, sp *savepoint.Savepoint, control string) error {
	began := time.Now()
	pcl, err := kgo.NewClient(a.cfg.kgoOpts(
		kgo.TransactionalID(seedTxnID(a.cfg.appID)),
		kgo.TransactionTimeout(a.seedTxnTimeout()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.MaxBufferedRecords(1<<16),
	)...)
	if err != nil {
		return fmt.Errorf("processor: from savepoint: seeding client: %w", err)
	}
	defer pcl.Close()
	pid, epoch, err := pcl.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("processor: from savepoint: init producer id: %w", err)
	}
	// Re-check now that no other seeder can commit: one may have just
	// done so.
	mk, err := a.readMarker(ctx, adm, control, true)
	if err != nil {
		return err
	}
	if mk != nil {
		return a.markerAllows(mk, sp)
	}
	if err := a.checkNoState(ctx, adm); err != nil {
		// The state found may be a seed committed since the marker was
		// read, by a seeder that fenced this one after its
		// InitProducerID: its marker committed with it.
		if mk, merr := a.readMarker(ctx, adm, control, true); merr == nil && mk != nil {
			return a.markerAllows(mk, sp)
		}
		return err
	}
	offsets, err := a.savepointOffsets(ctx, adm, sp.Manifest())
	if err != nil {
		return err
	}
	// Every migration and redistribution runs once before anything is
	// written, so that a refusal leaves nothing behind. Without any, the
	// entries are the copies' own, which openSavepoint verified.
	var n int64
	if a.seedTransforms(sp.Manifest()) {
		if n, err = a.eachSeed(sp, func(string, int32, []byte, []byte) {}); err != nil {
			return err
		}
	} else {
		for _, s := range sp.Manifest().Stores {
			if a.verbatim(&s) {
				n += s.Records
			}
		}
	}
	if err := pcl.BeginTransaction(); err != nil {
		return fmt.Errorf("processor: from savepoint: %w", err)
	}
	abort := func(err error) error {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = pcl.AbortBufferedRecords(actx)
		_ = pcl.EndTransaction(actx, kgo.TryAbort)
		return err
	}
	var (
		mu      sync.Mutex
		prodErr error
		last    = map[string]map[int32]int64{} // changelog partition → last offset written
	)
	promise := func(r *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			prodErr = cmpOr(prodErr, err)
			return
		}
		if last[r.Topic] == nil {
			last[r.Topic] = map[int32]int64{}
		}
		if o, ok := last[r.Topic][r.Partition]; !ok || r.Offset > o {
			last[r.Topic][r.Partition] = r.Offset
		}
	}
	// The marker first: from then on the control topic has this
	// transaction open, which tells a seeder this one fenced that the
	// seed is under way (awaitMarker).
	mv, _ := json.Marshal(seedMarker{Savepoint: sp.Manifest().ID, Application: sp.Manifest().Application,
		Fingerprint: a.built.Fingerprint(), Seeded: time.Now().UTC(), Records: n})
	pcl.Produce(ctx, &kgo.Record{Topic: control, Partition: 0, Key: []byte(seedMarkerKey), Value: mv}, promise)
	if _, err := a.eachSeed(sp, func(topic string, p int32, k, v []byte) {
		pcl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Key: k, Value: v}, promise)
	}); err != nil {
		return abort(err)
	}
	if err := pcl.Flush(ctx); err != nil {
		return abort(fmt.Errorf("processor: from savepoint: flush: %w", err))
	}
	// Last, once every entry's offset is known: which copies the tasks
	// may take in directly, and at which changelog checkpoint
	// (savepoint_takein.go). In the transaction, so it exists exactly
	// when the entries do.
	mu.Lock()
	ss := a.seedStoresRecord(sp, last)
	mu.Unlock()
	sv, _ := json.Marshal(ss)
	pcl.Produce(ctx, &kgo.Record{Topic: control, Partition: 0, Key: []byte(seedStoresKey), Value: sv}, promise)
	if err := pcl.Flush(ctx); err != nil {
		return abort(fmt.Errorf("processor: from savepoint: flush: %w", err))
	}
	mu.Lock()
	perr := prodErr
	mu.Unlock()
	if perr != nil {
		return abort(fmt.Errorf("processor: from savepoint: produce: %w", perr))
	}
	if err := a.commitSeedOffsets(ctx, pcl, pid, epoch, offsets); err != nil {
		return abort(err)
	}
	if err := pcl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return abort(fmt.Errorf("processor: from savepoint: commit: %w", err))
	}
	a.log.Info("seeded the application from the savepoint", "savepoint", sp.Manifest().ID, "dir", sp.Dir(), "records", n, "took", time.Since(began).Round(time.Millisecond))
	a.setTakeIns(sp, ss)
	return nil
}

// seedTransforms reports whether the seed changes any entry of m on its
// way to the changelogs: a migration, or a partition count changed.
func (a *App) seedTransforms(m *savepoint.Manifest) bool {
	for _, s := range m.Stores {
		spec, ok := a.plan.Stores[s.Name]
		if ok && spec.Source == "" && !a.verbatim(&s) {
			return true
		}
	}
	return false
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// eachSeed calls emit with every record the seed produces: each store
// entry of the savepoint that the topology keeps (stores read from their
// source topic excepted), migrated, at its partition of the new
// application's changelog. It returns how many it emitted.
func (a *App) eachSeed(sp *savepoint.Savepoint, emit func(topic string, p int32, k, v []byte)) (int64, error) {
	var n int64
	m := sp.Manifest()
	for _, s := range m.Stores {
		spec, ok := a.plan.Stores[s.Name]
		if !ok || spec.Source != "" {
			continue
		}
		topic := names.Changelog(a.cfg.appID, s.Name)
		width := a.partitions[a.plan.StoreSub[s.Name]]
		kind := exec.StoreLayout(spec)
		mig := a.plan.Migrations[s.Name]
		migrate := func(k, v []byte) ([]byte, []byte, error) {
			if mig == nil || bytes.Equal(k, layout.TimeStateKey) {
				return k, v, nil
			}
			nk, nv, err := mig.Fn(k, v)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: store %q: migration of key %x: %w", ErrSavepointIncompatible, s.Name, k, err)
			}
			if nk != nil && nv == nil {
				return nil, nil, fmt.Errorf("%w: store %q: migration of key %x returned a nil value (return a nil key to drop an entry)", ErrSavepointIncompatible, s.Name, k)
			}
			return nk, nv, nil
		}
		put := func(p int32, k, v []byte) {
			n++
			// The copies outlive the iterator: production is
			// asynchronous. A value is never nil (that is a delete).
			emit(topic, p, append([]byte{}, k...), append([]byte{}, v...))
		}
		if s.Partitions == width {
			for p := range s.Partitions {
				if err := sp.Each(s.Name, p, func(k, v []byte) error {
					nk, nv, err := migrate(k, v)
					if err != nil || nk == nil {
						return err
					}
					put(p, nk, nv)
					return nil
				}); err != nil {
					return n, fmt.Errorf("processor: from savepoint: %w", err)
				}
			}
			continue
		}
		// Rescaling: every keyed entry goes to its key's partition
		// under the new count; each new partition gets the merge of
		// the per-task entries of the old partitions whose keys can
		// reach it.
		perTask := map[string]map[int32][]byte{}
		for p := range s.Partitions {
			if err := sp.Each(s.Name, p, func(k, v []byte) error {
				nk, nv, err := migrate(k, v)
				if err != nil || nk == nil {
					return err
				}
				np, per, err := rescaleRoute(kind, nk, width)
				if err != nil {
					return fmt.Errorf("%w: store %q: rescale from %d to %d partitions: %w", ErrSavepointIncompatible, s.Name, s.Partitions, width, err)
				}
				if per {
					if perTask[string(nk)] == nil {
						perTask[string(nk)] = map[int32][]byte{}
					}
					perTask[string(nk)][p] = append([]byte{}, nv...)
					return nil
				}
				put(np, nk, nv)
				return nil
			}); err != nil {
				return n, fmt.Errorf("processor: from savepoint: %w", err)
			}
		}
		sub := a.plan.Subs[a.plan.StoreSub[s.Name]]
		for _, k := range slices.Sorted(maps.Keys(perTask)) {
			for p := range width {
				var vals [][]byte
				for _, o := range rescale.Sources(p, s.Partitions, width) {
					if v, ok := perTask[k][o]; ok {
						vals = append(vals, v)
					}
				}
				if len(vals) == 0 {
					continue // no old task that can reach p had it
				}
				v, err := rescale.Merge(kind, []byte(k), vals)
				if err == nil && k == string(layout.TimeStateKey) {
					v, err = a.resizeTime(sub, m, v)
				}
				if err != nil {
					return n, fmt.Errorf("%w: store %q: rescale from %d to %d partitions: %w", ErrSavepointIncompatible, s.Name, s.Partitions, width, err)
				}
				put(p, []byte(k), v)
			}
		}
	}
	return n, nil
}

// seedOffset is one input offset the seed commits.
type seedOffset struct {
	offset   int64
	epoch    int32
	metadata string
	topicID  [16]byte // TxnOffsetCommit v6 names topics by id
}

// savepointOffsets are the input offsets the seed commits: the manifest's,
// for the topics the topology reads, where the topic is the one the
// savepoint saw (same id, or no id known) and the partition still exists;
// partitions added since start at the log start. A topic created again
// (another id) is not resumed: its offsets belong to another log.
func (a *App) savepointOffsets(ctx context.Context, adm *kadm.Client, m *savepoint.Manifest) (map[string]map[int32]seedOffset, error) {
	var user []string
	for t := range a.subOf {
		if !names.IsInternal(a.cfg.appID, t) && m.Input(t) != nil {
			user = append(user, t)
		}
	}
	sort.Strings(user)
	for _, in := range m.Inputs {
		if _, ok := a.subOf[in.Topic]; !ok {
			a.log.Warn("savepoint input topic not read by the topology: its offsets are dropped", "topic", in.Topic)
		}
	}
	out := map[string]map[int32]seedOffset{}
	if len(user) == 0 {
		return out, nil
	}
	details, err := adm.ListTopics(ctx, user...)
	if err != nil {
		return nil, fmt.Errorf("processor: from savepoint: list input topics: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, user...)
	if err != nil {
		return nil, fmt.Errorf("processor: from savepoint: list input offsets: %w", err)
	}
	for _, t := range user {
		in, d := m.Input(t), details[t]
		if d.Err != nil {
			return nil, fmt.Errorf("processor: from savepoint: input topic %s: %w", t, d.Err)
		}
		if in.TopicID != "" && !sameTopicID(in.TopicID, d.ID) {
			a.log.Warn("input topic was created again since the savepoint (another topic id): it is read from its start, not resumed",
				"topic", t, "savepoint_id", in.TopicID, "id", d.ID.String())
			continue
		}
		out[t] = map[int32]seedOffset{}
		saved := map[int32]savepoint.Offset{}
		for _, o := range in.Offsets {
			saved[o.Partition] = o
		}
		for p := range int32(len(d.Partitions)) {
			if o, ok := saved[p]; ok {
				epoch := o.LeaderEpoch
				if in.TopicID == "" {
					epoch = -1 // not known to be this log's epoch
				}
				out[t][p] = seedOffset{offset: o.Offset, epoch: epoch, metadata: o.Metadata, topicID: d.ID}
				continue
			}
			if p < in.Partitions {
				continue // no committed offset at the cut: as a new application
			}
			st, ok := starts.Lookup(t, p)
			if !ok || st.Err != nil {
				return nil, fmt.Errorf("processor: from savepoint: log start of %s/%d: %v", t, p, st.Err)
			}
			out[t][p] = seedOffset{offset: st.Offset, epoch: -1, topicID: d.ID}
		}
	}
	return out, nil
}

// sameTopicID compares a manifest's topic id (base64, as kadm prints it,
// or hex) with the broker's.
func sameTopicID(saved string, id kadm.TopicID) bool {
	return saved == id.String() || strings.EqualFold(saved, hex.EncodeToString(id[:]))
}

// commitSeedOffsets adds the group's input offsets to the seed's
// transaction: AddOffsetsToTxn, then TxnOffsetCommit with generation -1
// and no member (the group has none yet).
func (a *App) commitSeedOffsets(ctx context.Context, pcl *kgo.Client, pid int64, epoch int16, offsets map[string]map[int32]seedOffset) error {
	if len(offsets) == 0 {
		return nil
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = seedTxnID(a.cfg.appID), pid, epoch, a.cfg.appID
	aresp, err := add.RequestWith(ctx, pcl)
	if err == nil {
		err = kerr.ErrorForCode(aresp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("processor: from savepoint: add offsets to the transaction: %w", err)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = seedTxnID(a.cfg.appID), a.cfg.appID, pid, epoch
	req.Generation, req.MemberID = -1, ""
	for _, t := range slices.Sorted(maps.Keys(offsets)) {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = t
		for p, o := range offsets[t] {
			rt.TopicID = o.topicID
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o.offset, o.epoch
			md := o.metadata
			rp.Metadata = &md
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, pcl)
	if err != nil {
		return fmt.Errorf("processor: from savepoint: commit input offsets: %w", err)
	}
	for i, t := range resp.Topics {
		name := t.Topic
		if name == "" && i < len(req.Topics) {
			name = req.Topics[i].Topic
		}
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("processor: from savepoint: commit input offset of %s/%d: %w", name, p.Partition, err)
			}
		}
	}
	return nil
}

// checkNoState refuses an application with committed offsets past their
// partitions' log starts or with committed records in a changelog (aborted
// ones, left by a fenced seeder, do not count): what `sluice reset` leaves
// (offsets at the earliest, internal topics deleted) has no state.
func (a *App) checkNoState(ctx context.Context, adm *kadm.Client) error {
	committed, err := adm.FetchOffsets(kadm.RequireStable(ctx), a.cfg.appID)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("processor: from savepoint: committed offsets of %s: %w", a.cfg.appID, err)
	}
	// An offset at its partition's log start is what `sluice reset`
	// leaves (to the earliest offsets): nothing was processed past it.
	var inTopics []string
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 && !slices.Contains(inTopics, o.Topic) {
			inTopics = append(inTopics, o.Topic)
		}
	})
	var logStarts kadm.ListedOffsets
	if len(inTopics) > 0 {
		if logStarts, err = adm.ListStartOffsets(ctx, inTopics...); err != nil {
			return fmt.Errorf("processor: from savepoint: log start offsets: %w", err)
		}
	}
	var have []string
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil || o.At < 0 {
			return
		}
		if st, ok := logStarts.Lookup(o.Topic, o.Partition); ok && st.Err == nil && o.At <= st.Offset {
			return
		}
		have = append(have, fmt.Sprintf("%s/%d@%d", o.Topic, o.Partition, o.At))
	})
	if len(have) > 0 {
		sort.Strings(have)
		return fmt.Errorf("%w: group %s has committed offsets (%s); start a new application id, or reset this one (sluice reset) first "+
			"(an application seeded from this savepoint whose savepoint control topic was deleted is simply restarted without --from-savepoint)",
			ErrApplicationHasState, a.cfg.appID, strings.Join(have[:min(len(have), 5)], ", "))
	}
	var topics []string
	for t := range a.changelogs {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	if len(topics) == 0 {
		return nil
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("processor: from savepoint: changelog offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("processor: from savepoint: changelog offsets: %w", err)
	}
	check := map[string]map[int32]kgo.Offset{}
	want := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		st, _ := starts.Lookup(o.Topic, o.Partition)
		if o.Err == nil && o.Offset > st.Offset {
			if check[o.Topic] == nil {
				check[o.Topic], want[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
			}
			check[o.Topic][o.Partition] = kgo.NewOffset().At(st.Offset)
			want[o.Topic][o.Partition] = o.Offset
		}
	})
	if len(check) == 0 {
		return nil
	}
	t, p, err := firstCommittedRecord(ctx, a.cfg.kgoOpts, check, want)
	if err != nil {
		return err
	}
	if t != "" {
		return fmt.Errorf("%w: changelog %s/%d holds committed records; start a new application id, or reset this one (sluice reset) first",
			ErrApplicationHasState, t, p)
	}
	return nil
}

// firstCommittedRecord reads parts with read_committed up to their ends
// and returns the first partition with a record that is not a control
// record ("" if none).
func firstCommittedRecord(ctx context.Context, opts func(...kgo.Opt) []kgo.Opt, parts map[string]map[int32]kgo.Offset, ends map[string]map[int32]int64) (string, int32, error) {
	cl, err := kgo.NewClient(opts(kgo.ConsumePartitions(parts), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return "", 0, err
	}
	defer cl.Close()
	left := 0
	for _, ps := range ends {
		left += len(ps)
	}
	pos := map[string]map[int32]int64{}
	deadline := time.Now().Add(time.Minute)
	for left > 0 {
		if time.Now().After(deadline) {
			return "", 0, errors.New("processor: from savepoint: reading the changelogs took over a minute (a transaction still open?)")
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = errors.Join(ferr, fmt.Errorf("processor: from savepoint: read %s/%d: %w", t, p, err))
			}
		})
		if ferr != nil {
			return "", 0, ferr
		}
		for _, r := range fs.Records() {
			if !r.Attrs.IsControl() {
				return r.Topic, r.Partition, nil
			}
			if pos[r.Topic] == nil {
				pos[r.Topic] = map[int32]int64{}
			}
			pos[r.Topic][r.Partition] = r.Offset + 1
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if fp.LastStableOffset >= 0 && pos[fp.Topic] != nil && pos[fp.Topic][fp.Partition] < fp.LogStartOffset {
				pos[fp.Topic][fp.Partition] = fp.LogStartOffset
			}
		})
		left = 0
		for t, ps := range ends {
			for p, end := range ps {
				if pos[t][p] < end {
					left++
				}
			}
		}
	}
	return "", 0, nil
}

// readMarker returns the seed marker of the control topic, nil if none.
// Settled: first wait until no transaction is open on it (after this
// seeder's InitProducerID, the fenced seeders' are being aborted), so
// that the answer is final; else read what is decided.
func (a *App) readMarker(ctx context.Context, adm *kadm.Client, control string, settled bool) (*seedMarker, error) {
	deadline := time.Now().Add(a.seedTxnTimeout() + 5*time.Second)
	var end int64
	for {
		hw, err := listOffset(ctx, adm.ListEndOffsets, control, 0)
		if err != nil {
			return nil, err
		}
		lso, err := listOffset(ctx, adm.ListCommittedOffsets, control, 0)
		if err != nil {
			return nil, err
		}
		end = lso
		if !settled || lso == hw {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("processor: from savepoint: a transaction on %s stayed open past %v", control, a.seedTxnTimeout())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	start, err := listOffset(ctx, adm.ListStartOffsets, control, 0)
	if err != nil || start >= end {
		return nil, err
	}
	cl, err := kgo.NewClient(a.cfg.kgoOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{control: {0: kgo.NewOffset().At(start)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	pos := start
	var mk *seedMarker
	var stores []*seedStores
	// To the end, not to the marker: the seed's list of copies to take
	// in follows it in the same transaction.
	for pos < end {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("processor: from savepoint: reading %s took too long", control)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) { pos = max(pos, fp.LogStartOffset) })
		for _, r := range fs.Records() {
			pos = max(pos, r.Offset+1)
			if r.Offset >= end || r.Attrs.IsControl() {
				continue
			}
			switch string(r.Key) {
			case seedMarkerKey:
				if mk != nil {
					continue // the first marker decides
				}
				mk = &seedMarker{}
				if err := json.Unmarshal(r.Value, mk); err != nil {
					return nil, fmt.Errorf("processor: from savepoint: seed marker at %s/0@%d: %w", control, r.Offset, err)
				}
			case seedStoresKey:
				// Unreadable: no take-in, the restore does it all.
				if ss, err := parseSeedStores(r.Value); err == nil {
					stores = append(stores, ss)
				}
			}
		}
	}
	if mk != nil {
		for _, ss := range stores {
			if ss.Savepoint == mk.Savepoint {
				mk.stores = ss
				break
			}
		}
	}
	return mk, nil
}

// awaitMarker waits up to d for a seed marker to appear (nil if none did:
// the other seeder's transaction was aborted).
func (a *App) awaitMarker(ctx context.Context, adm *kadm.Client, control string, d time.Duration) (*seedMarker, error) {
	began := time.Now()
	deadline := began.Add(d)
	for {
		mk, err := a.readMarker(ctx, adm, control, false)
		if err != nil || mk != nil {
			return mk, err
		}
		hw, err := listOffset(ctx, adm.ListEndOffsets, control, 0)
		if err != nil {
			return nil, err
		}
		lso, err := listOffset(ctx, adm.ListCommittedOffsets, control, 0)
		if err != nil {
			return nil, err
		}
		if lso == hw && time.Now().After(began.Add(2*time.Second)) {
			// Nothing open and no marker for a while: the other
			// seeder's transaction was aborted, or has not reached the
			// control topic yet; seeding again fences it.
			return nil, nil
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
