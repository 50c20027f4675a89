package topologytest

import (
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/internal/task"
)

// The options in this file make the driver run a topology the ways a
// deployment may, so that a test can check that the results do not depend
// on the way (metamorphic testing): how often it commits, whether table
// updates are folded, how many partitions (tasks) each sub-topology has,
// and in which legal order the records of internal topics arrive. Stream
// threads are not an option: a thread runs whole tasks, so what threads
// change is only how the records that different tasks write to one
// internal topic partition interleave, which ShuffleInternal covers.

// CommitEvery commits after every n input records (and after each
// AdvanceWallClock), instead of after every one (n = 1, the default); with
// n = 0 the driver commits only when the test calls Commit. Between
// commits, stores stage their writes, write caches and (with FoldUpdates)
// held table updates fold, and watermarks are announced downstream only at
// the commit's flush, as in a deployment with a longer commit.interval.
// Records written to internal topics are processed before the commit
// either way. A step that fails aborts the whole open transaction: the
// records piped since the last commit are rolled back with it, their
// outputs dropped, as an instance's aborted transaction is (the instance
// would then process them again; a test pipes them again if it wants
// them).
func CommitEvery(n int) Option { return func(d *Driver) { d.x.commitEvery = n } }

// FoldUpdates folds table updates until the commit, as
// processor.FoldUpdates (fold.updates) does.
//
// Deprecated: use Processor(processor.FoldUpdates(true)).
func FoldUpdates() Option { return func(d *Driver) { d.x.fold = true } }

// Partitions runs every sub-topology as n tasks, one per partition (default
// 1): piped records go to the partition of their key's murmur2 hash, as a
// Kafka producer's default partitioner sends them (a nil key to partition
// 0), and so do the records the tasks write to internal topics; every
// internal topic has n partitions. KeyValueStore, WindowStore, KeyedState,
// Watermark and StoreEntries then see partition 0's task only.
func Partitions(n int) Option {
	return func(d *Driver) { d.x.partitions = max(1, n) }
}

// ShuffleInternal delivers the records of internal topics (repartition
// topics, a foreign-key join's subscription and response topics) in a
// random but legal order, drawn from a generator seeded with seed: the
// records one task wrote to one partition stay in their order, watermark
// records among them; what different tasks wrote interleaves arbitrarily;
// and in each step some writers' records are held back, to arrive in a
// later step, behind what other writers wrote since (a reader lagging on
// one of its partitions). Everything held back arrives by the next Commit.
func ShuffleInternal(seed uint64) Option {
	return func(d *Driver) { d.x.rng = rand.New(rand.NewPCG(seed, 0x5eed)) }
}

// extra is the state of the options above.
type extra struct {
	commitEvery int // 1: after every input record
	fold        bool
	partitions  int
	inputs      int  // input records since the last commit
	force       bool // the current step commits whatever commitEvery says
	drain       bool // the current step delivers every internal record

	// byPartition is the task of each partition of each source topic
	// (runtime name); bySource holds partition 0's.
	byPartition map[string][]*task.Task

	rng    *rand.Rand          // ShuffleInternal; nil: internal records in the order sent
	writer map[*kgo.Record]int // the writer of each queued internal record (index in Driver.tasks)
	held   map[stream]bool     // the streams held back in this step
	seq    uint64              // records sent so far
	txnAt  uint64              // seq when the open transaction began
	// txnOutputs is how many records each output topic had when the
	// open transaction began.
	txnOutputs map[string]int
	sentAt     map[*kgo.Record]uint64
}

// stream is what one writer sent to one partition of one internal topic:
// the unit whose order is kept.
type stream struct {
	writer    int
	topic     string
	partition int32
}

func (x *extra) init() {
	if x.partitions < 1 {
		x.partitions = 1
	}
	x.byPartition = map[string][]*task.Task{}
	x.writer = map[*kgo.Record]int{}
	x.sentAt = map[*kgo.Record]uint64{}
}

// slot is one task to open: a sub-topology's partition.
type slot struct {
	sub *exec.SubTopology
	p   int32
}

// slots lists the tasks to open: each sub-topology's partitions in order.
func (x *extra) slots(plan *exec.Plan) []slot {
	var out []slot
	for _, sub := range plan.Subs {
		for p := range int32(x.partitions) {
			out = append(out, slot{sub, p})
		}
	}
	return out
}

