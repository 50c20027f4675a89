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

import "strings"

// The suffixes. They are part of the on-topic contract: changing one
// renames every existing application's topics.
const (
	// RepartitionSuffix ends the name of a repartition topic.
	RepartitionSuffix = "-repartition"
	// ChangelogSuffix ends the name of a store's changelog topic.
	ChangelogSuffix = "-changelog"
	// DeadLetterSuffix ends the default dead-letter topic's name.
	DeadLetterSuffix = "-dlq"
	// TimeStoreSuffix ends the name of the store that keeps the time
	// state of a sub-topology with no windowed store of its own.
	TimeStoreSuffix = "-time"
)

// Repartition is the plan's name of the repartition topic the user named
// name: name-repartition, which Internal prefixes with the application id.
func Repartition(name string) string { return name + RepartitionSuffix }

// Internal is the topic an internal plan topic (a repartition topic, as
// Repartition names it) has in the cluster: <appID>-<topic>.
func Internal(appID, topic string) string { return appID + "-" + topic }

// Changelog is the changelog topic of the store named store:
// <appID>-<store>-changelog.
func Changelog(appID, store string) string { return Internal(appID, store) + ChangelogSuffix }

// DeadLetter is the dead-letter topic an application uses when none is
// configured: <appID>-dlq. It is not internal (IsInternal): it holds
// records an operator may still need, so reset leaves it alone.
func DeadLetter(appID string) string { return appID + DeadLetterSuffix }

// TimeStore is the name of the store that keeps the time state of the
// sub-topology writing the repartition topic topic (a plan name, as
// Repartition gives it): <topic>-time. Its changelog is therefore
// <appID>-<topic>-time-changelog.
func TimeStore(topic string) string { return topic + TimeStoreSuffix }

// IsInternal reports whether topic is one of the application's internal
// topics (a repartition topic or a changelog, the time store's included),
// by Kafka Streams' rule: the application's prefix and a repartition or
// changelog suffix. The dead-letter topic is not internal.
func IsInternal(appID, topic string) bool {
	return strings.HasPrefix(topic, appID+"-") &&
		(strings.HasSuffix(topic, RepartitionSuffix) || strings.HasSuffix(topic, ChangelogSuffix))
}
