package task

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// ID is (sub-topology, partition), printed as "1_3".
type ID struct {
	Sub       int
	Partition int32
}

func (id ID) String() string { return strconv.Itoa(id.Sub) + "_" + strconv.Itoa(int(id.Partition)) }

// Sender is how a task produces: into the instance's current transaction.
// promise may be nil; it is called once the record's fate is known.
type Sender func(r *kgo.Record, promise func(*kgo.Record, error))

// Task runs one sub-topology on one partition. It is a deterministic state
// machine driven by the instance loop: no goroutines, no wall clock except
// what the loop passes in.
//
// Lifecycle: created → restored (open) → running ⇄ (commit | abort) → closed.
//
//	| from     | to       | when                                         |
//	| created  | running  | stores opened and restored from changelogs   |
//	| running  | running  | commit (apply stage) or abort (discard)      |
//	| running  | closed   | partitions revoked or lost, or shutdown      |
type Task struct {
	id    ID
	state State // state.go: where it is in its lifecycle
	sub   *exec.SubTopology
	appID string
	cfg   Config
	send  Sender // the driver's; emit buffers in front of it

	// While a record is processed, what it sends is buffered, so that a
	// record skipped after an error leaves no output behind.
	buffering bool
	buf       []sent
	curNode   *exec.Node           // innermost node running, to blame a panic on
	sources   map[string]*nodeInst // runtime topic name → source
	// the topic of the last record processed, its source and its first
	// watermark input (see Process)
	lastTopic string
	lastSrc   *nodeInst
	lastInput int
	nodes     []*nodeInst
	// the processors that listen to event time and to processing time,
	// and those with in-memory state an abort must return (exec.AbortListener)
	onWatermark, onProcessingTime, onAbort []*nodeInst
	// the buffers of two-phase sinks (exec.Pending): held per unit,
	// taken by the driver at the commit (external.go)
	pending []*nodeInst
	// the processors that hold writes in memory before their stores get
	// them (exec.Holder): held per unit, spilled at the flush
	holders []*nodeInst
	// the sinks that combine a count's records (combine.go), and the
	// records they saved in the open transaction
	combiners []*nodeInst
	saved     int64

	stores  map[string]*store.Staged
	engines map[string]store.Engine
	order   []string // store names in plan order, for deterministic flushes
	// staged holds the stores in plan order too: every record marks and
	// releases them all, without a map lookup each.
	staged []*store.Staged

	// changelog offsets reached in the open transaction, set by produce
	// promises (another goroutine), read after End.
	clMu      sync.Mutex
	clOffsets map[string]int64

	streamTime, committedStreamTime int64
	clock                           clock
	wall                            int64 // the last wall-clock time the driver passed in
	firing                          bool  // inside a watermark listener
	carryWM                         bool  // the plan uses event time: watermarks travel
	recWM                           int64 // see Process
	cur                             recordMeta
	punctuators                     []*punctuator
	// committedPunctuators is how many punctuators there were at the last
	// commit (or after Init): an abort drops those scheduled since.
	committedPunctuators int
	processed            int64
	out                  int64 // records its sinks produced
	late                 int64

	// folders are the nodes whose table updates the task folds until its
	// flush, in topological order (fold.go).
	folders []*nodeInst

	// What the task produces is carved from chunks rather than allocated
	// one by one: key and value bytes from arena, records from recs.
	arena exec.Arena
	recs  []kgo.Record

	// frame is the record a typed chain runs (link), and where.
	frame exec.Frame
}

// record returns a zeroed record for the task to produce, from a chunk of
// records shared with the ones produced just before it; the collector frees
// the chunk once the client has let go of all of them.
func (t *Task) record() *kgo.Record {
	if len(t.recs) == 0 {
		t.recs = make([]kgo.Record, 256)
	}
	r := &t.recs[0]
	t.recs = t.recs[1:]
	return r
}

type sent struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
}

// emit is how operators and stores produce: buffered while a record is being
// processed, passed on when it succeeded, dropped when it failed.
func (t *Task) emit(r *kgo.Record, promise func(*kgo.Record, error)) {
	if t.buffering {
		t.buf = append(t.buf, sent{r, promise})
		return
	}
	t.send(r, promise)
}

// begin starts processing one record as a unit.
func (t *Task) begin() {
	t.buffering = true
	for _, st := range t.staged {
		st.Mark()
	}
	for _, ni := range t.pending {
		ni.proc.(exec.Pending).Mark()
	}
	for _, ni := range t.holders {
		ni.proc.(exec.Holder).Mark()
	}
	for _, ni := range t.combiners {
		ni.comb.Mark()
	}
}

// release keeps the unit: its writes stay staged and its records go out.
func (t *Task) release() {
	for _, st := range t.staged {
		st.Release()
	}
	t.buffering = false
	for i, b := range t.buf {
		t.send(b.r, b.promise)
		t.buf[i] = sent{}
	}
	t.buf = t.buf[:0]
}