// internalPartitions is the width of every internal topic the plan uses.
func (x *extra) internalPartitions(appID string, plan *exec.Plan) map[string]int32 {
	m := map[string]int32{}
	for _, sub := range plan.Subs {
		for _, n := range sub.Nodes {
			if n.Internal && (n.Kind == exec.KindSource || n.Kind == exec.KindSink) {
				for _, tp := range n.Topics {
					m[names.Internal(appID, tp)] = int32(x.partitions)
				}
			}
		}
	}
	return m
}

// sender is the Sender of task i: it remembers who wrote each record, and
// puts records of internal topics without a partition where a Kafka
// producer would.
func (d *Driver) sender(i int) task.Sender {
	return func(r *kgo.Record, promise func(*kgo.Record, error)) {
		if _, internal := d.bySource[r.Topic]; internal {
			d.x.writer[r] = i
			d.x.seq++
			d.x.sentAt[r] = d.x.seq
			if len(r.Headers) == 0 || r.Headers[0].Key != exec.HeaderWatermark {
				r.Partition = d.partitionOf(r.Key)
			}
		}
		d.send(r, promise)
	}
}

// partitionOf is the partition of a key: Kafka's default murmur2 hash, as
// processor partitions keyed records; a nil key goes to partition 0.
func (d *Driver) partitionOf(key []byte) int32 {
	if d.x.partitions <= 1 || key == nil {
		return 0
	}
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: key}, d.x.partitions))
}

// taskOf is the task that reads partition p of topic, nil if none does.
func (d *Driver) taskOf(topic string, p int32) *task.Task {
	if ts := d.x.byPartition[topic]; int(p) < len(ts) {
		return ts[p]
	}
	return nil
}

// beginStep starts a step of the driver: an input record, a clock advance
// or a commit.
func (d *Driver) beginStep() {
	d.x.held = map[stream]bool{}
}

// commitDue reports whether the current step ends with a commit.
func (d *Driver) commitDue() bool {
	if d.x.force || d.x.commitEvery == 1 {
		return true
	}
	return d.x.commitEvery > 1 && d.x.inputs >= d.x.commitEvery
}

// dequeue takes the next internal record to deliver, if any may arrive
// now: the first queued without ShuffleInternal, else the first of a
// random stream not held back in this step.
func (d *Driver) dequeue() (*kgo.Record, bool) {
	heads := d.heads()
	if len(heads) == 0 {
		return nil, false
	}
	pick := heads[0]
	if d.x.rng != nil {
		pick = heads[d.x.rng.IntN(len(heads))]
	}
	r := d.queue[pick]
	d.queue = append(d.queue[:pick], d.queue[pick+1:]...)
	delete(d.x.writer, r)
	delete(d.x.sentAt, r)
	return r, true
}

// deliverable reports whether an internal record may arrive now.
func (d *Driver) deliverable() bool { return len(d.heads()) > 0 }

// heads lists the queue positions of the records that may arrive next:
// the first record, or with ShuffleInternal the first of each stream not
// held back in this step. A third of the streams wait for a later step,
// except at Commit, which delivers everything.
func (d *Driver) heads() []int {
	if len(d.queue) == 0 {
		return nil
	}
	if d.x.rng == nil {
		return []int{0}
	}
	var heads []int
	seen := map[stream]bool{}
	for i, r := range d.queue {
		s := stream{d.x.writer[r], r.Topic, r.Partition}
		if seen[s] {
			continue
		}
		seen[s] = true
		hold, ok := d.x.held[s]
		if !ok {
			hold = !d.x.drain && d.x.rng.IntN(3) == 0
			d.x.held[s] = hold
		}
		if !hold {
			heads = append(heads, i)
		}
	}
	return heads
}

// dropUncommitted drops, after an abort, what the aborted transaction
// sent, as Kafka drops an aborted transaction's records: its outputs, and
// its queued internal records; what earlier transactions sent committed
// and stays.
func (d *Driver) dropUncommitted() {
	for topic, rs := range d.outputs {
		n := d.x.txnOutputs[topic]
		clear(rs[n:])
		d.outputs[topic] = rs[:n]
	}
	kept := d.queue[:0]
	for _, r := range d.queue {
		if d.x.sentAt[r] <= d.x.txnAt {
			kept = append(kept, r)
			continue
		}
		delete(d.x.writer, r)
		delete(d.x.sentAt, r)
	}
	d.queue = kept
}

// Commit processes every internal record not yet processed, flushes every
// task and commits: what CommitEvery(0) waits for, and how a test makes
// sure that records ShuffleInternal held back have arrived.
func (d *Driver) Commit() error {
	d.x.force, d.x.drain = true, true
	defer func() { d.x.force, d.x.drain = false, false }()
	return d.step(func() error { return nil })
}
