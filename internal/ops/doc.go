// Package ops holds the operator runtimes behind the topology DSL: the
// generic processors that run per record inside a task (windows and their
// triggers, sessions, joins, keyed state, timers). topology validates a
// topology, names its nodes and stores and constructs these runtimes from
// plain values (store names, serdes, functions, config structs); they never
// import topology. Their store bytes are laid out by internal/layout.
package ops
