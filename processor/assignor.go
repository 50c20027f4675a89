package processor

import (
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/assignwire"
	"github.com/sluice-streams/sluice/internal/task"
)

// assignor is sluice's group balancer, run by the group leader. It maps
// tasks, not partitions: task (s, p) is partition p of every source topic of
// sub-topology s, so co-partitioned inputs always land on one instance. It
// is sticky: a task stays with the member that owned it while that member is
// not over its fair share. Rebalancing is eager (every member gives up its
// partitions, then gets its new set), which fits transactions: the
// transaction open at a rebalance aborts.
//
// It also tells every member where each task is, for interactive queries
// (Kafka Streams' application.server): each member puts its advertised
// endpoint in its join metadata, and the leader puts the map task →
// endpoint in every member's assignment (routing.go).
//
// With standby replicas (standby.go) it is Kafka Streams' high-availability
// assignor (KIP-441), simplified: each member reports the offset sums of
// the tasks it has local state for; a task whose owner is gone goes to a
// caught-up member (within acceptable.recovery.lag of the most caught-up
// one); a task that should move to a member that is not caught up stays
// where it is while that member warms up; each stateful task gets
// num.standby.replicas standbys on members other than its owner. The leader
// sees no end offsets (Balance runs without network), so "caught up" is
// relative to the best copy any member reports.
type assignor struct {
	subOf    map[string]int // runtime source topic → sub-topology
	endpoint string         // this member's advertised endpoint, "" if none
	// onRouting, if set, receives the task → endpoint map of each
	// assignment this member gets (on the group's goroutine).
	onRouting func(map[task.ID]string)

	// stateful names the sub-topologies whose tasks have stores that
	// standbys can follow (standbyStores).
	stateful map[int]bool
	standby  standbyConfig
	// local is this member's local state, reported in its join metadata;
	// nil reports none.
	local *localState
	// memo replays a static member's last join metadata after a restart.
	memo *joinMemo
	// onStandby, if set, receives this member's standby tasks from each
	// assignment (group goroutine).
	onStandby func([]task.ID)
	// onProbe, if set, is called by the leader when its plan keeps a task
	// away from where it should be while a warm-up catches up.
	onProbe func()
	// client is the member's client, set once it exists: the leader reads
	// the generation it balances from it (franz-go stores the join's
	// generation before it balances) and writes it into the assignment,
	// because DescribeGroups does not show it. The client is created
	// after its balancer, so it is stored when NewClient returns; a
	// balance before that (it happened once, under the race detector)
	// waits for it when inSession.
	client atomic.Pointer[kgo.Client]
	// inSession: a session stores client once it has created it
	// (runSession); tests that balance without one leave it false.
	inSession bool
}

func (*assignor) ProtocolName() string { return "sluice" }
func (*assignor) IsCooperative() bool  { return false }

func (a *assignor) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	if old := a.memo.previous(); old != nil {
		var m kmsg.ConsumerMemberMetadata
		if m.ReadFrom(old) == nil && slices.Equal(m.Topics, interests) {
			return old
		}
	}
	meta.UserData = assignwire.EncodeMember(assignwire.Member{Endpoint: a.endpoint, Offsets: a.local.offsetSums()})
	topics := make([]string, 0, len(current))
	for t := range current {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		op := kmsg.NewConsumerMemberMetadataOwnedPartition()
		op.Topic = t
		op.Partitions = append([]int32(nil), current[t]...)
		meta.OwnedPartitions = append(meta.OwnedPartitions, op)
	}
	b := meta.AppendTo(nil)
	a.memo.save(b)
	return b
}

func (a *assignor) ParseSyncAssignment(b []byte) (map[string][]int32, error) {
	parts, err := kgo.ParseConsumerSyncAssignment(b)
	if err != nil {
		return nil, err
	}
	a.memo.assigned()
	var m kmsg.ConsumerMemberAssignment
	if err := m.ReadFrom(b); err == nil {
		as := assignwire.ParseAssignment(m.UserData)
		if a.onRouting != nil {
			// A leader without routing (none yet) leaves it empty:
			// queries then answer "owner unknown" rather than fail.
			a.onRouting(as.Routing)
		}
		if a.onStandby != nil {
			a.onStandby(as.Standby)
		}
	}
	return parts, nil
}

func (a *assignor) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	b, err := kgo.NewConsumerBalancer(a, members)
	if err != nil {
		return nil, nil, err
	}
	return b, b.MemberTopics(), nil
}

func (a *assignor) Balance(b *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	// The tasks: for each sub-topology, as many as its widest source.
	width := map[int]int32{}
	bySub := map[int][]string{}
	for topic, n := range topics {
		s, ok := a.subOf[topic]
		if !ok {
			continue
		}
		bySub[s] = append(bySub[s], topic)
		width[s] = max(width[s], n)
	}
	var tasks []task.ID
	for s, w := range width {
		sort.Strings(bySub[s])
		for p := int32(0); p < w; p++ {
			tasks = append(tasks, task.ID{Sub: s, Partition: p})
		}
	}
	sort.Slice(tasks, func(i, j int) bool {
		if tasks[i].Partition != tasks[j].Partition {
			return tasks[i].Partition < tasks[j].Partition
		}
		return tasks[i].Sub < tasks[j].Sub
	})

	members := b.Members()
	ids := make([]int, len(members))
	for i := range ids {
		ids[i] = i
	}
	sort.Slice(ids, func(i, j int) bool { return members[ids[i]].MemberID < members[ids[j]].MemberID })

	// Previous owners, from the owned partitions each member reported,
	// and each member's offset sums.
	prev := map[task.ID]int{}
	endpoints := make([]string, len(members))
	sums := make([]map[task.ID]int64, len(members))
	b.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		idx := 0
		for i := range members {
			if members[i].MemberID == m.MemberID {
				idx = i
			}
		}
		mm := assignwire.ParseMember(meta.UserData)
		endpoints[idx], sums[idx] = mm.Endpoint, mm.Offsets
		for _, op := range meta.OwnedPartitions {
			s, ok := a.subOf[op.Topic]
			if !ok {
				continue
			}
			for _, p := range op.Partitions {
				prev[task.ID{Sub: s, Partition: p}] = idx
			}
		}
	})
	h := planHA(tasks, ids, prev, sums, a.stateful, a.standby)
	if h.probe && a.onProbe != nil {
		a.onProbe()
	}

	plan := b.NewPlan()
	routing := make(map[task.ID]string, len(tasks))
	for _, t := range tasks {
		m := &members[h.owner[t]]
		routing[t] = endpoints[h.owner[t]]
		for _, topic := range bySub[t.Sub] {
			if t.Partition < topics[topic] {
				plan.AddPartition(m, topic, t.Partition)
			}
		}
	}
	standby := map[string][]task.ID{}
	for m, ts := range h.standby {
		for _, t := range tasks {
			if ts[t] {
				standby[members[m].MemberID] = append(standby[members[m].MemberID], t)
			}
		}
	}
	// The session stores its client right after creating it, and the
	// group, which the client joins at once, may balance before that
	// (under the race detector it did): wait for it, briefly.
	cl := a.client.Load()
	for deadline := time.Now().Add(5 * time.Second); cl == nil && a.inSession && time.Now().Before(deadline); cl = a.client.Load() {
		time.Sleep(time.Millisecond)
	}
	gen := int32(-1)
	if cl != nil {
		_, gen = cl.GroupMetadata()
	}
	return &routedPlan{BalancePlan: plan, routing: routing, standby: standby, generation: gen, sources: a.subOf}
}
