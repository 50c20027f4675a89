package processor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/state"
	"github.com/sluice-streams/sluice/store"
)

// The instance's side of taking a savepoint (DESIGN.md "Taking a
// savepoint"). Every instance reads <app>-savepoint-control with a plain
// consumer (spControl), from the end it saw at start after taking up a
// request still in progress (spInProgress). A request pauses the user input
// topics (repartition topics go on, so that they drain), commits, and
// answers paused with the member's generation and what the coordinator
// needs to know of the topology; a release resumes the inputs or stops the
// instance. Without a release by the request's deadline plus spMargin the
// instance resumes by itself: a dead coordinator never wedges the
// application.

// Message types on the control topic.
const (
	spRequest      = "request"
	spPaused       = "paused"
	spCheckpoint   = "checkpoint"
	spCheckpointed = "checkpointed"
	spRelease      = "release"
)

// spMargin is how long past a request's deadline an instance stays paused
// waiting for the release: the coordinator gives up at the deadline and
// releases, so this only matters when it died.
var spMargin = 10 * time.Second

// spMessage is one record of the control topic, JSON, keyed by the
// savepoint's id. Unknown fields are ignored, so that the protocol can grow.
type spMessage struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// request
	To       string    `json:"to,omitempty"`
	Continue bool      `json:"continue,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
	// paused
	Instance   string      `json:"instance,omitempty"`
	Member     string      `json:"member,omitempty"`
	Generation int32       `json:"generation,omitempty"`
	Topology   *spTopology `json:"topology,omitempty"`
	// Checkpoints (paused): the instance answers checkpoint requests.
	// An instance of an older sluice leaves it out, and the coordinator
	// copies its stores from the changelogs.
	Checkpoints bool `json:"checkpoints,omitempty"`
	// checkpoint: Staging is the directory the savepoint is written in
	// (savepoint.Writer.Staging); it holds spTokenFile with the
	// savepoint's id, which an instance reads to know it sees that
	// directory (same machine, or a shared filesystem).
	Staging string `json:"staging,omitempty"`
	// checkpointed: the store copies written, and why none were (Error).
	Parts []spPart `json:"parts,omitempty"`
	Error string   `json:"error,omitempty"`
	// release
	Stop bool `json:"stop,omitempty"`
}

// spPart is one store copy an instance wrote as a Pebble checkpoint.
type spPart struct {
	Store     string `json:"store"`
	Partition int32  `json:"partition"`
	// Dir is the copy's directory relative to the staging directory
	// (savepoint.PartDir).
	Dir string `json:"dir"`
	// Offset is the changelog checkpoint the copy holds: the offset of
	// the last changelog record it reflects (store.NoCheckpoint: none).
	Offset int64 `json:"offset"`
}

// spCheckpointsDir is where in the staging directory the instances write
// their checkpoints, each under spMemberDir: the coordinator renames the
// ones it takes to their place (savepoint.PartDir) and removes the rest, so
// that a checkpoint it did not wait for never mixes with a copy it writes
// from the changelog.
const spCheckpointsDir = ".checkpoints"

// spMemberDir names a member's directory under spCheckpointsDir.
func spMemberDir(member string) string {
	h := sha256.Sum256([]byte(member))
	return hex.EncodeToString(h[:8])
}

// spTokenFile is the file in a savepoint's staging directory that holds
// its id; the coordinator removes it before the savepoint is committed.
const spTokenFile = ".sluice-savepoint-id"

// spTopology is what the coordinator needs of the topology without having
// it: the fingerprint to check that every instance runs the same one, the
// topics to cut and drain, and each store's identity.
type spTopology struct {
	Fingerprint  string    `json:"fingerprint"`
	Inputs       []string  `json:"inputs"`
	Repartitions []string  `json:"repartitions"`
	Stores       []spStore `json:"stores"`
}

// spStore describes a store of the topology (global tables are not in
// savepoints: they are rebuilt from their topics).
type spStore struct {
	Name        string `json:"name"`
	Layout      string `json:"layout"`
	KeySerde    string `json:"key_serde,omitempty"`
	ValueSerde  string `json:"value_serde,omitempty"`
	SubTopology int    `json:"sub_topology"`
	Partitions  int32  `json:"partitions"`
	Changelog   string `json:"changelog"`
	// SourceBacked: a table whose changelog is its source topic; it is
	// not saved but restored from the topic up to the cut's offsets.
	SourceBacked bool `json:"source_backed,omitempty"`
}

// spControl reads the control topic for the instance, across its
// sessions, and hands requests and releases to the loop.
type spControl struct {
	cl    *kgo.Client
	topic string
	user  map[string]bool // the user input topics, paused by a request

	mu      sync.Mutex
	pending []spMessage
	cur     atomic.Pointer[member] // the session's member, woken on a message

	// act is the savepoint the instance is paused for, nil if none. Only
	// the loop's goroutine touches it.
	act *spActive

	done chan struct{}
}

// spActive is a savepoint in progress on this instance.
type spActive struct {
	req     spMessage
	replied bool  // paused sent for gen
	gen     int32 // the generation the reply named
}

// ensureControlTopic creates the application's savepoint control topic if
// it is missing: one partition, kept forever (retention.ms -1). Its
// records are a few hundred bytes per savepoint, and the seed marker of a
// start from a savepoint (key sluice.savepoint.seeded) must outlive any
// retention: a replica restarted with --from-savepoint still given, months
// later, finds it and joins. Not compacted: the protocol's records share
// their savepoint's id as key, and none may vanish before every instance
// read it.
func ensureControlTopic(ctx context.Context, adm *kadm.Client, appID string) error {
	topic := names.SavepointControl(appID)
	forever, del := "-1", "delete"
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"retention.ms": &forever, "cleanup.policy": &del}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("processor: create %s: %w", topic, err)
	}
	return nil
}

// spHistory is how far back an instance starting looks for a savepoint
// request still in progress: longer than any savepoint's timeout. A
// variable for the negative control of the test of a restart during a
// savepoint.
var spHistory = 24 * time.Hour

// startSavepointControl creates the control topic if needed, takes up a
// request still in progress (one written before this instance started,
// not released and not past its deadline: an instance restarted during a
// savepoint must answer it, or the savepoint fails), and goes on reading
// from the end it saw.
func (a *App) startSavepointControl(ctx context.Context) (*spControl, error) {
	topic := names.SavepointControl(a.cfg.appID)
	acl, err := kgo.NewClient(a.cfg.kgoOpts()...)
	if err != nil {
		return nil, fmt.Errorf("processor: savepoint control: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(acl)
	err = ensureControlTopic(cctx, adm, a.cfg.appID)
	var end int64
	var inFlight []spMessage
	if err == nil {
		end, inFlight, err = spInProgress(cctx, a, adm, topic)
	}
	acl.Close()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(a.cfg.kgoOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(end)}}),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		return nil, fmt.Errorf("processor: savepoint control: %w", err)
	}
	c := &spControl{cl: cl, topic: topic, user: map[string]bool{}, done: make(chan struct{}), pending: inFlight}
	for _, sub := range a.plan.Subs {
		topics, internal := sub.SourceTopics()
		for i, t := range topics {
			if !internal[i] {
				c.user[t] = true
			}
		}
	}
	go c.read(a)
	return c, nil
}

// spInProgress reads the control topic's last spHistory up to its end (the
// offset returned) and returns the requests in it that are neither
// released nor past their deadline.
func spInProgress(ctx context.Context, a *App, adm *kadm.Client, topic string) (int64, []spMessage, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, nil, fmt.Errorf("processor: savepoint control: %w", err)
	}
	e, _ := ends.Lookup(topic, 0)
	end := e.Offset
	froms, err := adm.ListOffsetsAfterMilli(ctx, time.Now().Add(-spHistory).UnixMilli(), topic)
	if err == nil {
		err = froms.Error()
	}
	if err != nil {
		return 0, nil, fmt.Errorf("processor: savepoint control: %w", err)
	}
	f, _ := froms.Lookup(topic, 0)
	from := f.Offset
	if from < 0 || from >= end {
		return end, nil, nil // nothing within the history (-1: past the last record)
	}
	cl, err := kgo.NewClient(a.cfg.kgoOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return 0, nil, fmt.Errorf("processor: savepoint control: %w", err)
	}
	defer cl.Close()
	var reqs []spMessage
	released := map[string]bool{}
	for pos := from; pos < end; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, nil, fmt.Errorf("processor: savepoint control: reading what is in progress: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos = max(pos, r.Offset+1)
			if r.Offset >= end || r.Attrs.IsControl() {
				return
			}
			var msg spMessage
			if json.Unmarshal(r.Value, &msg) != nil {
				return
			}
			switch msg.Type {
			case spRequest:
				reqs = append(reqs, msg)
			case spRelease:
				released[msg.ID] = true
			}
		})
	}
	var open []spMessage
	for _, r := range reqs {
		if !released[r.ID] && time.Now().Before(r.Deadline) {
			a.log.Info("savepoint: a request is in progress", "savepoint", r.ID, "to", r.To, "deadline", r.Deadline)
			open = append(open, r)
		}
	}
	return end, open, nil
}

// read takes requests and releases off the control topic until the client
// closes.
func (c *spControl) read(a *App) {
	defer close(c.done)
	for {
		fs := c.cl.PollFetches(context.Background())
		if fs.IsClientClosed() {
			return
		}
		var got bool
		fs.EachRecord(func(r *kgo.Record) {
			var msg spMessage
			if err := json.Unmarshal(r.Value, &msg); err != nil {
				a.log.Warn("savepoint: unreadable control record", "topic", r.Topic, "offset", r.Offset, "err", err)
				return
			}
			if msg.Type != spRequest && msg.Type != spRelease && msg.Type != spCheckpoint {
				return // the instances' own answers
			}
			if a.spDeaf.Load() {
				return // tests: an instance that never answers
			}
			c.mu.Lock()
			c.pending = append(c.pending, msg)
			c.mu.Unlock()
			got = true
		})
		if got {
			if m := c.cur.Load(); m != nil {
				m.enqueue(event{savepoint: true})
			}
		}
	}
}

func (c *spControl) take() []spMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs := c.pending
	c.pending = nil
	return msgs
}

func (c *spControl) close() {
	if c == nil {
		return
	}
	c.cl.Close()
	<-c.done
}

// userTopics lists the topics a request pauses.
func (c *spControl) userTopics() []string {
	out := make([]string, 0, len(c.user))
	for t := range c.user {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// attach makes m the member woken by control messages, and pauses its
// inputs if a savepoint is in progress (a session rebuilt while paused).
func (c *spControl) attach(m *member) {
	if c == nil {
		return
	}
	c.cur.Store(m)
	if c.act != nil {
		m.sess.Client().PauseFetchTopics(c.userTopics()...)
		c.act.replied = false
	}
}

// cutPausedInput drops user input records polled while the inputs are
// paused (fetched before the pause took effect) and sets each partition's
// position back to the first dropped record: the transaction then commits
// exactly what was processed, and they are read again on resuming.
func (m *member) cutPausedInput(batches map[task.ID][][]*kgo.Record) {
	c := m.a.spc
	if c == nil || c.act == nil {
		return
	}
	for id, parts := range batches {
		for i, recs := range parts {
			if len(recs) == 0 || !c.user[recs[0].Topic] {
				continue
			}
			r := recs[0]
			m.sess.Client().SetOffsets(map[string]map[int32]kgo.EpochOffset{r.Topic: {r.Partition: {Epoch: -1, Offset: r.Offset}}})
			parts[i] = nil
		}
		batches[id] = parts
	}
}

// stepSavepoint takes the control messages, pauses, answers, resumes. It
// runs at the end of a loop iteration, when the transaction may end. stop
// reports that a release asked the instance to stop: it committed and the
// loop returns.
func (m *member) stepSavepoint(ctx context.Context) (stop bool, err error) {
	c := m.a.spc
	if c == nil {
		return false, nil
	}
	cl := m.sess.Client()
	msgs := c.take()
	if len(msgs) == 0 && c.act == nil {
		return false, nil
	}
	// Pausing, checkpoints and commits want the tasks idle.
	if err := m.work.drain(); err != nil {
		m.end(false, AbortProcessing)
		return false, fatalError{err}
	}
	for _, msg := range msgs {
		switch msg.Type {
		case spRequest:
			if c.act != nil && c.act.req.ID == msg.ID {
				continue
			}
			if time.Now().After(msg.Deadline) {
				m.a.log.Warn("savepoint: ignoring a request past its deadline", "savepoint", msg.ID, "to", msg.To)
				continue
			}
			if c.act != nil {
				m.a.log.Warn("savepoint: a new request replaces the one in progress", "savepoint", msg.ID, "replaced", c.act.req.ID)
			}
			c.act = &spActive{req: msg}
			cl.PauseFetchTopics(c.userTopics()...)
			m.a.log.Info("savepoint: pausing the input topics", "savepoint", msg.ID, "to", msg.To, "deadline", msg.Deadline)
		case spCheckpoint:
			if c.act == nil || c.act.req.ID != msg.ID || m.a.spOld.Load() {
				continue
			}
			m.checkpointStores(ctx, msg)
		case spRelease:
			if c.act == nil || c.act.req.ID != msg.ID {
				continue
			}
			dir := c.act.req.To
			c.act = nil
			if msg.Stop {
				if _, err := m.end(true, AbortShutdown); err != nil {
					return false, err
				}
				m.a.spStopped.Store(&dir)
				m.a.log.Info("stopped with savepoint "+dir, "savepoint", msg.ID)
				return true, nil
			}
			cl.ResumeFetchTopics(c.userTopics()...)
			m.a.log.Info("savepoint: taken; resuming the input topics", "savepoint", msg.ID, "to", dir)
		}
	}
	act := c.act
	if act == nil {
		return false, nil
	}
	if time.Now().After(act.req.Deadline.Add(spMargin)) {
		c.act = nil
		cl.ResumeFetchTopics(c.userTopics()...)
		m.a.log.Warn("savepoint: no release by the deadline; resuming the input topics", "savepoint", act.req.ID, "deadline", act.req.Deadline)
		return false, nil
	}
	member, gen := cl.GroupMetadata()
	if act.replied && act.gen == gen {
		return false, nil
	}
	// Answer only from a settled membership, with nothing of a revoked
	// task pending, after a commit of everything processed so far.
	if !m.a.status.isJoined() || !m.assignedLast || len(m.own.closing) > 0 || gen <= 0 {
		return false, nil
	}
	if _, err := m.end(true, AbortRebalance); err != nil {
		return false, err
	}
	reply := spMessage{Type: spPaused, ID: act.req.ID, Instance: m.a.txnID, Member: member, Generation: gen, Topology: m.a.spTopology(),
		Checkpoints: !m.a.spOld.Load()}
	b, err := json.Marshal(reply)
	if err != nil {
		return false, fmt.Errorf("processor: savepoint: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.cl.ProduceSync(pctx, &kgo.Record{Topic: c.topic, Key: []byte(act.req.ID), Value: b}).FirstErr(); err != nil {
		// The coordinator waits for the answer; the next step tries again.
		m.a.log.Warn("savepoint: cannot answer", "savepoint", act.req.ID, "err", err)
		return false, nil
	}
	act.replied, act.gen = true, gen
	m.a.log.Info("savepoint: paused", "savepoint", act.req.ID, "member", member, "generation", gen)
	return false, nil
}

// spTopology describes the topology for the coordinator.
func (a *App) spTopology() *spTopology {
	t := &spTopology{Fingerprint: a.built.Fingerprint()}
	global := map[string]bool{}
	for _, g := range a.plan.Globals {
		global[g.Name] = true
	}
	for _, sub := range a.plan.Subs {
		topics, internal := sub.SourceTopics()
		for i, topic := range topics {
			if internal[i] {
				t.Repartitions = append(t.Repartitions, names.Internal(a.cfg.appID, topic))
			} else {
				t.Inputs = append(t.Inputs, topic)
			}
		}
	}
	slices.Sort(t.Inputs)
	t.Inputs = slices.Compact(t.Inputs)
	slices.Sort(t.Repartitions)
	t.Repartitions = slices.Compact(t.Repartitions)
	layouts := state.Layouts(a.built)
	changelogs := a.ChangelogTopics()
	for name, spec := range a.plan.Stores {
		if global[name] {
			continue
		}
		sub := a.plan.StoreSub[name]
		t.Stores = append(t.Stores, spStore{Name: name, Layout: layouts[name], KeySerde: spec.KeySerde, ValueSerde: spec.ValueSerde,
			SubTopology: sub, Partitions: a.partitions[sub], Changelog: changelogs[name], SourceBacked: spec.Source != ""})
	}
	sort.Slice(t.Stores, func(i, j int) bool { return t.Stores[i].Name < t.Stores[j].Name })
	return t
}

// StoppedWithSavepoint reports the directory of the savepoint that stopped
// Run ("" if none did).
func (a *App) StoppedWithSavepoint() string {
	if p := a.spStopped.Load(); p != nil {
		return *p
	}
	return ""
}

// spTakeCheckpoint writes a Pebble checkpoint of eng into dir and returns
// the changelog offset it holds; a variable for the test that hands the
// coordinator a checkpoint taken before the cut.
var spTakeCheckpoint = func(eng *store.Pebble, id task.ID, name, dir string) (int64, error) {
	return eng.CheckpointTo(dir)
}

// checkpointStores answers a checkpoint request: the instance is paused and
// the coordinator has read the cut, so each of its active tasks' Pebble
// stores holds the committed state up to its changelog checkpoint
// (invariant 2: staged writes reach Pebble only after their commit, with
// the offset they reach). It writes a Pebble checkpoint of each into the
// savepoint's staging directory, when this instance sees it, and reports
// the copies with their offsets; the coordinator checks each offset
// against the cut and copies from the changelog any store it does not
// take. A failure here is never the savepoint's: the store is just not
// reported.
func (m *member) checkpointStores(ctx context.Context, msg spMessage) {
	c := m.a.spc
	member, gen := m.sess.Client().GroupMetadata()
	reply := spMessage{Type: spCheckpointed, ID: msg.ID, Instance: m.a.txnID, Member: member, Generation: gen}
	tok, err := os.ReadFile(filepath.Join(msg.Staging, spTokenFile))
	switch {
	case msg.Staging == "" || !filepath.IsAbs(msg.Staging):
		reply.Error = fmt.Sprintf("no usable staging directory %q", msg.Staging)
	case err != nil || string(tok) != msg.ID:
		reply.Error = fmt.Sprintf("the savepoint's directory %s is not reachable from this instance (%v)", msg.Staging, cmpOr(err, errors.New("another savepoint's")))
	}
	start := time.Now()
	if reply.Error == "" {
		for _, id := range slices.SortedFunc(maps.Keys(m.tasks), cmpTaskID) {
			t := m.tasks[id]
			for _, name := range t.Stores() {
				eng, ok := t.Engine(name).(*store.Pebble)
				if !ok || m.a.plan.Stores[name].Source != "" {
					continue // in memory, or restored from its source topic
				}
				// The coordinator removes the token when it stops waiting:
				// a late instance then stops writing (DESIGN.md).
				if _, err := os.Stat(filepath.Join(msg.Staging, spTokenFile)); err != nil {
					reply.Error = "the coordinator stopped waiting"
					break
				}
				rel := path.Join(spCheckpointsDir, spMemberDir(member), id.String(), name)
				dir := filepath.Join(msg.Staging, filepath.FromSlash(rel))
				off, err := spTakeCheckpoint(eng, id, name, dir)
				if err != nil {
					_ = os.RemoveAll(dir)
					m.a.log.Warn("savepoint: cannot checkpoint a store; the coordinator copies it from its changelog", "savepoint", msg.ID, "task", id.String(), "store", name, "err", err)
					continue
				}
				reply.Parts = append(reply.Parts, spPart{Store: name, Partition: id.Partition, Dir: rel, Offset: off})
			}
		}
	}
	b, err := json.Marshal(reply)
	if err != nil {
		m.a.log.Warn("savepoint: cannot answer the checkpoint request", "savepoint", msg.ID, "err", err)
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.cl.ProduceSync(pctx, &kgo.Record{Topic: c.topic, Key: []byte(msg.ID), Value: b}).FirstErr(); err != nil {
		// The coordinator copies this instance's stores from the changelogs.
		m.a.log.Warn("savepoint: cannot answer the checkpoint request", "savepoint", msg.ID, "err", err)
		return
	}
	m.a.log.Info("savepoint: stores checkpointed", "savepoint", msg.ID, "stores", len(reply.Parts), "took", time.Since(start).Round(time.Millisecond), "unreachable", reply.Error)
}
