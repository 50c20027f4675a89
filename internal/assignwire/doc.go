// Package assignwire is the user data sluice puts in Kafka's consumer group
// protocol: each member's join metadata (its advertised endpoint and task
// offset sums) and the leader's assignment (who runs which task, the
// member's standby tasks, the generation and the source topic of each
// sub-topology). The assignor (processor) writes and reads it; the group
// view (internal/groupview) reads it back from DescribeGroups, so the two
// cannot drift:
//
//	meta := assignwire.ParseMember(consumerMetadata.UserData)
//	a := assignwire.ParseAssignment(consumerAssignment.UserData)
//	sub, ok := a.Sources["text-lines"] // the task of (topic, p) is (sub, p)
//
// The bytes are JSON, so a field can be added without a version dance:
// members that predate a field leave it out and read past it; anything that
// does not parse reads as empty, never as an error (a group must not fail
// on a member's user data).
package assignwire
