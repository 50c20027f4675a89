package processor

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
)

// TestPartitioner: changelog and watermark records go where they say, keyed
// records where Kafka's default partitioner puts them, and records without a
// key to every partition in turn, a batch's worth each; and no topic
// partitioner asks to hear of new batches, so that franz-go does not hold a
// topic's lock while the stream threads buffer records.
func TestPartitioner(t *testing.T) {
	p := &partitioner{changelogs: map[string]bool{"app-s-changelog": true}, manual: kgo.ManualPartitioner()}
	const n = 8
	if got := p.ForTopic("app-s-changelog").Partition(&kgo.Record{Key: []byte("k"), Partition: 5}, n); got != 5 {
		t.Errorf("changelog record of partition 5 went to %d", got)
	}
	tp := p.ForTopic("out")
	if _, ok := tp.(kgo.TopicPartitionerOnNewBatch); ok {
		t.Errorf("%T asks to hear of new batches: franz-go would hold the topic's lock while buffering", tp)
	}
	wm := &kgo.Record{Partition: 3, Headers: []kgo.RecordHeader{{Key: exec.HeaderWatermark}}}
	if !tp.RequiresConsistency(wm) || tp.Partition(wm, n) != 3 {
		t.Errorf("watermark record for partition 3 went to %d", tp.Partition(wm, n))
	}
	for i := range 1000 {
		k := []byte(fmt.Sprintf("key-%d", i))
		r := &kgo.Record{Key: k}
		if got, want := tp.Partition(r, n), KeyPartition(k, n); !tp.RequiresConsistency(r) || int32(got) != want {
			t.Fatalf("key %q went to %d, Kafka's default partitioner says %d", k, got, want)
		}
	}
	// Records without a key: 100 bytes each, so 164 make the 16 KiB that
	// go to one partition before the next.
	const perPartition = (stickyBytes + 99) / 100
	counts := map[int]int{}
	prev, switches := -1, 0
	for range 3 * n * perPartition {
		r := &kgo.Record{Value: make([]byte, 100)}
		if tp.RequiresConsistency(r) {
			t.Fatal("a record without a key requires consistency")
		}
		got := tp.Partition(r, n)
		if got < 0 || got >= n {
			t.Fatalf("partition %d of %d", got, n)
		}
		if prev >= 0 && got != prev {
			switches++
			if got != (prev+1)%n {
				t.Fatalf("records without a key went from partition %d to %d", prev, got)
			}
		}
		counts[got]++
		prev = got
	}
	for i := range n {
		if counts[i] != 3*perPartition {
			t.Errorf("partition %d got %d records without a key, want %d (all: %v)", i, counts[i], 3*perPartition, counts)
		}
	}
	if switches != 3*n-1 {
		t.Errorf("%d switches of partition, want %d", switches, 3*n-1)
	}
}
