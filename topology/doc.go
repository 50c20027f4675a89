// Package topology is sluice's typed DSL: it describes a stream processing
// job as a graph of operators, which Build validates and splits into
// sub-topologies at repartition topics.
//
// Operators are package-level generic functions over small handle structs,
// because Go methods cannot have their own type parameters:
//
//	t := topology.New()
//	lines := topology.From(t, "text-lines", serde.Bytes, serde.String)
//	words := topology.FlatMapValues(lines, strings.Fields)
//	byWord := topology.SelectKey(words, func(_ []byte, w string) string { return w })
//	counts := topology.Count(topology.GroupByKey(byWord, topology.Grouped("words", serde.String, serde.String)),
//		topology.Materialized("counts", serde.String, serde.Int64))
//	topology.To(topology.ToStream(counts), "word-counts", serde.String, serde.Int64Text)
//	built, err := t.Build() // every mistake at once, joined
//
// Anything that becomes a topic or a directory is named by the user: stores,
// and the repartition topics that GroupBy, GroupByKey after a key change,
// and Repartition create (<application.id>-<name>-repartition).
//
// Types are erased at one boundary: each call captures a typed closure, and
// at run time fused operators hand values to each other without re-encoding.
//
// Event time and windows: sources say where event time comes from
// (TimestampFrom, ProcessingTime) and how their watermark follows it
// (Watermarks); WindowedBy cuts a grouped stream into the windows of package
// window, aggregated by CountWindows, ReduceWindows, AggregateWindows,
// AggregateSessions or ProcessWindows, fired as WithTrigger says, with
// AllowedLateness and LateRecords for what comes too late.
//
// Tables and joins: a Table forwards each change with the old and the new
// value (TableFrom, aggregations, MapTableValues, FilterTable; GroupTableBy
// regroups with retraction); JoinStreams, JoinTable, JoinGlobal, JoinTables
// and JoinTablesByForeignKey, with their left and outer forms, join them.
//
// The Processor API (Process) gives user code stores, keyed state
// (ValueState and the others), timers (Timers) and punctuation.
package topology
