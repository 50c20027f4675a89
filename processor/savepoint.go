package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/savepoint"
)

// Taking a savepoint: the coordinator (DESIGN.md "Taking a savepoint").
//
//  1. refuse an existing directory (savepoint.Create) before anything;
//  2. write a request on <app>-savepoint-control;
//  3. wait until every member of the group answered paused for one
//     generation, all with one topology fingerprint;
//  4. wait until the repartition topics are drained: every partition's
//     committed offset reached its end, with only transaction markers or
//     aborted records between; the committed offsets read twice around the
//     ends, equal, so that no commit happened in between;
//  5. record the cut (input offsets with their metadata, changelog ends)
//     and copy each store's changelog partitions up to the cut's end into
//     the savepoint, as a task's restore would;
//  6. commit the manifest, and only then release the instances.
//
// Any failure releases the instances with stop false (they go on) and
// leaves no directory.

// DefaultSavepointTimeout bounds TakeSavepoint when SavepointTimeout is not
// given.
const DefaultSavepointTimeout = 60 * time.Second

// SavepointContinue makes the instances go on after the savepoint is
// written, instead of stopping (Flink's stop-with-savepoint is the
// default). Only TakeSavepoint reads it.
func SavepointContinue() Opt { return opt(func(c *config) { c.spContinue = true }) }

// SavepointTimeout bounds the whole of TakeSavepoint: the instances'
// answers, the drain and the writing. Default DefaultSavepointTimeout. Only
// TakeSavepoint reads it.
func SavepointTimeout(d time.Duration) Opt { return opt(func(c *config) { c.spTimeout = d }) }

// noInstanceWait is how long the coordinator waits for a member to appear
// in an empty group before it says no instance runs.
const noInstanceWait = 5 * time.Second

// ErrSavepoint is wrapped by the errors of TakeSavepoint after the request
// was sent: the application was released and goes on.
var ErrSavepoint = errors.New("processor: savepoint failed")

// TakeSavepoint asks the running instances of application appID to reach
// a consistent cut and writes it to dir (which must not exist): the
// application's input offsets, its stores and a manifest. The instances
// then stop (their Run returns nil), or go on with SavepointContinue.
// opts give the brokers and client options (Brokers, ClientOptions, ...),
// SavepointContinue and SavepointTimeout; the rest are ignored. On error
// dir does not exist and the instances go on.
func TakeSavepoint(ctx context.Context, appID, dir string, opts ...Opt) (*savepoint.Manifest, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	cfg.appID = appID
	return takeSavepoint(ctx, &cfg, dir)
}

// TakeSavepoint is the function TakeSavepoint for the application a runs,
// with a's brokers, client options and logger: what POST /savepoint
// (processor/serve) calls. opts add SavepointContinue and SavepointTimeout.
// With a stop (no SavepointContinue), a's own Run returns nil too.
func (a *App) TakeSavepoint(ctx context.Context, dir string, opts ...Opt) (*savepoint.Manifest, error) {
	cfg := a.cfg
	cfg.spContinue, cfg.spTimeout = false, 0
	for _, o := range opts {
		o.apply(&cfg)
	}
	cfg.appID = a.cfg.appID
	return takeSavepoint(ctx, &cfg, dir)
}

func takeSavepoint(ctx context.Context, cfg *config, dir string) (*savepoint.Manifest, error) {
	if cfg.appID == "" {
		return nil, errors.New("processor: savepoint: application.id is required")
	}
	if cfg.spTimeout <= 0 {
		cfg.spTimeout = DefaultSavepointTimeout
	}
	// Absolute: the instances log where the savepoint went.
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	w, err := savepoint.Create(dir)
	if err != nil {
		return nil, err
	}
	c := &coordinator{cfg: cfg, w: w, log: cfg.logger}
	m, err := c.run(ctx)
	if err != nil {
		w.Abort()
		return nil, err
	}
	return m, nil
}

type coordinator struct {
	cfg *config
	w   *savepoint.Writer
	log interface {
		Info(string, ...any)
		Warn(string, ...any)
	}
	cl       *kgo.Client
	adm      *kadm.Client
	topic    string
	id       string
	deadline time.Time
}

