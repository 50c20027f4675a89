package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
)

// Bounded runs (batch as a finite stream; DESIGN.md "Bounded runs").
//
// At the start of Run the instance takes each user input partition's end:
// its last stable offset (read_committed, invariant 4), or with
// BoundedUntil the first offset at or after the time, whichever is lower.
// The loop processes records below the end only: a poll that reaches
// past it is cut, the partition's position is set back to the end (so the
// transaction commits exactly the end as its offset) and the partition is
// paused. A task's user inputs have ended when every one of its user
// partitions has; then it raises their watermarks to the end of time
// (task.EndUserInputs), which fires every window and event-time timer,
// and announces the end of time to the repartition topics it writes at its
// next flush: the writer's end marker, carried like any watermark. A task
// reading repartition topics has ended when its user inputs have and every
// writer of those topics announced the end. The instance commits and Run
// returns nil once every task it holds has ended.

// Bounded makes Run stop at the end of its input: see BoundedUntil, with
// no time (the ends are the partitions' last stable offsets at start).
// Flink's batch execution mode; Kafka Streams has none. Default: off.
func Bounded() Opt { return opt(func(c *config) { c.bounded = true }) }

// BoundedUntil is Bounded with each user input partition ending at the
// first offset whose timestamp is at or after until (the records before
// it, all with earlier timestamps, are processed), or at its last stable
// offset if that comes first. A zero until is Bounded.
func BoundedUntil(until time.Time) Opt {
	return opt(func(c *config) { c.bounded, c.until = true, until })
}

// ErrBoundedUnsupported is returned by Run with Bounded for a topology
// whose end cannot be carried through its repartition topics: one that
// repartitions but has no windowed state (no watermark records to carry
// the end marker).
var ErrBoundedUnsupported = errors.New("processor: bounded run not supported for this topology")

// BoundedSummary is what a bounded run did, for its summary line.
type BoundedSummary struct {
	Records  int64         // records processed and committed, repartition ones included
	Outputs  int64         // records produced (outputs, repartition, changelog)
	Took     time.Duration // from Run's start to the end
	Finished bool          // every task of the instance reached its end
}

// Bounded reports the summary of a bounded run (zero before Run ends).
func (a *App) Bounded() BoundedSummary { return a.bnd.summary }

// bounds is a bounded run's state: the ends, fixed at Run's start.
type bounds struct {
	end     map[string]map[int32]int64 // user topic → partition → end offset
	start   map[string]map[int32]int64 // log start, the position with no committed offset
	began   time.Time
	summary BoundedSummary
}

// takeBounds looks up the ends of every user input partition.
func (a *App) takeBounds(ctx context.Context) error {
	if !a.cfg.bounded {
		return nil
	}
	var topics []string
	internal := false
	for _, sub := range a.plan.Subs {
		for _, src := range sub.Sources {
			if src.Internal {
				internal = true
				continue
			}
			topics = append(topics, src.Topics...)
		}
	}
	if internal && !a.plan.UsesEventTime() {
		return fmt.Errorf("%w: it repartitions without windowed state, so no watermark records carry the end through its repartition topics", ErrBoundedUnsupported)
	}
	cl, err := kgo.NewClient(a.cfg.kgoOpts()...)
	if err != nil {
		return fmt.Errorf("processor: bounded: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := adm.ListCommittedOffsets(lctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("processor: bounded: list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(lctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("processor: bounded: list start offsets: %w", err)
	}
	b := &a.bnd
	b.end, b.start = map[string]map[int32]int64{}, map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { setOffset(b.end, o.Topic, o.Partition, o.Offset) })
	starts.Each(func(o kadm.ListedOffset) { setOffset(b.start, o.Topic, o.Partition, o.Offset) })
	if !a.cfg.until.IsZero() {
		after, err := adm.ListOffsetsAfterMilli(lctx, a.cfg.until.UnixMilli(), topics...)
		if err == nil {
			err = after.Error()
		}
		if err != nil {
			return fmt.Errorf("processor: bounded: list offsets at %s: %w", a.cfg.until.Format(time.RFC3339), err)
		}
		after.Each(func(o kadm.ListedOffset) {
			// Past the last record Kafka answers -1 (kadm: the end).
			if e, ok := b.end[o.Topic][o.Partition]; ok && o.Offset >= 0 && o.Offset < e {
				b.end[o.Topic][o.Partition] = o.Offset
			}
		})
	}
	for t, ps := range b.end {
		for p, e := range ps {
			a.log.Info("bounded: input ends", "topic", t, "partition", p, "end", e, "start", b.start[t][p])
		}
	}
	return nil
}

func setOffset(m map[string]map[int32]int64, t string, p int32, o int64) {
	if m[t] == nil {
		m[t] = map[int32]int64{}
	}
	m[t][p] = o
}

// memberBounds is a member's progress towards the ends.
type memberBounds struct {
	pos       map[string]map[int32]int64 // next offset after the last processed
	ended     map[string]map[int32]bool  // user partitions at their end
	probed    map[string]map[int32]time.Time
	taskEnded map[task.ID]bool // EndUserInputs called
}

// trimBounded cuts each task's polled records at the ends, before they
// are processed: a partition that reached its end is set back to it and
// paused, so that the transaction commits the end as its offset.
func (m *member) trimBounded(batches map[task.ID][][]*kgo.Record) {
	if !m.a.cfg.bounded {
		return
	}
	b := m.bnd()
	cl := m.sess.Client()
	for _, parts := range batches {
		for i, recs := range parts {
			if len(recs) == 0 {
				continue
			}
			t, p := recs[0].Topic, recs[0].Partition
			end, ok := m.a.bnd.end[t][p]
			if !ok {
				continue // a repartition topic: read to its writers' ends
			}
			n := len(recs)
			for n > 0 && recs[n-1].Offset >= end {
				n--
			}
			if n < len(recs) {
				parts[i] = recs[:n]
				cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{t: {p: {Epoch: -1, Offset: end}}})
				m.partitionEnded(t, p)
			}
			if n > 0 {
				setOffset(b.pos, t, p, parts[i][n-1].Offset+1)
			}
		}
	}
}

