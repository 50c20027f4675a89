package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
)

// Errors of the reader; each is wrapped with the directory, store or key
// it is about.
var (
	// ErrInUse: a running instance holds the application directory's
	// lock. Stop it (or read a copy) first.
	ErrInUse = errors.New("state: in use by a running instance")
	// ErrNotStateDir: the directory holds no application's state.
	ErrNotStateDir = errors.New("state: not a state directory")
	// ErrNoStore: no store of that name in the directory.
	ErrNoStore = errors.New("state: no such store")
	// ErrNotFound: the key is in none of the store's partitions.
	ErrNotFound = errors.New("state: key not found")
	// ErrLayout: the store's layout is not the one the call reads (a
	// window store read as key-value, for instance).
	ErrLayout = errors.New("state: wrong store layout")
	// ErrCorrupt: a store's files are damaged; the error names the
	// store's directory and Pebble's complaint (which names the file).
	ErrCorrupt = errors.New("state: corrupt store")
)

// Layout names of the stores that are not in internal/layout's table.
const (
	// LayoutGlobal is a global table's store: the topic's raw key and
	// value bytes.
	LayoutGlobal = "global table"
	// LayoutUnknown is a store the reader has no topology for.
	LayoutUnknown = "unknown"
)

// StoreInfo describes one task's copy of a store.
type StoreInfo struct {
	Application string `json:"application"`
	// Task is the task's id, "<sub-topology>_<partition>", or "global"
	// for a global table.
	Task        string `json:"task"`
	SubTopology int    `json:"sub_topology"` // -1 for a global table
	Partition   int32  `json:"partition"`    // -1 for a global table
	Store       string `json:"store"`
	// Layout is the store's layout (internal/layout's StoreKind names:
	// "key-value", "window", "keyed state", ...), LayoutGlobal, or
	// LayoutUnknown when the reader was opened without the topology.
	Layout string `json:"layout"`
	// Records counts the store's entries: every key, so a window store's
	// index entries and time state count too.
	Records int64 `json:"records"`
	// SizeBytes is the size of the store's files on disk.
	SizeBytes int64 `json:"size_bytes"`
	// ChangelogOffset is the offset of the last changelog record the
	// store reflects (its checkpoint), -1 if none.
	ChangelogOffset int64 `json:"changelog_offset"`
	// Dir is the store's Pebble directory.
	Dir string `json:"dir"`
}

// Record is one raw entry of a store's copy.
type Record struct {
	Application string
	Task        string
	Partition   int32
	Key, Value  []byte
}

// Option configures Open.
type Option interface{ apply(*config) }

