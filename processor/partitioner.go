package processor

import (
	mrand "math/rand/v2"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/keyhash"
)

// partitioner sends changelog records to the task's partition and the rest
// with topicPartitioner.
type partitioner struct {
	changelogs map[string]bool
	manual     kgo.Partitioner
}

func (p *partitioner) ForTopic(t string) kgo.TopicPartitioner {
	if p.changelogs[t] {
		return p.manual.ForTopic(t)
	}
	return &topicPartitioner{manual: p.manual.ForTopic(t), next: -1}
}

// topicPartitioner sends watermark records, which name their partition,
// where they say; records with a key by Kafka's default (murmur2) hash of
// it (internal/keyhash), so that repartition topics and co-partitioned user topics
// agree; and
// records without a key to one partition after another, a batch's worth to
// each, as Kafka's uniform sticky partitioner does.
//
// It does not ask to hear of new batches (kgo.TopicPartitionerOnNewBatch):
// kgo then holds the topic's lock only while it partitions a record, not
// while it buffers it, and stream threads producing to one topic do not
// wait for each other. kgo calls it under that lock.
type topicPartitioner struct {
	manual kgo.TopicPartitioner
	next   int // the partition of records without a key; -1 before the first
	bytes  int // what went there
}

// stickyBytes is how much of the records without a key goes to one
// partition before the next: Kafka's default batch.size.
const stickyBytes = 16 << 10

func isWatermark(r *kgo.Record) bool {
	return len(r.Headers) > 0 && r.Headers[0].Key == exec.HeaderWatermark
}

func (p *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return isWatermark(r) || r.Key != nil
}

func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	switch {
	case isWatermark(r):
		return p.manual.Partition(r, n)
	case r.Key != nil:
		return keyhash.Hasher.Partition(r, n)
	}
	if p.next < 0 {
		p.next = mrand.IntN(n) // instances start apart
	} else if p.bytes >= stickyBytes {
		p.next, p.bytes = p.next+1, 0
	}
	p.bytes += len(r.Value)
	return p.next % n
}
