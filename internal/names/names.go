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

// RangeDeleteHeader marks a changelog record that deletes a range of keys
// instead of writing one (store.Staged.DropRange: a stream join's due
// segments): its key is the range's start and its value the range's end.
// Restore and standbys replay it as that range delete; a sluice without
// it would store the record as a key.
const RangeDeleteHeader = "sluice.range.delete"

// PackHeader marks a changelog record that carries the writes of many keys
// (store.WithPacking: a stream join's records, by segment): restore and
// standbys replay the writes it holds (store.UnpackWrites).
const PackHeader = "sluice.pack"

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
// changelog suffix, or its savepoint control topic. The dead-letter topic
// is not internal.
func IsInternal(appID, topic string) bool {
	return strings.HasPrefix(topic, appID+"-") &&
		(strings.HasSuffix(topic, RepartitionSuffix) || strings.HasSuffix(topic, ChangelogSuffix) ||
			topic == SavepointControl(appID))
}

// SavepointControlSuffix ends the name of an application's savepoint
// control topic.
const SavepointControlSuffix = "-savepoint-control"

// SavepointControl is the topic through which `sluice savepoint create`
// and an application's instances agree on a savepoint:
// <appID>-savepoint-control (one partition). IsInternal counts it: reset
// deletes it.
func SavepointControl(appID string) string { return appID + SavepointControlSuffix }