// rollback drops the unit: its writes and its records.
func (t *Task) rollback() {
	for _, st := range t.staged {
		st.Rollback()
	}
	for _, ni := range t.pending {
		ni.proc.(exec.Pending).Rollback()
	}
	for _, ni := range t.holders {
		ni.proc.(exec.Holder).Rollback()
	}
	for _, ni := range t.combiners {
		ni.comb.Rollback()
	}
	t.buffering = false
	clear(t.buf)
	t.buf = t.buf[:0]
}

// nodeError blames an error on the node where it arose.
type nodeError struct {
	node  *exec.Node
	class exec.ErrorClass
	err   error
}

func (e *nodeError) Error() string { return e.node.Name + ": " + e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

func blame(n *exec.Node, class exec.ErrorClass, err error) error {
	if err == nil {
		return nil // before ne exists: errors.As would move it to the heap on every call
	}
	var ne *nodeError
	if errors.As(err, &ne) {
		return err
	}
	return &nodeError{node: n, class: class, err: err}
}

type recordMeta struct {
	topic     string
	partition int32
	offset    int64
	ok        bool
	rec       *kgo.Record // the input itself (external.go: a sink's dead letter)
}

type punctuator struct {
	interval time.Duration
	typ      exec.PunctuationType
	next     int64 // ms
	fn       func(ts int64) error
	canceled bool
	// next and canceled at the last commit, to return to on abort: a
	// punctuation that fired in an aborted transaction fires again in
	// its replay.
	committedNext     int64
	committedCanceled bool
}

// Config is what a task needs from the driver around it.
type Config struct {
	AppID    string
	StateDir string
	Send     Sender
	// Errors maps an error class to the application's handler; a class
	// without one gets the default: dead-letter for deserialization, fail
	// for processing and production. Nodes may override (exec.Node.OnError).
	Errors map[exec.ErrorClass]exec.ErrorHandler
	// DeadLetter is the application's dead-letter topic; a source's own
	// wins for the records it read.
	DeadLetter string
	// OnAction, if set, is told of every failed record and the action taken
	// (for logs and metrics).
	OnAction func(exec.ErrorContext, exec.Action)
	// MaxRecordBytes bounds the records the task produces (key, value and
	// headers); a larger one is a production error. Default
	// DefaultMaxRecordBytes, Kafka's default message.max.bytes.
	MaxRecordBytes int
	// InternalPartitions gives the width of each repartition topic (by
	// runtime name) the task reads or writes: the number of upstream
	// writers whose watermarks a reader combines, and the partitions a
	// writer announces its watermark to. Missing: 1.
	InternalPartitions map[string]int32
	// Globals are the application's global tables, by name.
	Globals map[string]store.Engine
	// OnLate, if set, is told of every record that arrived after its
	// windows closed (for metrics).
	OnLate func()
	// OnIgnoredDelete, if set, is told of every delete a node ignored
	// (exec.Context.CountIgnoredDelete; for metrics).
	OnIgnoredDelete func()
	// FoldUpdates folds the updates of cached tables (exec.Node.FoldStore)
	// until the flush: one update per key and commit goes downstream
	// (fold.go). Ignored where the plan uses event time.
	FoldUpdates bool
	// IdleTimeout, if positive, excludes an input from the watermark after
	// that long without records (see window.IdleTimeout): the one
	// wall-clock input of event time.
	IdleTimeout time.Duration
	// Pebble sizes the memory of the task's Pebble stores (a shared block
	// cache, the memtable size); the zero value gives each store its own
	// (store.OpenPebble).
	Pebble store.PebbleOptions
	// ReadCache bounds each stage's cache of committed values
	// (store.WithReadCache). 0: store.DefaultReadCache.
	ReadCache int
	// SkipAbortHooks is for tests only: Abort then leaves the operators'
	// in-memory state (exec.AbortListener) and the punctuation schedules
	// where the aborted transaction moved them, as before issue 15 fixed
	// it, so that the abort checker of topologytest shows it catches that.
	SkipAbortHooks bool
}

// DefaultMaxRecordBytes is Kafka's default message.max.bytes.
const DefaultMaxRecordBytes = 1048588

// MaxTimestamp is the largest record timestamp sluice accepts: the end of
// the year 9999. Together with rejecting negative timestamps it keeps event
// time sane without consulting the wall clock, so the check gives the same
// answer on every replay (invariant 5).
const MaxTimestamp = 253402300799999

// ErrInvalidTimestamp and ErrRecordTooLarge are exec's, which match
// topology's (exec.Sentinel).
var (
	ErrInvalidTimestamp = exec.ErrInvalidTimestamp
	ErrRecordTooLarge   = exec.ErrRecordTooLarge
)

// rangeHeaders and packHeaders are the headers of a changelog record of a
// dropped range and of a pack.
var (
	rangeHeaders = []kgo.RecordHeader{{Key: names.RangeDeleteHeader}}
	packHeaders  = []kgo.RecordHeader{{Key: names.PackHeader}}
)

// AppendChangelogWrites appends to ws the writes a changelog record r
// replays: a range delete for the record of a dropped range
// (names.RangeDeleteHeader), the writes a pack holds (names.PackHeader),
// else the record's key and value. Only a changelog's records may be read
// so: a user's topic (a source table's) could carry the headers.
func AppendChangelogWrites(ws []store.Write, r *kgo.Record) ([]store.Write, error) {
	for _, h := range r.Headers {
		switch h.Key {
		case names.RangeDeleteHeader:
			end := r.Value
			if end == nil {
				end = []byte{} // [start, "") is empty, and End must be set
			}
			return append(ws, store.Write{Key: r.Key, End: end}), nil
		case names.PackHeader:
			ws, err := store.UnpackWrites(ws, r.Key, r.Value)
			if err != nil {
				err = fmt.Errorf("processor: changelog record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			return ws, err
		}
	}
	return append(ws, store.Write{Key: r.Key, Value: r.Value}), nil
}

// DefaultAction is the action for an error class when nobody configured one.
func DefaultAction(c exec.ErrorClass) exec.Action {
	if c == exec.Deserialization {
		return exec.DeadLetter
	}
	return exec.Fail
}

// New builds the task's operator instances and opens its stores (Pebble in
// cfg.StateDir, or in memory); the caller restores the engines, then calls
// Init.
func New(id ID, sub *exec.SubTopology, plan *exec.Plan, cfg Config) (*Task, error) {
	appID, stateDir := cfg.AppID, cfg.StateDir
	if cfg.MaxRecordBytes <= 0 {
		cfg.MaxRecordBytes = DefaultMaxRecordBytes
	}
	t := &Task{
		id: id, sub: sub, appID: appID, send: cfg.Send, cfg: cfg,
		sources:    map[string]*nodeInst{},
		stores:     map[string]*store.Staged{},
		engines:    map[string]store.Engine{},
		clOffsets:  map[string]int64{},
		streamTime: -1, committedStreamTime: -1,
	}
	t.carryWM = plan.UsesEventTime()
	if err := t.newClock(); err != nil {
		return nil, err
	}
	insts := map[*exec.Node]*nodeInst{}
	for _, n := range sub.Nodes {
		ni := &nodeInst{node: n, t: t}
		if n.Kind == exec.KindSink {
			ni.topic = n.Topics[0]
			if n.Internal {
				ni.topic = names.Internal(appID, ni.topic)
			}
			// A count's records combine where its updates fold.
			if n.Combine && cfg.FoldUpdates && !t.carryWM {
				ni.comb = newCombiner()
				t.combiners = append(t.combiners, ni)
			}
		}
		insts[n] = ni
		t.nodes = append(t.nodes, ni)
		if n.Kind == exec.KindSource {
			for _, topic := range n.Topics {
				if n.Internal {
					topic = names.Internal(appID, topic)
				}
				t.sources[topic] = ni
			}
		}
	}
	for _, ni := range t.nodes {
		for _, c := range ni.node.Children {
			ci := insts[c]
			ni.children = append(ni.children, ci)
			if ni.byName == nil {
				ni.byName = map[string]*nodeInst{}
			}
			ni.byName[c.Name] = ci
		}
	}
	for _, name := range sub.Stores {
		spec := plan.Stores[name]
		var eng store.Engine
		switch {
		case spec.InMemory && spec.NewEngine != nil:
			eng = spec.NewEngine()
		case spec.InMemory:
			eng = store.NewMemory()
		default:
			dir := statedir.Store(stateDir, id.String(), name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.closeStores()
				return nil, fmt.Errorf("processor: task %s: %w", id, err)
			}
			var err error
			if eng, err = store.OpenPebbleWith(dir, cfg.Pebble); err != nil {
				t.closeStores()
				return nil, fmt.Errorf("processor: task %s: open store %s: %w", id, name, err)
			}
		}
		var opts []store.StagedOption
		if cfg.ReadCache > 0 {
			opts = append(opts, store.WithReadCache(cfg.ReadCache))
		}
		if !spec.Cache {
			opts = append(opts, store.WithoutCache())
		}
		if spec.Packing != nil {
			opts = append(opts, store.WithPacking(*spec.Packing))
		}
		st := store.NewStaged(name, eng, opts...)
		t.stores[name] = st
		t.engines[name] = eng
		t.order = append(t.order, name)
		t.staged = append(t.staged, st)
		if spec.Source != "" {
			// The source topic is the changelog: the store's checkpoint
			// is the last offset of it the task processed.
			if src := t.sources[spec.Source]; src != nil {
				src.changelogOf = append(src.changelogOf, name)
			}
			continue
		}
		topic := names.Changelog(appID, name)
		// One promise per store, not one closure per record.
		promise := func(r *kgo.Record, err error) {
			if err != nil {
				return // the instance sees the error through its own promise accounting
			}
			t.clMu.Lock()
			if o, ok := t.clOffsets[name]; !ok || r.Offset > o {
				t.clOffsets[name] = r.Offset
			}
			t.clMu.Unlock()
		}
		st.SetChangelog(func(k, v []byte) {
			r := t.record()
			r.Topic, r.Partition, r.Key, r.Value = topic, id.Partition, k, v
			t.emit(r, promise)
		})
		st.SetRangeChangelog(func(start, end []byte) {
			r := t.record()
			r.Topic, r.Partition, r.Key, r.Value, r.Headers = topic, id.Partition, start, end, rangeHeaders
			t.emit(r, promise)
		})
		st.SetPackChangelog(func(key, value []byte) {
			r := t.record()
			r.Topic, r.Partition, r.Key, r.Value, r.Headers = topic, id.Partition, key, value, packHeaders
			t.emit(r, promise)
		})
	}
	for _, ni := range t.nodes {
		if ni.node.FoldStore != "" && t.stores[ni.node.FoldStore] == nil {
			t.closeStores()
			return nil, fmt.Errorf("processor: task %s: %s folds by store %q, which it does not have", id, ni.node.Name, ni.node.FoldStore)
		}
		if ni.fold = t.folder(ni); ni.fold != nil {
			t.folders = append(t.folders, ni)
		}
	}
	return t, nil
}

// Init loads the committed time state and initializes the operators, after
// restore.
func (t *Task) Init() error {
	if err := t.loadTime(); err != nil {
		return err
	}
	for _, ni := range t.nodes {
		if ni.node.Kind != exec.KindProcessor {
			continue
		}
		ni.proc = ni.node.New()
		if err := ni.proc.Init(ni); err != nil {
			return fmt.Errorf("processor: task %s: init %s: %w", t.id, ni.node.Name, err)
		}
		// Listeners are found once, in topological order, so that the
		// per-record call looks at no other node.
		if _, ok := ni.proc.(exec.WatermarkListener); ok {
			t.onWatermark = append(t.onWatermark, ni)
		}
		if _, ok := ni.proc.(exec.ProcessingTimeListener); ok {
			t.onProcessingTime = append(t.onProcessingTime, ni)
		}
		if _, ok := ni.proc.(exec.AbortListener); ok {
			t.onAbort = append(t.onAbort, ni)
		}
		if _, ok := ni.proc.(exec.Pending); ok {
			t.pending = append(t.pending, ni)
		}
		if _, ok := ni.proc.(exec.Holder); ok {
			t.holders = append(t.holders, ni)
		}
	}
	t.commitPunctuators() // those scheduled in Init are committed state
	if err := t.checkFolders(); err != nil {
		return err
	}
	t.link()
	return nil
}

// link builds the typed chains (exec.Typed): every source that takes part
// gets a direct entry from its records' bytes, through the nodes after it
// that take part, to sinks and to the first erased nodes; and every folding
// node, and every node that emits (exec.Typed.Emits), is linked to the
// chain its output goes to.
func (t *Task) link() {
	entries := map[*nodeInst]any{}
	var entry, output func(ni *nodeInst) any
	entry = func(ni *nodeInst) any {
		if e, ok := entries[ni]; ok {
			return e
		}
		var e any
		switch typed := ni.node.Typed; {
		case typed == nil:
		case ni.node.Kind == exec.KindSink && typed.Sink != nil:
			e = typed.Sink(&t.frame, &t.arena, ni.sendFramed)
		case ni.node.Kind == exec.KindProcessor && typed.Link != nil:
			if next := output(ni); next != nil {
				e = typed.Link(&t.frame, ni.proc, next)
			}
		}
		entries[ni] = e
		return e
	}
	// output is what ni's output goes to: its children's entries, or
	// theirs on the erased path.
	output = func(ni *nodeInst) any {
		next := make([]any, len(ni.children))
		for i, c := range ni.children {
			if next[i] = entry(c); next[i] == nil {
				next[i] = ni.node.Typed.Out(&t.frame, c.receive)
			}
		}
		if len(next) == 1 {
			return next[0]
		}
		return ni.node.Typed.Fan(next)
	}
	for _, src := range t.nodes {
		if src.node.Kind == exec.KindSource && src.node.Typed != nil {
			if next := output(src); next != nil {
				src.direct, _ = src.node.Typed.Link(&t.frame, nil, next).(func(k, v []byte) error)
			}
		}
	}
	// A node that sends output of its own (a folding node's held
	// updates, a window's results) sends it through its output's chain,
	// whether or not a chain reaches the node itself.
	for _, ni := range t.nodes {
		if ni.fold != nil || ni.node.Typed != nil && ni.node.Typed.Emits {
			entry(ni)
		}
	}
}

// Process runs one input record through the sub-topology as a unit: if it
// fails, its store writes and outputs are rolled back and the error handler
// decides (invariant 6): Fail returns the error, so that the record's offset
// is never committed; Continue skips it; DeadLetter writes the original
// record to the dead-letter topic.
func (t *Task) Process(r *kgo.Record) error {
	// A task's records come from one topic at a time, mostly: the last
	// one's source spares a map lookup per record.
	src := t.lastSrc
	if src == nil || r.Topic != t.lastTopic {
		if src = t.sources[r.Topic]; src == nil {
			return fmt.Errorf("processor: task %s got a record of topic %q it does not read", t.id, r.Topic)
		}
		t.lastTopic, t.lastSrc, t.lastInput = r.Topic, src, t.clock.base[r.Topic]
	}
	t.cur = recordMeta{topic: r.Topic, partition: r.Partition, offset: r.Offset, ok: true, rec: r}
	defer func() { t.cur = recordMeta{} }()
	t.processed++
	if names := src.changelogOf; len(names) > 0 {
		// Whatever becomes of the record, the stores it feeds reflect
		// the topic up to here once the transaction commits.
		t.clMu.Lock()
		for _, name := range names {
			t.clOffsets[name] = r.Offset
		}
		t.clMu.Unlock()
	}
	if src.node.Internal && len(r.Headers) > 0 && r.Headers[0].Key == exec.HeaderWatermark {
		if err := t.watermarkRecord(r, r.Headers[0].Value); err != nil {
			return t.failed(exec.Deserialization, src.node, src.node, r, err)
		}
		return t.advance()
	}
	// A repartition topic's record without a value is a delete, which a
	// chain cannot carry: it takes the erased path.
	direct := src.direct
	if r.Value == nil && src.node.Internal {
		direct = nil
	}
	var k, v any
	if direct == nil {
		var err error
		if k, v, err = src.node.Decode(r.Key, r.Value); err != nil {
			return t.failed(exec.Deserialization, src.node, src.node, r, err)
		}
	}
	ts, err := t.timestamp(src.node, k, v, r)
	if err == nil && (ts < 0 || ts > MaxTimestamp) {
		err = fmt.Errorf("%w: %d", ErrInvalidTimestamp, ts)
	}
	if err != nil {
		return t.failed(exec.Deserialization, src.node, src.node, r, err)
	}
	t.recWM = t.judgedWatermark(src.node)
	var hs []exec.Header
	for _, h := range r.Headers {
		if src.node.Internal && h.Key == exec.HeaderRecordWatermark && len(h.Value) == 8 {
			t.recWM = max(t.recWM, int64(binary.BigEndian.Uint64(h.Value)))
			continue
		}
		hs = append(hs, exec.Header{Key: h.Key, Value: h.Value})
	}
	// Stream time includes the record while it is processed (as in Kafka
	// Streams), so what the record writes is stamped with its own time.
	prevStreamTime := t.streamTime
	t.streamTime = max(t.streamTime, ts)
	t.begin()
	if direct != nil {
		t.frame = exec.Frame{Timestamp: ts, Headers: hs, Node: src.node, Class: exec.Deserialization}
		err = t.run(src.node, true, func() error { return direct(r.Key, r.Value) })
	} else {
		err = t.run(src.node, false, func() error { return src.forward(exec.Record{Key: k, Value: v, Timestamp: ts, Headers: hs}) })
	}
	if err != nil {
		t.rollback()
		t.streamTime = prevStreamTime
		node, class := src.node, exec.Processing
		var ne *nodeError
		if errors.As(err, &ne) {
			node, class, err = ne.node, ne.class, ne.err
		} else if direct != nil {
			node, class = t.frame.Node, t.frame.Class // where the chain was
		}
		return t.failed(class, node, src.node, r, err)
	}
	t.release()
	t.observe(src.node, t.lastInput, ts)
	if t.streamTime > prevStreamTime {
		if err := t.Punctuate(exec.StreamTime, ts); err != nil {
			return err
		}
	}
	return t.advance()
}

// run runs a record from source src, turning a panic in user code into an
// error of the node it happened in: a processing error, or in a typed
// chain (chained: the record took src's), an error of the class the chain
// was at (a serde's panic is a deserialization or production error there).
func (t *Task) run(src *exec.Node, chained bool, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			node, class := t.curNode, exec.Processing
			if node == nil && chained {
				// Erased nodes are innermost when they run: a chain
				// calls them, and the chains they call (a window's,
				// Task.chain) recover their own panics.
				node, class = t.frame.Node, t.frame.Class
			}
			if node == nil {
				node = src
			}
			err = &nodeError{node: node, class: class, err: fmt.Errorf("panic: %v", p)}
		}
		t.curNode = nil
	}()
	return fn()
}

// failed applies the error handler to a record that failed in node. A
// store whose local copy is damaged is not the record's fault: it stops the
// task whatever the handler says, so that the instance wipes and restores
// the store and processes the record again, instead of dropping or
// dead-lettering a good record (invariant 6).
func (t *Task) failed(class exec.ErrorClass, node, src *exec.Node, r *kgo.Record, cause error) error {
	if errors.Is(cause, store.ErrCorrupted) {
		return fmt.Errorf("processor: task %s: %s in %s at %s/%d@%d: %w", t.id, class, node.Name, r.Topic, r.Partition, r.Offset, cause)
	}
	ec := exec.ErrorContext{
		Class: class, Node: node.Name, Topic: r.Topic, Partition: r.Partition,
		Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Err: cause,
	}
	dlq := src.DeadLetter
	if dlq == "" {
		dlq = t.cfg.DeadLetter
	}
	switch t.decide(node, ec, dlq != "") {
	case exec.Continue:
		return nil
	case exec.DeadLetter:
		t.deadLetter(dlq, r, string(class), cause)
		return nil
	}
	return fmt.Errorf("processor: task %s: %s error in %s at %s/%d@%d: %w", t.id, class, node.Name, r.Topic, r.Partition, r.Offset, cause)
}

// decide asks the error handler of node (or the application's, or the
// default) what to do, and reports the action taken.
func (t *Task) decide(node *exec.Node, ec exec.ErrorContext, canDeadLetter bool) exec.Action {
	h := node.OnError
	if h == nil {
		h = t.cfg.Errors[ec.Class]
	}
	action := DefaultAction(ec.Class)
	if h != nil {
		action = h(ec)
	}
	if action == exec.DeadLetter && !canDeadLetter {
		action = exec.Fail // nowhere to write it: never drop silently
	}
	if t.cfg.OnAction != nil {
		t.cfg.OnAction(ec, action)
	}
	return action
}

// deadLetter writes the original record with its origin in headers
// (invariant 6).
func (t *Task) deadLetter(topic string, r *kgo.Record, class string, cause error) {
	hs := append([]kgo.RecordHeader(nil), r.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: exec.HeaderSourceTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: exec.HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: exec.HeaderSourceOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: exec.HeaderSourceTimestamp, Value: strconv.AppendInt(nil, r.Timestamp.UnixMilli(), 10)},
		kgo.RecordHeader{Key: exec.HeaderErrorClass, Value: []byte(class)},
		kgo.RecordHeader{Key: exec.HeaderErrorMessage, Value: []byte(cause.Error())},
	)
	t.send(&kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}, nil)
}

