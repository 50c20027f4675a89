// Package ops holds the operator runtimes behind the topology DSL: the
// exec.Processor types a task runs, generic over the user's key and value
// types, each with its own tests. topology validates, names and registers
// the stores, then builds these runtimes from plain values (store names,
// serdes, functions); they never import topology. The bytes they write are
// laid out by internal/layout.
package ops
