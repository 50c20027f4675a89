package names

// The names of external sinks (topology.ToParticipant, ToIdempotent).
const (
	// SinkSuffix ends the plan name of an offsets-mode sink's topic,
	// <application.id>-<name>-sink once Internal prefixes it.
	SinkSuffix = "-sink"
	// SinkXIDSuffix ends the name of a two-phase sink's store, which
	// records the task's last prepared transaction id; its changelog is
	// <application.id>-<name>-sink-xid-changelog.
	SinkXIDSuffix = "-sink-xid"
)

// Sink is the plan name of the topic of the offsets-mode sink name.
func Sink(name string) string { return name + SinkSuffix }

// SinkXIDStore is the name of the store of the two-phase sink name.
func SinkXIDStore(name string) string { return name + SinkXIDSuffix }
