package processor

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/assignwire"
	"github.com/sluice-streams/sluice/internal/task"
)

// The user data sluice puts in the consumer protocol (each member's
// endpoint and offset sums in its join metadata; the task → endpoint map,
// the member's standbys, the generation and the source topics in each
// assignment) is encoded by internal/assignwire, which the group view
// (`sluice group describe`, GET /instances) reads back with the same code.

// routedPlan is the assignor's plan with the routing map, each member's
// standby tasks, the generation and the source topics added to its
// assignment.
type routedPlan struct {
	*kgo.BalancePlan
	routing    map[task.ID]string
	standby    map[string][]task.ID // member id → its standby tasks
	generation int32                // -1 if unknown
	sources    map[string]int       // source topic → sub-topology
}

func (p *routedPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	as := p.BalancePlan.IntoSyncAssignment()
	for i := range as {
		var m kmsg.ConsumerMemberAssignment
		if err := m.ReadFrom(as[i].MemberAssignment); err != nil {
			continue // cannot happen: kgo just encoded it
		}
		m.UserData = assignwire.EncodeAssignment(assignwire.Assignment{
			Routing: p.routing, Standby: p.standby[as[i].MemberID], Generation: p.generation, Sources: p.sources,
		})
		as[i].MemberAssignment = m.AppendTo(nil)
	}
	return as
}
