// Package topologytest runs a topology synchronously in the test's
// goroutine, with no broker and no network: Kafka Streams'
// TopologyTestDriver for sluice.
//
// It runs the same task code as production (package internal/task), with
// the same serdes and Pebble stores on disk; only Kafka is replaced. Every
// piped record is processed to completion — through repartition topics too,
// depth first — and then committed, so outputs and stores are visible at
// once. Stream time and watermarks follow the piped records (watermarks
// cross repartition topics before the commit, so a window the record closed
// has fired when Pipe returns); wall-clock punctuations, processing-time
// timers and triggers fire only when the test advances the driver's clock.
// Records piped to a global table's topic update it at once. Stores are
// read with KeyValueStore, WindowStore and KeyedState.
//
//	d, _ := topologytest.New(examples.WordCount("lines", "counts", "dlq"))
//	defer d.Close()
//	in := topologytest.NewInputTopic(d, "lines", serde.Bytes, serde.String)
//	out := topologytest.NewOutputTopic(d, "counts", serde.String, serde.Int64Text)
//	in.Pipe(nil, "a b a", 0)
//	counts, _ := topologytest.ToMap(out) // a=2, b=1
//
// Each sub-topology runs as one task on partition 0, unless Partitions
// says otherwise; CommitEvery, FoldUpdates and ShuffleInternal vary the
// commit cadence, table folding and the order in which internal topics are
// delivered, so that a test can check that results do not depend on them.
//
// With AbortTransactions the driver groups steps into transactions and
// aborts and replays some of them at random, as an instance does on a
// rebalance: a check that the topology's results are exactly-once.
package topologytest
