package keyhash

import "github.com/twmb/franz-go/pkg/kgo"

// Hasher is the partitioner sluice's producer uses for every keyed record:
// franz-go's sticky-key partitioner, which for a non-nil key is Kafka's
// default partitioner (murmur2 of the key's bytes, high bit cleared,
// modulo the partition count), as the Java client's, so that sluice's
// repartition topics and user topics written by any default Kafka producer
// agree. Its Partition is pure for a non-nil key and keeps no state, so
// one value is shared; for a nil key it is sticky (random), which is why
// Partition below never hands it one.
var Hasher = kgo.StickyKeyPartitioner(nil).ForTopic("")

// Partition is the partition, among n (n >= 1), of a record whose key
// encodes to kb. A nil kb is read as the empty key: a nil key would be
// spread over the partitions, not hashed, and a store entry's key is never
// nil.
func Partition(kb []byte, n int32) int32 {
	if kb == nil {
		kb = []byte{}
	}
	return int32(Hasher.Partition(&kgo.Record{Key: kb}, int(n)))
}