type config struct {
	topo *topology.Topology
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTopology gives the reader the topology that wrote the state, so that
// it knows each store's layout and serdes (Stores' Layout, Entries,
// KeyFromText). Without it every store's layout is LayoutUnknown and only
// the raw and caller-typed reads work.
func WithTopology(t *topology.Topology) Option {
	return optionFunc(func(c *config) { c.topo = t })
}

// Reader reads the stores of one or more applications' state directories.
// It is not safe for concurrent use.
type Reader struct {
	stores  []*storeDir
	unlocks []func()
	plan    *exec.Plan
	globals map[string]bool
	closed  bool
}

type storeDir struct {
	info StoreInfo
	eng  *store.Pebble // opened on first use
}

// Open opens dir for reading: the state.dir root (every application under
// it) or one application's directory, <state.dir>/<application.id>. It
// takes each application directory's lock, so a running instance's
// directory is refused (ErrInUse) and none starts in it until Close; a
// copy without a lock file (a savepoint, a backup) needs none. Open writes
// nothing.
func Open(dir string, opts ...Option) (*Reader, error) {
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	r := &Reader{globals: map[string]bool{}}
	if c.topo != nil {
		built, err := c.topo.Build()
		if err != nil {
			return nil, fmt.Errorf("state: topology: %w", err)
		}
		r.plan = exec.BuiltPlan(built)
		for _, g := range r.plan.Globals {
			r.globals[g.Name] = true
		}
	}
	apps, err := appDirs(dir)
	if err != nil {
		return nil, err
	}
	for _, app := range apps {
		unlock, err := statedir.LockExisting(app)
		if err != nil {
			r.Close()
			if errors.Is(err, statedir.ErrInUse) {
				return nil, fmt.Errorf("%w: %s: an instance is running in it; stop it first (%v)", ErrInUse, app, err)
			}
			return nil, fmt.Errorf("state: lock %s: %w", app, err)
		}
		r.unlocks = append(r.unlocks, unlock)
		if err := r.scan(app); err != nil {
			r.Close()
			return nil, err
		}
	}
	sort.Slice(r.stores, func(i, j int) bool {
		a, b := r.stores[i].info, r.stores[j].info
		if a.Application != b.Application {
			return a.Application < b.Application
		}
		if a.Store != b.Store {
			return a.Store < b.Store
		}
		if a.SubTopology != b.SubTopology {
			return a.SubTopology < b.SubTopology
		}
		return a.Partition < b.Partition
	})
	return r, nil
}

// Applications returns the application ids whose state dir holds: its
// own name if it is an application's directory, else those of the
// application directories under it. It takes no lock and reads no store.
func Applications(dir string) ([]string, error) {
	apps, err := appDirs(dir)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(apps))
	for i, a := range apps {
		ids[i] = filepath.Base(a)
	}
	return ids, nil
}

// appDirs returns dir if it is an application directory, else the
// application directories under it.
func appDirs(dir string) ([]string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotStateDir, dir)
	}
	apps := []string{dir}
	if !isAppDir(dir) {
		apps = nil
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
		for _, e := range entries {
			if p := filepath.Join(dir, e.Name()); e.IsDir() && isAppDir(p) {
				apps = append(apps, p)
			}
		}
		if len(apps) == 0 {
			return nil, fmt.Errorf("%w: %s holds no application's state (give state.dir or state.dir/<application.id>)", ErrNotStateDir, dir)
		}
	}
	return apps, nil
}

// isAppDir: an application directory has the instance's files or task
// directories; a state root has application directories only.
func isAppDir(dir string) bool {
	for _, f := range []string{".lock", "instance.id"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if _, _, ok := parseTask(e.Name()); ok && e.IsDir() {
			return true
		}
	}
	return false
}

// parseTask reads a task directory's name, task.ID's text "<sub>_<partition>".
func parseTask(name string) (sub int, part int32, ok bool) {
	s, p, found := strings.Cut(name, "_")
	if !found {
		return 0, 0, false
	}
	si, err1 := strconv.Atoi(s)
	pi, err2 := strconv.ParseInt(p, 10, 32)
	if err1 != nil || err2 != nil || si < 0 || pi < 0 || strconv.Itoa(si) != s || strconv.FormatInt(pi, 10) != p {
		return 0, 0, false
	}
	return si, int32(pi), true
}

// scan lists the stores of the application directory app.
func (r *Reader) scan(app string) error {
	entries, err := os.ReadDir(app)
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	appID := filepath.Base(app)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		sub, part, ok := parseTask(e.Name())
		global := e.Name() == "global"
		if !ok && !global {
			continue
		}
		if global {
			sub, part = -1, -1
		}
		stores, err := os.ReadDir(filepath.Join(app, e.Name()))
		if err != nil {
			return fmt.Errorf("state: %w", err)
		}
		for _, s := range stores {
			if !s.IsDir() {
				continue
			}
			dir := statedir.Store(app, e.Name(), s.Name())
			if global {
				dir = statedir.Global(app, s.Name())
			}
			r.stores = append(r.stores, &storeDir{info: StoreInfo{
				Application: appID, Task: e.Name(), SubTopology: sub, Partition: part,
				Store: s.Name(), Layout: r.layout(s.Name(), global), Dir: dir, ChangelogOffset: -1,
			}})
		}
	}
	return nil
}