func (c *coordinator) run(ctx context.Context) (_ *savepoint.Manifest, err error) {
	c.deadline = time.Now().Add(c.cfg.spTimeout)
	ctx, cancel := context.WithDeadline(ctx, c.deadline)
	defer cancel()
	c.topic = names.SavepointControl(c.cfg.appID)
	var b [8]byte
	_, _ = rand.Read(b[:])
	c.id = hex.EncodeToString(b[:])

	admCl, err := kgo.NewClient(c.cfg.kgoOpts()...)
	if err != nil {
		return nil, fmt.Errorf("processor: savepoint: %w", err)
	}
	defer admCl.Close()
	c.adm = kadm.NewClient(admCl)
	if err := ensureControlTopic(ctx, c.adm, c.cfg.appID); err != nil {
		return nil, err
	}
	// Read the answers from the control topic's end before the request:
	// nothing written after it is missed.
	from, err := listOffset(ctx, c.adm.ListEndOffsets, c.topic, 0)
	if err != nil {
		return nil, fmt.Errorf("processor: savepoint: %w", err)
	}
	c.cl, err = kgo.NewClient(c.cfg.kgoOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: {0: kgo.NewOffset().At(from)}}),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		return nil, fmt.Errorf("processor: savepoint: %w", err)
	}
	defer c.cl.Close()

	if err := c.send(ctx, spMessage{Type: spRequest, ID: c.id, To: c.w.Dir(), Continue: c.cfg.spContinue, Deadline: c.deadline}); err != nil {
		return nil, err
	}
	c.log.Info("savepoint: requested", "savepoint", c.id, "application", c.cfg.appID, "to", c.w.Dir(), "deadline", c.deadline)
	defer func() {
		if err != nil {
			// The instances go on; a release that cannot be sent is
			// replaced by their own deadline.
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if rerr := c.send(rctx, spMessage{Type: spRelease, ID: c.id}); rerr != nil {
				c.log.Warn("savepoint: cannot release the instances; they resume by themselves at the deadline", "err", rerr, "deadline", c.deadline.Add(spMargin))
			}
			err = fmt.Errorf("%w: %w (the application goes on; nothing was written to %s)", ErrSavepoint, err, c.w.Dir())
		}
	}()

	replies, top, err := c.waitPaused(ctx)
	if err != nil {
		return nil, err
	}
	cut, err := c.waitDrained(ctx, top)
	if err != nil {
		return nil, err
	}
	m, err := c.write(ctx, top, cut, replies)
	if err != nil {
		return nil, err
	}
	// The cut holds if no member joined or left since the answers: a new
	// member would not be paused.
	if err := c.sameMembers(ctx, replies); err != nil {
		return nil, err
	}
	if time.Now().After(c.deadline) {
		return nil, fmt.Errorf("savepoint not written by the deadline %s", c.deadline.Format(time.RFC3339))
	}
	if err := c.w.Commit(m); err != nil {
		return nil, err
	}
	// Written: from here on a failure to release leaves the instances
	// paused until their deadline, then they go on; the savepoint stands.
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if rerr := c.send(rctx, spMessage{Type: spRelease, ID: c.id, Stop: !c.cfg.spContinue}); rerr != nil {
		c.log.Warn("savepoint: written, but the release was not sent; the instances resume at the deadline", "err", rerr)
	}
	return m, nil
}

func (c *coordinator) send(ctx context.Context, msg spMessage) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("processor: savepoint: %w", err)
	}
	if err := c.cl.ProduceSync(ctx, &kgo.Record{Topic: c.topic, Key: []byte(msg.ID), Value: b}).FirstErr(); err != nil {
		return fmt.Errorf("processor: savepoint: write %s to %s: %w", msg.Type, c.topic, err)
	}
	return nil
}