// Punctuate fires due punctuators of one clock.
func (t *Task) Punctuate(typ exec.PunctuationType, now int64) error {
	for _, p := range t.punctuators {
		if p.canceled || p.typ != typ {
			continue
		}
		if p.next < 0 {
			p.next = now + p.interval.Milliseconds()
			continue
		}
		if now < p.next {
			continue
		}
		for p.next <= now {
			p.next += p.interval.Milliseconds()
		}
		if err := p.fn(now); err != nil {
			return fmt.Errorf("processor: task %s: punctuation: %w", t.id, err)
		}
	}
	return nil
}

// Flush announces the task's watermark downstream, saves its time state and
// hands every store's folded writes to the changelog; called before the
// transaction ends.
func (t *Task) Flush() error {
	if err := t.flushFolds(); err != nil {
		return err
	}
	for _, ni := range t.holders {
		if err := ni.proc.(exec.Holder).Spill(); err != nil {
			return fmt.Errorf("processor: task %s: %s: %w", t.id, ni.node.Name, err)
		}
	}
	if err := t.flushCombined(); err != nil {
		return err
	}
	t.announce()
	if err := t.saveTime(); err != nil {
		return err
	}
	for _, name := range t.order {
		if err := t.stores[name].Flush(); err != nil {
			return fmt.Errorf("processor: task %s: %w", t.id, err)
		}
	}
	return nil
}

