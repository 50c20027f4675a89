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
// forgotten. The key is found through internal/layout (layout.RecordKey),
// so every layout is covered there and nowhere else; the partition is
// internal/keyhash's, the function the producer partitions keyed records
// with.
//
//	p, perTask, err := rescale.Route(layout.KindWindow, key, 16)
//	v, err := rescale.Merge(layout.KindWindow, key, oldValues)
//	old := rescale.TimeInputGroups(sub, func(string) int { return 8 })
//	v, err = rescale.ResizeTimeState(v, old, rescale.TimeInputGroups(sub, func(string) int { return 16 }))
//
// # Routing
//
// The record key is the key whose partition decided the entry's task: the
// key of the records on the task's source or repartition topic. For every
// layout sluice's operators write, that is the key the entry is stored
// under (a window's, a join record's, a keyed state's, a timer's, a
// key-value store's key), except a foreign-key join's subscriptions, which
// were repartitioned by the foreign key and are routed by it. Two
// assumptions stand behind this, and rescaling is wrong where they fail:
// a user topic a task reads directly (no repartition) was written with
// Kafka's default partitioner on the same key bytes; and a Processor API
// processor writes a store only under the key of the record it processes.
// The kind must be the store's true layout: a sliding store routed as a
// window store fails on its records ('r', 'y': ErrUnsupported), but a
// subscription store routed as a key-value store would be misrouted
// silently.
//
// # Merging
//
// The time state (layout/time.go: stream time and the watermark tracker,
// whose inputs are the task's user topics and, per repartition topic, its
// upstream writers) merges to:
//
//   - the watermark: the earliest of the old tasks' watermarks. A new task
//     holds keys of every old task (in general), so its watermark must not
//     be past any of theirs: a window that an old task kept open, still
//     open in the savepoint, must not close before the records that the
//     uninterrupted run would have added to it arrive. Every input's own
//     watermark is set to it too: lower than an input had, which changes
//     nothing the task decides (its watermark never goes below the merged
//     one, and a record is judged by the larger of the two), but never
//     higher, since the old tasks' inputs were other partitions with other
//     keys.
//   - idle inputs: an input is idle if it was idle in every old task (a
//     table read from a topic always is, and must stay so, or its input
//     would hold the watermark for ever); otherwise it holds the
//     watermark until it reports, as every input of a fresh task does.
//   - the stream time: the latest. Windows close by the watermark, not by
//     stream time; stream time is what a keyed state's TTL clock follows
//     and what results without a window are stamped with, and every entry
//     that moves was written at or before its old task's stream time, so
//     the latest never goes back for any of them.
//
// The merged tracker has the old trackers' number of inputs; where the new
// task's inputs have other widths (a repartition topic of 8 partitions is
// 8 inputs, of 16 is 16), ResizeTimeState lays it out anew, each group of
// inputs idle if it was idle before; TimeInputGroups gives the groups of a
// sub-topology's tasks for given partition counts.
//
// Which old tasks' values to merge: all of them is always safe. Sources
// narrows them to the old tasks whose keys can reach the new task (for
// 8 → 16 one, for 12 → 4 three), which is as safe, since no other old
// task's key can reach it, and keeps the watermark higher. An old task
// that left no time state never committed a record, so it holds no state
// of any key and constrains nothing: merge the values that exist.
//
// A keyed state's clock merges to the latest: it is the latest time an
// expiry decision was made at, and no entry that moves was written after
// its old task's clock. An entry of a slower old task may therefore expire
// sooner after the rescale than it would have.
//
// # Why late records can differ from an unrescaled run
//
// Rescaling keeps every window open that was open, and closes none
// early. But the answer to "is this record late?" depends on the
// partitioning itself, so it can differ afterwards:
//
//   - Taking the earliest watermark reopens nothing that was removed, but
//     a new task whose keys came from a faster old task now has a lower
//     watermark than their old task had: a record for one of those keys
//     that the old task would have dropped as late (its window already
//     closed and removed) is accepted, and starts the window afresh.
//   - A record of a user topic is judged late by the watermark of its own
//     input partition, which all the keys of that partition advance. After
//     the rescale a key shares its partition with other keys, so a record
//     that was on time beside its old neighbours can be late beside its
//     new ones, and the other way round.
//
// Neither touches a record that is no further behind the latest event time
// of its whole input than its watermark strategy allows
// (BoundedOutOfOrderness): such a record is on time under every
// partitioning, so results over input of that kind continue exactly.
package rescale
