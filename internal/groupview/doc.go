// Package groupview describes a running sluice application from Kafka
// alone, as Kafka Streams' kafka-streams-groups.sh describe does: its
// consumer group's state and generation, each instance (member id, client
// id, host, advertised endpoint), the tasks each runs with their input
// partitions, committed offset, end offset and lag, and each instance's
// standby tasks. It needs no HTTP port of any instance: `sluice group
// describe` prints it, and GET /instances (processor/serve) serves it.
//
//	v, err := groupview.Describe(ctx, cl, "sluice-wordcount")
//	if errors.Is(err, groupview.ErrNoGroup) { ... }
//	for _, in := range v.Instances { fmt.Println(in.Endpoint, in.Lag) }
//
// Where it reads what (DESIGN.md, "The group view"):
//   - DescribeGroups: the state, the members, each member's join metadata
//     (its endpoint, internal/assignwire) and assignment (its partitions;
//     in the user data the member's standbys, the generation and the
//     sub-topology of each source topic, which turns an assigned partition
//     into its task);
//   - OffsetFetch: the group's committed offsets;
//   - ListOffsets read_committed: the end of each partition as a
//     read_committed consumer sees it (the last stable offset), and the
//     start offsets, where a partition without a committed offset is read
//     from.
//
// Lag is end − committed, in offsets: a transactional input (a
// repartition topic, another sluice app's output) that is caught up may
// show the commit markers after its last record, one for each producer
// whose transaction ended there.
package groupview
