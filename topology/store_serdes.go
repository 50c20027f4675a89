package topology

import "github.com/sluice-streams/sluice/serde"

// KeySerde is the serde of the store's keys: interactive queries
// (processor.Query) encode a key with it to find the key's partition and
// read it.
func (m Materialization[K, V]) KeySerde() serde.Serde[K] { return m.ks }

// ValueSerde is the serde of the store's values (of a window store: of each
// window's aggregate).
func (m Materialization[K, V]) ValueSerde() serde.Serde[V] { return m.vs }