func (m *member) bnd() *memberBounds {
	if m.bounds == nil {
		m.bounds = &memberBounds{pos: map[string]map[int32]int64{}, ended: map[string]map[int32]bool{},
			probed: map[string]map[int32]time.Time{}, taskEnded: map[task.ID]bool{}}
	}
	return m.bounds
}

func (m *member) partitionEnded(t string, p int32) {
	b := m.bnd()
	if b.ended[t] == nil {
		b.ended[t] = map[int32]bool{}
	}
	if !b.ended[t][p] {
		b.ended[t][p] = true
		m.sess.Client().PauseFetchPartitions(map[string][]int32{t: {p}})
		m.a.log.Info("bounded: input partition reached its end", "topic", t, "partition", p, "end", m.a.bnd.end[t][p])
	}
}

// position is where partition t/p continues: after the last record
// processed in this session, else its committed offset, else its start.
func (m *member) position(t string, p int32) int64 {
	if o, ok := m.bnd().pos[t][p]; ok {
		return o
	}
	if o, ok := m.sess.Client().CommittedOffsets()[t][p]; ok && o.Offset >= 0 {
		return o.Offset
	}
	return m.a.bnd.start[t][p]
}

// stepBounded ends the tasks whose inputs ended, and reports whether the
// instance is done: it was assigned and every task it holds has ended.
// polled holds the partitions that had records in this poll: only the
// others are probed.
func (m *member) stepBounded(ctx context.Context, polled map[string]map[int32]bool) (done bool, err error) {
	if !m.a.cfg.bounded {
		return false, nil
	}
	b := m.bnd()
	all := true
	for id, t := range m.tasks {
		if m.own.isClosing(id) {
			all = false
			continue
		}
		if !b.taskEnded[id] {
			ended := true
			for _, topic := range t.UserTopics() {
				p := id.Partition
				if b.ended[topic][p] {
					continue
				}
				end := m.a.bnd.end[topic][p]
				pos := m.position(topic, p)
				if pos >= end || (!polled[topic][p] && m.probeEnded(ctx, topic, p, pos, end)) {
					m.partitionEnded(topic, p)
					continue
				}
				ended = false
			}
			if !ended {
				all = false
				continue
			}
			if err := t.EndUserInputs(); err != nil {
				return false, err
			}
			b.taskEnded[id] = true
			m.a.log.Info("bounded: task's user inputs ended", "task", id.String(), "processed", t.Processed())
		}
		if !t.InternalEnded() {
			all = false
		}
	}
	// In the group, its last partition event an assignment (not a
	// revocation waiting for the next one): the tasks it holds are what
	// the group gives it, possibly none.
	settled := m.a.status.isJoined() && m.assignedLast
	return all && settled && len(m.own.closing) == 0, nil
}

// probeEnded reports whether partition t/p has no data record in
// [pos, end) that read_committed would return: only transaction markers
// and aborted records are left before the end (the consumer skips them,
// so no record tells the loop it got there). A probe that cannot tell
// within its time reports false and runs again a second later.
func (m *member) probeEnded(ctx context.Context, t string, p int32, pos, end int64) bool {
	b := m.bnd()
	if last, ok := b.probed[t][p]; ok && time.Since(last) < time.Second {
		return false
	}
	if b.probed[t] == nil {
		b.probed[t] = map[int32]time.Time{}
	}
	b.probed[t][p] = time.Now()
	cl, err := kgo.NewClient(m.a.cfg.kgoOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t: {p: kgo.NewOffset().At(pos)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return false
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for pctx.Err() == nil {
		fs := cl.PollFetches(pctx)
		var dataBelow, reached bool
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case r.Offset < end && !r.Attrs.IsControl():
				dataBelow = true
			case r.Offset >= end-1:
				reached = true
			}
		})
		if dataBelow {
			return false
		}
		if reached {
			return true
		}
	}
	return false
}

// summarizeBounded fills the summary when Run returns.
func (a *App) summarizeBounded() {
	if !a.cfg.bounded {
		return
	}
	s := &a.bnd.summary
	s.Records, s.Outputs, s.Took = a.stats.Processed.Load(), a.stats.Produced.Load(), time.Since(a.bnd.began)
}

// polledParts lists the partitions that had records in a poll.
func polledParts(fs kgo.Fetches) map[string]map[int32]bool {
	out := map[string]map[int32]bool{}
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) > 0 {
			if out[fp.Topic] == nil {
				out[fp.Topic] = map[int32]bool{}
			}
			out[fp.Topic][fp.Partition] = true
		}
	})
	return out
}
