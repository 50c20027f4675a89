// Package ops holds the operator runtimes: the generic processors a task
// runs for the stateful operators of the topology DSL (joins, windows,
// tables, keyed state, timers). Package topology validates and names an
// operator, registers its stores and builds its exec.Node, whose New
// constructs the runtime from plain values: store names, serdes, functions
// and the config structs defined here. The stores' bytes are laid out by
// internal/layout.
package ops
