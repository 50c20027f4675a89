// Package exec is the untyped contract between the typed DSL (package
// topology) and the runtime (package processor).
//
// The DSL erases types at one boundary: every operator becomes a Node whose
// Processor receives Records carrying keys and values as `any`, already
// decoded; fused operators hand them to each other by direct calls. Serdes
// run only in sources (Decode), sinks (Encode) and stores. Stateless nodes,
// sources and sinks also offer a typed chain (Typed, chain.go): the task
// links them into one function from a source's bytes to a sink's, so that
// the erasure happens only where a chain meets an erased node.
//
// A Plan is what topology.Build produces: the nodes split into
// sub-topologies at repartition topics, with the stores each one owns.
package exec