// waitPaused waits until every member of the group answered paused for
// the same generation with the same topology.
func (c *coordinator) waitPaused(ctx context.Context) (map[string]spMessage, *spTopology, error) {
	replies := map[string]spMessage{} // member id → its latest answer
	var members []kadm.DescribedGroupMember
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := c.cl.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			var msg spMessage
			if json.Unmarshal(r.Value, &msg) == nil && msg.Type == spPaused && msg.ID == c.id {
				replies[msg.Member] = msg
			}
		})
		if ctx.Err() != nil {
			return nil, nil, c.notAnswered(members, replies)
		}
		groups, err := c.adm.DescribeGroups(ctx, c.cfg.appID)
		if err != nil {
			continue
		}
		g, ok := groups[c.cfg.appID]
		if !ok {
			continue
		}
		empty := g.State == "Dead" || g.State == "Empty" || errors.Is(g.Err, kerr.GroupIDNotFound)
		if empty {
			// Given a few seconds: an instance may be (re)joining.
			if time.Since(c.deadline.Add(-c.cfg.spTimeout)) > noInstanceWait {
				return nil, nil, fmt.Errorf("no instance of application %s is running (its group %s has no member)", c.cfg.appID, c.cfg.appID)
			}
			continue
		}
		if g.Err != nil {
			continue
		}
		members = g.Members
		if g.State != "Stable" || len(members) == 0 {
			continue
		}
		gen, all := int32(-1), true
		for _, mem := range members {
			r, ok := replies[mem.MemberID]
			if !ok || gen >= 0 && r.Generation != gen {
				all = false
				break
			}
			gen = r.Generation
		}
		if !all {
			continue
		}
		fp := replies[members[0].MemberID].Topology
		for _, mem := range members {
			r := replies[mem.MemberID]
			if r.Topology == nil || fp == nil || r.Topology.Fingerprint != fp.Fingerprint {
				return nil, nil, fmt.Errorf("instances run different topologies: %s (%s) has %s, %s (%s) has %s",
					members[0].MemberID, replies[members[0].MemberID].Instance, fpOf(fp), mem.MemberID, r.Instance, fpOf(r.Topology))
			}
		}
		out := map[string]spMessage{}
		for _, mem := range members {
			out[mem.MemberID] = replies[mem.MemberID]
		}
		c.log.Info("savepoint: every instance paused", "savepoint", c.id, "members", len(members), "generation", gen)
		return out, fp, nil
	}
}

func fpOf(t *spTopology) string {
	if t == nil {
		return "none"
	}
	return t.Fingerprint
}

// notAnswered names the members that did not answer by the deadline.
func (c *coordinator) notAnswered(members []kadm.DescribedGroupMember, replies map[string]spMessage) error {
	var missing []string
	for _, mem := range members {
		if _, ok := replies[mem.MemberID]; !ok {
			missing = append(missing, fmt.Sprintf("member %s (client %s on %s)", mem.MemberID, mem.ClientID, mem.ClientHost))
		}
	}
	if len(missing) == 0 {
		return fmt.Errorf("the group did not settle with every instance paused within %v (%d answers, %d members)", c.cfg.spTimeout, len(replies), len(members))
	}
	return fmt.Errorf("not every instance answered within %v: %s did not", c.cfg.spTimeout, strings.Join(missing, ", "))
}

// sameMembers checks that the group's members are still the ones that
// answered.
func (c *coordinator) sameMembers(ctx context.Context, replies map[string]spMessage) error {
	groups, err := c.adm.DescribeGroups(ctx, c.cfg.appID)
	if err == nil {
		err = groups.Error()
	}
	if err != nil {
		return fmt.Errorf("describe group %s: %w", c.cfg.appID, err)
	}
	g := groups[c.cfg.appID]
	now := map[string]bool{}
	for _, mem := range g.Members {
		now[mem.MemberID] = true
	}
	if g.State != "Stable" || !maps.Equal(now, mapKeys(replies)) {
		return fmt.Errorf("the group changed while the savepoint was taken (state %s, %d members, %d had answered)", g.State, len(now), len(replies))
	}
	return nil
}

