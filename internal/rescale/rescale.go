package rescale

import (
	"errors"

	"github.com/sluice-streams/sluice/internal/layout"
)

// ErrUnsupported is returned for an entry whose layout cannot be
// redistributed; it names the layout and the key's prefix.
var ErrUnsupported = errors.New("rescale: cannot redistribute")

// Route returns the partition, under n partitions, that the store entry
// key of a store of kind belongs to: the partition of its record key by
// the partitioner sluice writes repartition topics with (and that Kafka's
// default producer uses: murmur2 of the key's bytes). perTask reports an
// entry that belongs to its task and not to a key (see Merge); p is then 0.
func Route(kind layout.StoreKind, key []byte, n int32) (p int32, perTask bool, err error) {
	panic("rescale: Route not implemented yet")
}

// Merge combines the values, one per old task that had it, of a per-task
// entry key of a store of kind into the value every new task starts with.
func Merge(kind layout.StoreKind, key []byte, values [][]byte) ([]byte, error) {
	panic("rescale: Merge not implemented yet")
}