// layout names a store's layout from the plan (planLayout).
func (r *Reader) layout(name string, global bool) string {
	if global {
		return LayoutGlobal
	}
	if r.plan == nil {
		return LayoutUnknown
	}
	return planLayout(r.plan, name)
}

// Layouts names the layout of each store of a built topology (global
// tables' stores excepted), as Stores reports it with WithTopology:
// internal/layout's StoreKind names. Savepoints record it per store.
func Layouts(b *topology.Built) map[string]string {
	plan := exec.BuiltPlan(b)
	out := make(map[string]string, len(plan.Stores))
	for name := range plan.Stores {
		out[name] = planLayout(plan, name)
	}
	return out
}

// planLayout names a store's layout from the plan: the query hooks the
// typed DSL attached tell key-value and window stores apart; the rest are
// private layouts.
func planLayout(plan *exec.Plan, name string) string {
	spec, ok := plan.Stores[name]
	if !ok {
		return LayoutUnknown
	}
	if spec.Layout != "" {
		return string(spec.Layout) // what the DSL declared
	}
	switch {
	case spec.TimeState:
		return string(layout.KindTime)
	case spec.Query != nil && spec.Query.Windows != nil:
		return string(layout.KindWindow)
	case spec.Query != nil:
		return string(layout.KindKV)
	case spec.Windowed && isJoinBuffer(plan, name):
		return string(layout.KindJoin)
	case spec.Windowed:
		return string(layout.KindTimers)
	}
	return string(layout.KindState)
}

// isJoinBuffer: a stream–stream join's buffers are the windowed stores
// named <join>-left and <join>-right used by one node together.
func isJoinBuffer(plan *exec.Plan, name string) bool {
	other, ok := strings.CutSuffix(name, "-left")
	if ok {
		other += "-right"
	} else if other, ok = strings.CutSuffix(name, "-right"); ok {
		other += "-left"
	} else {
		return false
	}
	for _, sub := range plan.Subs {
		for _, n := range sub.Nodes {
			if slices.Contains(n.Stores, name) && slices.Contains(n.Stores, other) {
				return true
			}
		}
	}
	return false
}

// Close closes the stores and releases the directory locks. It is
// idempotent.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, s := range r.stores {
		if s.eng != nil {
			errs = append(errs, s.eng.Close())
		}
	}
	for _, u := range r.unlocks {
		u()
	}
	return errors.Join(errs...)
}

// engine opens the store's Pebble database read-only, once.
func (r *Reader) engine(s *storeDir) (*store.Pebble, error) {
	if r.closed {
		return nil, errors.New("state: reader closed")
	}
	if s.eng != nil {
		return s.eng, nil
	}
	eng, err := store.OpenPebbleReadOnly(s.info.Dir)
	if err != nil {
		return nil, r.storeErr(s, err)
	}
	s.eng = eng
	return eng, nil
}

// storeErr names the store in err; Pebble's corruption (which names the
// damaged file) becomes ErrCorrupt.
func (r *Reader) storeErr(s *storeDir, err error) error {
	if errors.Is(err, store.ErrCorrupted) {
		return fmt.Errorf("%w: store %q of task %s (%s): %w", ErrCorrupt, s.info.Store, s.info.Task, s.info.Dir, err)
	}
	return fmt.Errorf("state: store %q of task %s (%s): %w", s.info.Store, s.info.Task, s.info.Dir, err)
}