func mapKeys[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// cut is the consistent cut: the group's committed offsets and the
// changelogs' ends, read while nothing was in flight.
type cut struct {
	committed kadm.OffsetResponses
	ends      kadm.ListedOffsets // last stable offsets of the changelogs
}

// waitDrained waits until the repartition topics are drained and the
// changelogs settled, and returns the cut.
func (c *coordinator) waitDrained(ctx context.Context, top *spTopology) (*cut, error) {
	var changelogs []string
	for _, s := range top.Stores {
		if !s.SourceBacked {
			changelogs = append(changelogs, s.Changelog)
		}
	}
	var why string
	probed := map[string]bool{}
	for ctx.Err() == nil {
		quiet, w, err := c.drained(ctx, top, changelogs, probed)
		if err != nil && ctx.Err() == nil {
			why = err.Error()
		} else if quiet != nil {
			return quiet, nil
		} else {
			why = w
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("the application did not drain within %v: %s", c.cfg.spTimeout, why)
}

// drained reads the cut once: committed offsets, then the ends, then the
// committed offsets again. It returns the cut if it holds, else why not.
func (c *coordinator) drained(ctx context.Context, top *spTopology, changelogs []string, probed map[string]bool) (*cut, string, error) {
	c1, err := c.committed(ctx)
	if err != nil {
		return nil, "", err
	}
	var rep kadm.ListedOffsets
	if len(top.Repartitions) > 0 {
		if rep, err = c.adm.ListCommittedOffsets(ctx, top.Repartitions...); err == nil {
			err = rep.Error()
		}
		if err != nil {
			return nil, "", fmt.Errorf("list repartition ends: %w", err)
		}
	}
	var lso, hw kadm.ListedOffsets
	if len(changelogs) > 0 {
		if lso, err = c.adm.ListCommittedOffsets(ctx, changelogs...); err == nil {
			err = lso.Error()
		}
		if err != nil {
			return nil, "", fmt.Errorf("list changelog ends: %w", err)
		}
		if hw, err = c.adm.ListEndOffsets(ctx, changelogs...); err == nil {
			err = hw.Error()
		}
		if err != nil {
			return nil, "", fmt.Errorf("list changelog ends: %w", err)
		}
	}
	c2, err := c.committed(ctx)
	if err != nil {
		return nil, "", err
	}
	if !sameOffsets(c1, c2) {
		return nil, "the group committed while the cut was read", nil
	}
	for _, t := range sortedTopics(rep) {
		for _, o := range sortedParts(rep[t]) {
			at := int64(0)
			if r, ok := c1.Lookup(t, o.Partition); ok && r.Err == nil && r.At >= 0 {
				at = r.At
			}
			if at >= o.Offset {
				continue
			}
			key := fmt.Sprintf("%s/%d@%d-%d", t, o.Partition, at, o.Offset)
			if probed[key] {
				continue
			}
			only, err := c.onlyMarkers(ctx, t, o.Partition, at, o.Offset)
			if err != nil {
				return nil, "", err
			}
			if !only {
				return nil, fmt.Sprintf("repartition partition %s/%d has records in flight (committed %d, end %d)", t, o.Partition, at, o.Offset), nil
			}
			probed[key] = true
		}
	}
	for _, t := range sortedTopics(lso) {
		for _, o := range sortedParts(lso[t]) {
			if h, ok := hw.Lookup(t, o.Partition); ok && h.Offset != o.Offset {
				return nil, fmt.Sprintf("changelog partition %s/%d has a transaction open (last stable offset %d < high watermark %d)", t, o.Partition, o.Offset, h.Offset), nil
			}
		}
	}
	return &cut{committed: c1, ends: lso}, "", nil
}

// committed reads the group's committed offsets, waiting out a commit in
// progress (RequireStable).
func (c *coordinator) committed(ctx context.Context) (kadm.OffsetResponses, error) {
	for {
		rs, err := c.adm.FetchOffsets(kadm.RequireStable(ctx), c.cfg.appID)
		if err == nil {
			err = rs.Error()
		}
		if err == nil {
			return rs, nil
		}
		if !errors.Is(err, kerr.UnstableOffsetCommit) || ctx.Err() != nil {
			return nil, fmt.Errorf("committed offsets of group %s: %w", c.cfg.appID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sameOffsets(a, b kadm.OffsetResponses) bool {
	n := 0
	for t, ps := range a {
		for p, o := range ps {
			n++
			ob, ok := b.Lookup(t, p)
			if !ok || ob.At != o.At || ob.Metadata != o.Metadata {
				return false
			}
		}
	}
	m := 0
	for _, ps := range b {
		m += len(ps)
	}
	return n == m
}

func sortedTopics[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func sortedParts(m map[int32]kadm.ListedOffset) []kadm.ListedOffset {
	out := slices.Collect(maps.Values(m))
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out
}

// onlyMarkers reports whether [from, end) of t/p holds no record that
// read_committed returns: only transaction markers and aborted records
// (bounded.go's probeEnded, with an answer instead of a guess).
func (c *coordinator) onlyMarkers(ctx context.Context, t string, p int32, from, end int64) (bool, error) {
	cl, err := kgo.NewClient(c.cfg.kgoOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t: {p: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return false, fmt.Errorf("probe %s/%d: %w", t, p, err)
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	pos := from
	for pos < end {
		fs := cl.PollFetches(pctx)
		if pctx.Err() != nil {
			return false, nil
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return false, fmt.Errorf("probe %s/%d: %w", t, p, ferr)
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) { pos = max(pos, fp.LogStartOffset) })
		for _, r := range fs.Records() {
			pos = max(pos, r.Offset+1)
			if r.Offset < end && !r.Attrs.IsControl() {
				return false, nil
			}
		}
	}
	return true, nil
}

// write records the cut and copies every store into the savepoint: from
// the instances' checkpoints where they are at the cut, else from the
// changelog.
func (c *coordinator) write(ctx context.Context, top *spTopology, cut *cut, replies map[string]spMessage) (*savepoint.Manifest, error) {
	m := &savepoint.Manifest{ID: c.id, Application: c.cfg.appID, Fingerprint: top.Fingerprint, Created: time.Now().UTC(), Sluice: version()}
	if len(top.Inputs) > 0 {
		details, err := c.adm.ListTopics(ctx, top.Inputs...)
		if err == nil {
			err = details.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("describe input topics: %w", err)
		}
		for _, t := range top.Inputs {
			d := details[t]
			in := savepoint.Input{Topic: t, TopicID: d.ID.String(), Partitions: int32(len(d.Partitions))}
			for p := range in.Partitions {
				o := savepoint.Offset{Partition: p, Offset: -1, LeaderEpoch: -1}
				if r, ok := cut.committed.Lookup(t, p); ok && r.Err == nil && r.At >= 0 {
					o.Offset, o.LeaderEpoch, o.Metadata = r.At, r.LeaderEpoch, r.Metadata
				}
				in.Offsets = append(in.Offsets, o)
			}
			m.Inputs = append(m.Inputs, in)
		}
	}
	var taken map[spKey]savepoint.Part
	if !spNoCheckpoints {
		taken = c.checkpoints(ctx, top, cut, replies)
	}
	copied := 0
	start := time.Now()
	for _, s := range top.Stores {
		if s.SourceBacked {
			continue
		}
		st := savepoint.Store{Name: s.Name, Layout: s.Layout, KeySerde: s.KeySerde, ValueSerde: s.ValueSerde,
			SubTopology: s.SubTopology, Partitions: s.Partitions, Changelog: s.Changelog}
		if st.Partitions <= 0 {
			st.Partitions = int32(len(cut.ends[s.Changelog]))
		}
		for p := range st.Partitions {
			end, ok := cut.ends.Lookup(s.Changelog, p)
			if !ok {
				return nil, fmt.Errorf("store %s: changelog %s has no partition %d", s.Name, s.Changelog, p)
			}
			if part, ok := taken[spKey{s.Name, p}]; ok {
				st.Parts = append(st.Parts, part)
				continue
			}
			copied++
			// Whatever an instance left there is not taken.
			if err := c.w.Discard(savepoint.PartDir(c.cfg.appID, savepoint.TaskID(s.SubTopology, p), s.Name)); err != nil {
				return nil, err
			}
			pw, err := c.w.Part(c.cfg.appID, savepoint.TaskID(s.SubTopology, p), s.Name, p)
			if err != nil {
				return nil, err
			}
			prog := &restoreProgress{task: savepoint.TaskID(s.SubTopology, p), store: s.Name, log: c.cfg.logger}
			if _, err := restoreTo(ctx, c.adm, c.cfg.kgoOpts, s.Changelog, p, pw.Engine(), end.Offset, c.deadline, nil, prog); err != nil {
				return nil, fmt.Errorf("store %s partition %d: copy changelog %s: %w", s.Name, p, s.Changelog, err)
			}
			part, err := pw.Close()
			if err != nil {
				return nil, err
			}
			part.ChangelogEnd = end.Offset
			st.Parts = append(st.Parts, part)
		}
		m.Stores = append(m.Stores, st)
	}
	if copied > 0 {
		c.log.Info("savepoint: stores copied from their changelogs", "savepoint", c.id, "copied", copied, "took", time.Since(start).Round(time.Millisecond))
	}
	return m, nil
}

// version is the sluice module's version as built, "devel" when unknown.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/sluice-streams/sluice" {
				return d.Version
			}
		}
		if bi.Main.Path == "github.com/sluice-streams/sluice" && bi.Main.Version != "" {
			return bi.Main.Version
		}
	}
	return "devel"
}
