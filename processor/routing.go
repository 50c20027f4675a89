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
//	join metadata (each member):  {"endpoint":"host:port"}
//	assignment (leader → each):   {"owners":[{"endpoint":"host:port","tasks":[[sub,partition],...]},...]}
//
// Every member gets the whole map (Kafka Streams' partitionsByHost), so any
// instance can route a query. A member that advertises no endpoint owns its
// tasks under "": they cannot be routed to.

type memberMeta struct {
	Endpoint string `json:"endpoint,omitempty"`
}

func memberUserData(endpoint string) []byte {
	b, _ := json.Marshal(memberMeta{Endpoint: endpoint})
	return b
}

func parseMemberUserData(b []byte) string {
	var m memberMeta
	if len(b) == 0 || json.Unmarshal(b, &m) != nil {
		return ""
	}
	return m.Endpoint
}

type routingOwner struct {
	Endpoint string     `json:"endpoint"`
	Tasks    [][2]int32 `json:"tasks"`
}

type routingInfo struct {
	Owners []routingOwner `json:"owners"`
}

// routingUserData encodes task → endpoint, grouped by endpoint, sorted so
// that every member gets the same bytes.
func routingUserData(routing map[task.ID]string) []byte {
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

// routedPlan is the assignor's plan with the routing map added to every
// member's assignment.
type routedPlan struct {
	*kgo.BalancePlan
	userData []byte
}

func (p *routedPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	as := p.BalancePlan.IntoSyncAssignment()
	for i := range as {
		var m kmsg.ConsumerMemberAssignment
		if err := m.ReadFrom(as[i].MemberAssignment); err != nil {
			continue // cannot happen: kgo just encoded it
		}
		m.UserData = p.userData
		as[i].MemberAssignment = m.AppendTo(nil)
	}
	return as
}