// Tick passes the wall clock in (milliseconds): processing-time sources
// read it, idle inputs time out (only with an IdleTimeout), which may
// advance the watermark, and wall-clock punctuations fire.
func (t *Task) Tick(now int64) error {
	t.wall = now
	t.clock.tracker.Tick(now)
	if err := t.advance(); err != nil {
		return err
	}
	for _, ni := range t.onProcessingTime {
		l := ni.proc.(exec.ProcessingTimeListener)
		if err := t.listen(ni, func() error { return l.OnProcessingTime(now) }); err != nil {
			return err
		}
	}
	return t.Punctuate(exec.WallClockTime, now)
}

// Commit applies the stage to the engines with the changelog offsets the
// transaction reached (invariant 2). Called only after the transaction
// committed.
func (t *Task) Commit() error {
	for _, ni := range t.holders {
		if n := ni.proc.(exec.Holder).Held(); n > 0 {
			return fmt.Errorf("processor: task %s: %w: %s holds %d bytes", t.id, store.ErrUnflushed, ni.node.Name, n)
		}
	}
	for _, ni := range t.combiners {
		if n := ni.comb.held(); n > 0 {
			return fmt.Errorf("processor: task %s: %w: %s holds %d bytes", t.id, store.ErrUnflushed, ni.node.Name, n)
		}
	}
	t.clMu.Lock()
	offsets := t.clOffsets
	t.clOffsets = map[string]int64{}
	t.clMu.Unlock()
	for _, name := range t.order {
		cp := store.NoCheckpoint
		if o, ok := offsets[name]; ok {
			cp = o
		}
		if err := t.stores[name].Commit(cp); err != nil {
			return fmt.Errorf("processor: task %s: %w", t.id, err)
		}
	}
	t.committedStreamTime = t.streamTime
	t.commitTime()
	t.commitPunctuators()
	return nil
}