// Stores describes every store copy: counts its records, sizes its files
// and reads its checkpoint, opening each store.
func (r *Reader) Stores() ([]StoreInfo, error) {
	out := make([]StoreInfo, 0, len(r.stores))
	for _, s := range r.stores {
		eng, err := r.engine(s)
		if err != nil {
			return nil, err
		}
		info := s.info
		if info.ChangelogOffset, err = eng.Checkpoint(); err != nil {
			return nil, r.storeErr(s, err)
		}
		if info.ChangelogOffset == store.NoCheckpoint {
			info.ChangelogOffset = -1
		}
		if err := eng.Range(nil, nil, func(_, _ []byte) error { info.Records++; return nil }); err != nil {
			return nil, r.storeErr(s, err)
		}
		if info.SizeBytes, err = dirSize(info.Dir); err != nil {
			return nil, r.storeErr(s, err)
		}
		out = append(out, info)
	}
	return out, nil
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

// match returns the copies of the store called name, of one application.
func (r *Reader) match(name string) ([]*storeDir, error) {
	var out []*storeDir
	apps := map[string]bool{}
	names := map[string]bool{}
	for _, s := range r.stores {
		names[s.info.Store] = true
		if s.info.Store == name {
			out = append(out, s)
			apps[s.info.Application] = true
		}
	}
	if len(out) == 0 {
		have := make([]string, 0, len(names))
		for n := range names {
			have = append(have, n)
		}
		sort.Strings(have)
		return nil, fmt.Errorf("%w: %q (have %s)", ErrNoStore, name, strings.Join(have, ", "))
	}
	if len(apps) > 1 {
		return nil, fmt.Errorf("state: store %q is in %d applications: open one application's directory", name, len(apps))
	}
	return out, nil
}

// Layout returns the layout of the store called name (see StoreInfo).
func (r *Reader) Layout(name string) (string, error) {
	ss, err := r.match(name)
	if err != nil {
		return "", err
	}
	return ss[0].info.Layout, nil
}

// Records calls fn for every entry of the store called name: task by task,
// in key order within a task. The slices are fn's to keep.
func (r *Reader) Records(name string, fn func(Record) error) error {
	ss, err := r.match(name)
	if err != nil {
		return err
	}
	for _, s := range ss {
		if err := r.rangeStore(s, nil, nil, func(k, v []byte) error {
			return fn(Record{Application: s.info.Application, Task: s.info.Task, Partition: s.info.Partition,
				Key: slices.Clone(k), Value: slices.Clone(v)})
		}); err != nil {
			return err
		}
	}
	return nil
}

// rangeStore ranges over [start, end) of one copy, naming it in errors
// the store raised (fn's own errors pass unchanged).
func (r *Reader) rangeStore(s *storeDir, start, end []byte, fn func(k, v []byte) error) error {
	eng, err := r.engine(s)
	if err != nil {
		return err
	}
	var fnErr error
	err = eng.Range(start, end, func(k, v []byte) error {
		if err := fn(k, v); err != nil {
			fnErr = err
			return err
		}
		return nil
	})
	if err != nil && err == fnErr {
		return err
	}
	if err != nil {
		return r.storeErr(s, err)
	}
	return nil
}

// rangeWindows calls fn with each window data entry of a window store, in
// either layout (layout.WindowData, layout.WindowByStart).
func (r *Reader) rangeWindows(s *storeDir, fn func(k, v []byte) error) error {
	for _, prefix := range []byte{layout.WindowData, layout.WindowByStart} {
		if err := r.rangeStore(s, []byte{prefix}, []byte{prefix + 1}, fn); err != nil {
			return err
		}
	}
	return nil
}

// Get returns the entries under key in the store called name: one per task
// holding it (one, for a partitioned store). ErrNotFound if none.
func (r *Reader) Get(name string, key []byte) ([]Record, error) {
	ss, err := r.match(name)
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, s := range ss {
		eng, err := r.engine(s)
		if err != nil {
			return nil, err
		}
		v, ok, err := eng.Get(key)
		if err != nil {
			return nil, r.storeErr(s, err)
		}
		if ok {
			out = append(out, Record{Application: s.info.Application, Task: s.info.Task, Partition: s.info.Partition,
				Key: slices.Clone(key), Value: v})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: key %q in store %q", ErrNotFound, key, name)
	}
	return out, nil
}
