package processor

import (
	"encoding/json"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/task"
)

// The user data sluice puts in the consumer protocol, as JSON so that a
// field can be added without a version dance:
//
//	join metadata (each member):  {"endpoint":"host:port","offsets":[[sub,partition,sum],...]}
//	assignment (leader → each):   {"owners":[{"endpoint":"host:port","tasks":[[sub,partition],...]},...],
//	                               "standby":[[sub,partition],...]}
//
// Every member gets the whole map (Kafka Streams' partitionsByHost), so any
// instance can route a query. A member that advertises no endpoint owns its
// tasks under "": they cannot be routed to. "offsets" are the member's task
// offset sums (standby.go: the sum of the checkpoints of the task's stores
// it has locally, -2 for a task it runs), "standby" the member's own standby
// and warm-up tasks. Members that predate a field leave it out, and read
// past it.

type memberMeta struct {
	Endpoint string     `json:"endpoint,omitempty"`
	Offsets  [][3]int64 `json:"offsets,omitempty"`
}

func memberUserData(endpoint string, sums map[task.ID]int64) []byte {
	m := memberMeta{Endpoint: endpoint}
	for id, sum := range sums {
		m.Offsets = append(m.Offsets, [3]int64{int64(id.Sub), int64(id.Partition), sum})
	}
	sort.Slice(m.Offsets, func(i, j int) bool {
		a, b := m.Offsets[i], m.Offsets[j]
		return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
	})
	b, _ := json.Marshal(m)
	return b
}

// parseMemberUserData decodes memberUserData; anything else gives no
// endpoint and no offsets.
func parseMemberUserData(b []byte) (string, map[task.ID]int64) {
	var m memberMeta
	if len(b) == 0 || json.Unmarshal(b, &m) != nil {
		return "", nil
	}
	sums := make(map[task.ID]int64, len(m.Offsets))
	for _, o := range m.Offsets {
		sums[task.ID{Sub: int(o[0]), Partition: int32(o[1])}] = o[2]
	}
	return m.Endpoint, sums
}

type routingOwner struct {
	Endpoint string     `json:"endpoint"`
	Tasks    [][2]int32 `json:"tasks"`
}

type routingInfo struct {
	Owners  []routingOwner `json:"owners"`
	Standby [][2]int32     `json:"standby,omitempty"`
}

// routingUserData encodes task → endpoint, grouped by endpoint, sorted so
// that every member gets the same bytes, and the member's standby tasks.
func routingUserData(routing map[task.ID]string, standby []task.ID) []byte {
	by := map[string][][2]int32{}
	for id, ep := range routing {
		by[ep] = append(by[ep], [2]int32{int32(id.Sub), id.Partition})
	}
	var info routingInfo
	for ep, ts := range by {
		sort.Slice(ts, func(i, j int) bool { return ts[i][0] < ts[j][0] || ts[i][0] == ts[j][0] && ts[i][1] < ts[j][1] })
		info.Owners = append(info.Owners, routingOwner{Endpoint: ep, Tasks: ts})
	}
	sort.Slice(info.Owners, func(i, j int) bool { return info.Owners[i].Endpoint < info.Owners[j].Endpoint })
	for _, id := range standby {
		info.Standby = append(info.Standby, [2]int32{int32(id.Sub), id.Partition})
	}
	sort.Slice(info.Standby, func(i, j int) bool {
		a, b := info.Standby[i], info.Standby[j]
		return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
	})
	b, _ := json.Marshal(info)
	return b
}

// parseRouting decodes routingUserData; anything else gives an empty map.
func parseRouting(b []byte) map[task.ID]string {
	out := map[task.ID]string{}
	var info routingInfo
	if len(b) == 0 || json.Unmarshal(b, &info) != nil {
		return out
	}
	for _, o := range info.Owners {
		for _, t := range o.Tasks {
			out[task.ID{Sub: int(t[0]), Partition: t[1]}] = o.Endpoint
		}
	}
	return out
}

// parseStandby decodes the member's standby tasks from routingUserData.
func parseStandby(b []byte) []task.ID {
	var info routingInfo
	if len(b) == 0 || json.Unmarshal(b, &info) != nil {
		return nil
	}
	out := make([]task.ID, 0, len(info.Standby))
	for _, t := range info.Standby {
		out = append(out, task.ID{Sub: int(t[0]), Partition: t[1]})
	}
	return out
}

// routedPlan is the assignor's plan with the routing map and each member's
// standby tasks added to its assignment.
type routedPlan struct {
	*kgo.BalancePlan
	routing map[task.ID]string
	standby map[string][]task.ID // member id → its standby tasks
}

func (p *routedPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	as := p.BalancePlan.IntoSyncAssignment()
	for i := range as {
		var m kmsg.ConsumerMemberAssignment
		if err := m.ReadFrom(as[i].MemberAssignment); err != nil {
			continue // cannot happen: kgo just encoded it
		}
		m.UserData = routingUserData(p.routing, p.standby[as[i].MemberID])
		as[i].MemberAssignment = m.AppendTo(nil)
	}
	return as
}
