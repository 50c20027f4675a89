// Package names builds the names of the topics and stores sluice creates for
// an application, and recognises them: the one place that knows the
// suffixes other tools rely on (ARCHITECTURE.md, "Names that other tools
// rely on"). The task, the DSL, the processor, the test driver, `sluice
// reset` and the integration checkers all name through it, so a topic one of
// them creates is the topic the others look for.
//
//	<application.id>-<name>-repartition        Repartition, then Internal
//	<application.id>-<store>-changelog         Changelog
//	<application.id>-dlq                       DeadLetter (the default)
//	<repartition topic>-time                   TimeStore (a store name)
//
// The names are plain concatenations, as Kafka Streams' are, so they are
// not injective: application "a" with store "b-c" and application "a-b"
// with store "c" share the changelog a-b-c-changelog. IsInternal therefore
// recognises by prefix and suffix only, as Kafka Streams' reset tool does.
package names