// Abort discards the stage; the consumer rewinds to the committed offsets,
// so the task returns to its committed state: its stores, its time, its
// punctuation schedules and its operators' in-memory state (their due-time
// bounds, exec.AbortListener), so that the replay of the aborted records
// fires exactly what the aborted transaction fired.
func (t *Task) Abort() {
	t.clMu.Lock()
	t.clOffsets = map[string]int64{}
	t.clMu.Unlock()
	for _, name := range t.order {
		t.stores[name].Abort() // held updates go too
	}
	for _, ni := range t.pending {
		ni.proc.(exec.Pending).Drop() // what the transaction held is replayed
	}
	for _, ni := range t.holders {
		ni.proc.(exec.Holder).Drop()
	}
	for _, ni := range t.combiners {
		ni.comb.drop()
	}
	t.saved = 0
	t.streamTime = t.committedStreamTime
	t.abortTime()
	if t.cfg.SkipAbortHooks {
		return
	}
	t.abortPunctuators()
	for _, ni := range t.onAbort {
		ni.proc.(exec.AbortListener).OnAbort()
	}
}

// commitPunctuators remembers the punctuation schedules as committed.
func (t *Task) commitPunctuators() {
	t.committedPunctuators = len(t.punctuators)
	for _, p := range t.punctuators {
		p.committedNext, p.committedCanceled = p.next, p.canceled
	}
}

