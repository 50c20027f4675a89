// Package rescale redistributes a store's entries to another partition
// count, for a start from a savepoint whose stores had another number of
// partitions than the new topology's tasks (Flink's rescaling from a
// savepoint).
//
// Every entry of a store either belongs to one record key, and then goes to
// the partition sluice's partitioner gives that key under the new count
// (Route), or belongs to its task (a task's time state, a keyed state's
// clock), and then every new partition gets the merge of the old tasks'
// values (Merge), chosen so that nothing fires early and nothing is
// forgotten. The key is found through internal/layout, so every layout is
// covered there and nowhere else.
//
//	p, perTask, err := rescale.Route(layout.KindWindow, key, 16)
//	v, err := rescale.Merge(layout.KindWindow, key, oldValues)
package rescale
