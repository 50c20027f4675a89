package assignwire

import (
	"encoding/json"
	"sort"

	"github.com/sluice-streams/sluice/internal/task"
)

// The user data, as JSON:
//
//	join metadata (each member):  {"endpoint":"host:port","offsets":[[sub,partition,sum],...]}
//	assignment (leader → each):   {"owners":[{"endpoint":"host:port","tasks":[[sub,partition],...]},...],
//	                               "standby":[[sub,partition],...],"generation":3,
//	                               "sources":{"topic":sub,...}}
//
// Every member gets the whole owner map (Kafka Streams' partitionsByHost),
// so any instance can route a query. A member that advertises no endpoint
// owns its tasks under "": they cannot be routed to. "offsets" are the
// member's task offset sums (processor/standby.go: the sum of the
// checkpoints of the task's stores it has locally, -2 for a task it runs),
// "standby" the member's own standby and warm-up tasks, "generation" the
// group generation the leader balanced (DescribeGroups does not show it),
// "sources" the sub-topology each source topic feeds (so that a reader of
// the assigned partitions knows their tasks without the topology).

// Member is what a member says of itself when it joins.
type Member struct {
	Endpoint string // advertised endpoint, "" if none
	// Offsets are the member's task offset sums.
	Offsets map[task.ID]int64
}

type memberJSON struct {
	Endpoint string     `json:"endpoint,omitempty"`
	Offsets  [][3]int64 `json:"offsets,omitempty"`
}

// EncodeMember encodes m, sorted so that equal members give equal bytes.
func EncodeMember(m Member) []byte {
	j := memberJSON{Endpoint: m.Endpoint}
	for id, sum := range m.Offsets {
		j.Offsets = append(j.Offsets, [3]int64{int64(id.Sub), int64(id.Partition), sum})
	}
	sort.Slice(j.Offsets, func(i, k int) bool {
		a, b := j.Offsets[i], j.Offsets[k]
		return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
	})
	b, _ := json.Marshal(j)
	return b
}

// ParseMember decodes EncodeMember; anything else gives no endpoint and no
// offsets.
func ParseMember(b []byte) Member {
	var j memberJSON
	if len(b) == 0 || json.Unmarshal(b, &j) != nil {
		return Member{}
	}
	m := Member{Endpoint: j.Endpoint, Offsets: make(map[task.ID]int64, len(j.Offsets))}
	for _, o := range j.Offsets {
		m.Offsets[task.ID{Sub: int(o[0]), Partition: int32(o[1])}] = o[2]
	}
	return m
}

// Assignment is what the leader tells one member besides its partitions.
type Assignment struct {
	// Routing maps every task of the group to its owner's endpoint.
	Routing map[task.ID]string
	// Standby are this member's standby and warm-up tasks.
	Standby []task.ID
	// Generation is the group generation the leader balanced; -1 if
	// unknown (a leader that predates the field, or did not know it).
	Generation int32
	// Sources maps each source topic to its sub-topology; nil from a
	// leader that predates the field.
	Sources map[string]int
}

type ownerJSON struct {
	Endpoint string     `json:"endpoint"`
	Tasks    [][2]int32 `json:"tasks"`
}

type assignmentJSON struct {
	Owners     []ownerJSON    `json:"owners"`
	Standby    [][2]int32     `json:"standby,omitempty"`
	Generation *int32         `json:"generation,omitempty"`
	Sources    map[string]int `json:"sources,omitempty"`
}

func sortIDs(ts [][2]int32) {
	sort.Slice(ts, func(i, j int) bool { return ts[i][0] < ts[j][0] || ts[i][0] == ts[j][0] && ts[i][1] < ts[j][1] })
}

// EncodeAssignment encodes a: the routing grouped by endpoint and sorted,
// so that every member gets the same routing bytes.
func EncodeAssignment(a Assignment) []byte {
	by := map[string][][2]int32{}
	for id, ep := range a.Routing {
		by[ep] = append(by[ep], [2]int32{int32(id.Sub), id.Partition})
	}
	j := assignmentJSON{Sources: a.Sources}
	for ep, ts := range by {
		sortIDs(ts)
		j.Owners = append(j.Owners, ownerJSON{Endpoint: ep, Tasks: ts})
	}
	sort.Slice(j.Owners, func(i, k int) bool { return j.Owners[i].Endpoint < j.Owners[k].Endpoint })
	for _, id := range a.Standby {
		j.Standby = append(j.Standby, [2]int32{int32(id.Sub), id.Partition})
	}
	sortIDs(j.Standby)
	if a.Generation >= 0 {
		j.Generation = &a.Generation
	}
	b, _ := json.Marshal(j)
	return b
}

// ParseAssignment decodes EncodeAssignment; anything else gives an empty
// routing map, no standbys, generation -1 and no sources.
func ParseAssignment(b []byte) Assignment {
	a := Assignment{Routing: map[task.ID]string{}, Generation: -1}
	var j assignmentJSON
	if len(b) == 0 || json.Unmarshal(b, &j) != nil {
		return a
	}
	for _, o := range j.Owners {
		for _, t := range o.Tasks {
			a.Routing[task.ID{Sub: int(t[0]), Partition: t[1]}] = o.Endpoint
		}
	}
	for _, t := range j.Standby {
		a.Standby = append(a.Standby, task.ID{Sub: int(t[0]), Partition: t[1]})
	}
	if j.Generation != nil {
		a.Generation = *j.Generation
	}
	a.Sources = j.Sources
	return a
}