// abortPunctuators returns the punctuation schedules to the last commit:
// what the aborted transaction scheduled goes (its replay schedules it
// again), and what it fired or canceled is due or live again.
func (t *Task) abortPunctuators() {
	clear(t.punctuators[t.committedPunctuators:])
	t.punctuators = t.punctuators[:t.committedPunctuators]
	for _, p := range t.punctuators {
		p.next, p.canceled = p.committedNext, p.committedCanceled
	}
}

func (t *Task) Close() error {
	t.state = Closed // every state may close (state.go)
	var errs []error
	for _, ni := range t.nodes {
		if ni.proc != nil {
			if err := ni.proc.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, t.closeStores())
	return errors.Join(errs...)
}

func (t *Task) closeStores() error {
	var errs []error
	for _, name := range t.order {
		t.stores[name].Abort()
	}
	for _, e := range t.engines {
		errs = append(errs, e.Close())
	}
	t.engines = map[string]store.Engine{}
	return errors.Join(errs...)
}

// nodeInst is one node in one task; it is the exec.Context of its processor.
type nodeInst struct {
	node     *exec.Node
	t        *Task
	proc     exec.Processor
	children []*nodeInst
	byName   map[string]*nodeInst
	topic    string // sinks: the runtime topic
	// sources: the stores whose changelog is this source's topic
	changelogOf []string
	fold        *store.Staged // the store it holds its updates in, with Config.FoldUpdates
	comb        combining     // sinks: what it combines (exec.Node.Combine), when the task folds
	// sources: the typed chain from the record's bytes (Task.link)
	direct func(k, v []byte) error
}

func (n *nodeInst) forward(r exec.Record) error {
	for _, c := range n.children {
		if err := c.receive(r); err != nil {
			return err
		}
	}
	return nil
}

func (n *nodeInst) receive(r exec.Record) error {
	// No defer: after a panic, curNode must still name the innermost node.
	prev := n.t.curNode
	n.t.curNode = n.node
	var err error
	switch n.node.Kind {
	case exec.KindSink:
		var k, v []byte
		if k, v, err = n.node.Encode(&n.t.arena, r.Key, r.Value); err == nil {
			err = n.sink(k, v, r.Headers, r.Timestamp)
		}
		err = blame(n.node, exec.Production, err)
	default:
		err = blame(n.node, exec.Processing, n.proc.Process(r))
	}
	n.t.curNode = prev
	return err
}

// sink produces what the sink encoded.
func (n *nodeInst) sink(k, v []byte, hs []exec.Header, ts int64) error {
	if n.node.Combine {
		hs = exec.WithoutWeight(hs) // the count's weight is the sink's to write
	}
	if held, err := n.combine(k, v, hs, ts); held || err != nil {
		return err
	}
	if n.node.TaskPartition {
		return n.sendOwn(k, v, hs, ts)
	}
	if n.node.Internal && n.t.carryWM && n.t.recWM != window.NoWatermark {
		hs = append(hs[:len(hs):len(hs)], exec.Header{Key: exec.HeaderRecordWatermark, Value: binary.BigEndian.AppendUint64(nil, uint64(n.t.recWM))})
	}
	return n.Send(n.topic, false, k, v, hs, ts)
}

// sendFramed is sink for a typed chain: the record is the frame's.
func (n *nodeInst) sendFramed(k, v []byte) error {
	return n.sink(k, v, n.t.frame.Headers, n.t.frame.Timestamp)
}

// Forward passes r on. Inside a watermark listener, each forward of the
// listener's own is a unit of its own (Task.fire).
func (n *nodeInst) Forward(r exec.Record) error {
	if n.t.firing && !n.t.buffering {
		return n.t.fire(n, r.Timestamp, func() error { return n.forward(r) })
	}
	return n.forward(r)
}

func (n *nodeInst) ForwardTo(child string, r exec.Record) error {
	c := n.byName[child]
	if c == nil {
		return fmt.Errorf("processor: %s has no child %q", n.node.Name, child)
	}
	if n.t.firing && !n.t.buffering {
		return n.t.fire(n, r.Timestamp, func() error { return c.receive(r) })
	}
	return c.receive(r)
}

func (n *nodeInst) ForwardTyped(ts int64, send func() error) error {
	f := &n.t.frame
	saved := *f // a record's, if a chain's entry forwards while it runs
	f.Timestamp, f.Headers = ts, nil
	var err error
	switch {
	case n.t.firing && !n.t.buffering:
		err = n.t.fire(n, ts, send)
	case n.t.curNode != nil:
		// The erased path brought the record to n, so the task blames
		// what fails by curNode: the chain is blamed as fire blames it.
		err = n.t.chain(n, send)
	default:
		err = send()
	}
	if err == nil {
		*f = saved
	}
	return err
}

func (n *nodeInst) WallClock() int64 { return n.t.wall }

func (n *nodeInst) Folding() bool { return n.fold != nil }

func (n *nodeInst) Global(name string) store.Engine { return n.t.cfg.Globals[name] }

func (n *nodeInst) CountLate() {
	n.t.late++
	if n.t.cfg.OnLate != nil {
		n.t.cfg.OnLate()
	}
}

func (n *nodeInst) CountIgnoredDelete() {
	if n.t.cfg.OnIgnoredDelete != nil {
		n.t.cfg.OnIgnoredDelete()
	}
}

// Watermark is the watermark the current record is judged against, or the
// task's watermark inside a listener.
func (n *nodeInst) Watermark() int64 { return n.t.recWM }

func (n *nodeInst) Children() []string {
	names := make([]string, len(n.children))
	for i, c := range n.children {
		names[i] = c.node.Name
	}
	return names
}

func (n *nodeInst) Store(name string) *store.Staged { return n.t.stores[name] }

func (n *nodeInst) Send(topic string, internal bool, key, value []byte, headers []exec.Header, ts int64) error {
	if internal {
		topic = names.Internal(n.t.appID, topic)
	}
	return n.produce(topic, 0, key, value, headers, ts)
}

// produce sends a record to topic; partition counts only for a topic the
// driver partitions by the record's own (changelogs, offsets-mode sinks).
func (n *nodeInst) produce(topic string, partition int32, key, value []byte, headers []exec.Header, ts int64) error {
	size := len(key) + len(value)
	for _, h := range headers {
		size += len(h.Key) + len(h.Value)
	}
	if limit := n.t.cfg.MaxRecordBytes; size > limit {
		return fmt.Errorf("%w: %d bytes for %s, the limit is %d", ErrRecordTooLarge, size, topic, limit)
	}
	n.t.out++
	rec := n.t.record()
	rec.Topic, rec.Partition, rec.Key, rec.Value, rec.Timestamp = topic, partition, key, value, time.UnixMilli(ts)
	if len(headers) > 0 {
		rec.Headers = make([]kgo.RecordHeader, len(headers))
		for i, h := range headers {
			rec.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	n.t.emit(rec, nil)
	return nil
}

func (n *nodeInst) RecordMeta() (string, int32, int64, bool) {
	c := n.t.cur
	return c.topic, c.partition, c.offset, c.ok
}

func (n *nodeInst) TaskID() string    { return n.t.id.String() }
func (n *nodeInst) Partition() int32  { return n.t.id.Partition }
func (n *nodeInst) StreamTime() int64 { return n.t.streamTime }
func (n *nodeInst) Schedule(interval time.Duration, typ exec.PunctuationType, fn func(int64) error) func() {
	p := &punctuator{interval: interval, typ: typ, next: -1, fn: fn}
	n.t.punctuators = append(n.t.punctuators, p)
	return func() { p.canceled = true }
}

// ID is the task's id.
func (t *Task) ID() ID { return t.id }

// Stores lists the task's store names, in plan order.
func (t *Task) Stores() []string { return t.order }

// Engine is the durable engine of a store, for restoring it.
func (t *Task) Engine(name string) store.Engine { return t.engines[name] }

// Store is the staged view of a store (reads see uncommitted writes).
func (t *Task) Store(name string) *store.Staged { return t.stores[name] }

// Processed counts the input records the task has processed.
func (t *Task) Processed() int64 { return t.processed }

// Out counts the records the task's sinks produced (outputs and repartition
// records), whatever became of their transactions.
func (t *Task) Out() int64 { return t.out }

// Late counts the records that arrived after their windows closed.
func (t *Task) Late() int64 { return t.late }

// StageBytes estimates the memory the task's stages hold (store.Staged's
// Bytes): what the instance's memory budget counts, to end the transaction
// early when the stages fill their share.
func (t *Task) StageBytes() int64 {
	var n int64
	for _, st := range t.stores {
		n += int64(st.Bytes())
	}
	for _, ni := range t.holders {
		n += int64(ni.proc.(exec.Holder).Held())
	}
	for _, ni := range t.combiners {
		n += int64(ni.comb.held())
	}
	return n
}

// TakeSaved returns the records the task's combining sinks saved in the
// transaction that just committed (their count in what they combined,
// less the records they wrote), and forgets them.
func (t *Task) TakeSaved() int64 {
	n := t.saved
	t.saved = 0
	return n
}
