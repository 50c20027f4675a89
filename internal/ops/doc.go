// Package ops holds the operator runtimes behind the topology DSL: the
// processors a task runs for tables, aggregations, joins, windows and the
// Processor API's state, as generic types over plain values (store names,
// serdes, functions). topology validates and names what the user wrote,
// builds the exec.Node and constructs a runtime in its New; the runtimes
// never import topology. Store bytes are laid out by internal/layout.
package ops
