package txn

import "fmt"

// Guarantee is the processing guarantee, Kafka Streams' processing.guarantee.
type Guarantee int

const (
	// ExactlyOnce commits outputs, changelogs and input offsets in one Kafka
	// transaction (the default).
	ExactlyOnce Guarantee = iota
	// AtLeastOnce flushes outputs, then commits offsets: a crash between
	// the two replays records.
	AtLeastOnce
	// AtMostOnce commits offsets before processing: a crash loses the
	// records being processed.
	AtMostOnce
)

// String returns the configuration spelling: exactly_once, at_least_once or
// at_most_once.
func (g Guarantee) String() string {
	switch g {
	case ExactlyOnce:
		return "exactly_once"
	case AtLeastOnce:
		return "at_least_once"
	case AtMostOnce:
		return "at_most_once"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// ParseGuarantee parses the configuration spelling of a guarantee.
func ParseGuarantee(s string) (Guarantee, error) {
	switch s {
	case "exactly_once", "exactly_once_v2":
		return ExactlyOnce, nil
	case "at_least_once":
		return AtLeastOnce, nil
	case "at_most_once":
		return AtMostOnce, nil
	}
	return 0, fmt.Errorf("txn: unknown processing.guarantee %q (want exactly_once, at_least_once or at_most_once)", s)
}
