package groupview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/assignwire"
)

var (
	// ErrNoGroup: the application has no consumer group (it never ran on
	// this cluster, or its group was deleted).
	ErrNoGroup = errors.New("groupview: no such group")
	// ErrNotSluice: the group exists but is not a sluice application's
	// (another protocol than sluice's assignor).
	ErrNotSluice = errors.New("groupview: not a sluice application's group")
)

// View is an application as its consumer group shows it. Its JSON is the
// answer of GET /instances and of `sluice group describe --format json`, a
// contract (README, "The group view").
type View struct {
	Application string `json:"application"`
	// State is the group's: Stable, PreparingRebalance,
	// CompletingRebalance, Empty (no instance runs), Dead (no group).
	State string `json:"state"`
	// Generation is the generation the group's leader balanced, from the
	// assignment; -1 when no member holds one (an empty group).
	Generation int32 `json:"generation"`
	// Lag sums the lag of every partition the group has an offset for or
	// a member runs.
	Lag       int64      `json:"lag"`
	Instances []Instance `json:"instances"`
	// Unassigned are the partitions with a committed offset that no
	// member runs: all of them while the group is empty. Omitted when
	// none.
	Unassigned []Partition `json:"unassigned,omitempty"`
}

// Instance is one member of the group: one sluice instance.
type Instance struct {
	MemberID string `json:"member_id"`
	ClientID string `json:"client_id"`
	// Host is the address the broker sees the member connect from.
	Host string `json:"host"`
	// Endpoint is the instance's advertised endpoint (application.server),
	// "" if it advertises none.
	Endpoint string `json:"endpoint"`
	// Tasks are the active tasks the instance runs, by id.
	Tasks []Task `json:"tasks"`
	// Standbys are its standby and warm-up tasks' ids.
	Standbys []string `json:"standbys"`
	Lag      int64    `json:"lag"`
}

// Task is an active task and its input partitions.
type Task struct {
	// ID is the task's id as /tasks shows it: sub-topology_partition;
	// "?_partition" for a partition of a topic the assignment does not
	// place (a leader that predates the sources map).
	ID         string      `json:"id"`
	Partitions []Partition `json:"partitions"`
	Lag        int64       `json:"lag"`
}

// Partition is an input partition's progress.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the group's committed offset, -1 if none (the
	// instance then reads from the start offset).
	Committed int64 `json:"committed"`
	// End is the last stable offset (what read_committed reads up to);
	// -1 if the broker did not answer for the partition.
	End int64 `json:"end"`
	// Lag is End − Committed (End − start without a committed offset), 0
	// when End is unknown.
	Lag int64 `json:"lag"`
}

// Describe describes the application appID from its consumer group, with
// the cluster cl reaches. The view is returned with ErrNoGroup too (state
// Dead, no instances), so that a caller can show it as it is.
func Describe(ctx context.Context, cl *kgo.Client, appID string) (View, error) {
	v := View{Application: appID, Generation: -1, Instances: []Instance{}}
	adm := kadm.NewClient(cl)
	groups, err := adm.DescribeGroups(ctx, appID)
	if err != nil {
		return v, fmt.Errorf("groupview: describe group %q: %w", appID, err)
	}
	g, ok := groups[appID]
	switch {
	case !ok:
		return v, fmt.Errorf("groupview: describe group %q: the coordinator did not answer for it", appID)
	case errors.Is(g.Err, kerr.GroupIDNotFound), g.Err == nil && g.State == "Dead":
		// Kafka before DescribeGroups v6 answers Dead for a group it
		// does not know, v6 GROUP_ID_NOT_FOUND.
		v.State = "Dead"
		return v, fmt.Errorf("%w: %q", ErrNoGroup, appID)
	case g.Err != nil:
		msg := ""
		if g.ErrMessage != "" {
			msg = " (" + g.ErrMessage + ")"
		}
		return v, fmt.Errorf("groupview: describe group %q: %w%s", appID, g.Err, msg)
	}
	v.State = g.State
	if g.ProtocolType != "" && g.ProtocolType != "consumer" || g.Protocol != "" && g.Protocol != "sluice" {
		return v, fmt.Errorf("%w: %q uses %s protocol %q", ErrNotSluice, appID, g.ProtocolType, g.Protocol)
	}
	committed, err := adm.FetchOffsets(ctx, appID)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return v, fmt.Errorf("groupview: committed offsets of %q: %w", appID, err)
	}

	// The topics to read offsets of: what members run and what the group
	// committed.
	topicSet := map[string]bool{}
	for t := range committed {
		topicSet[t] = true
	}
	for _, m := range g.Members {
		if as, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range as.Topics {
				topicSet[t.Topic] = true
			}
		}
	}
	topics := slices.Sorted(func(yield func(string) bool) {
		for t := range topicSet {
			if !yield(t) {
				return
			}
		}
	})
	var ends, starts kadm.ListedOffsets
	if len(topics) > 0 {
		if ends, err = adm.ListCommittedOffsets(ctx, topics...); err != nil {
			return v, fmt.Errorf("groupview: end offsets: %w", err)
		}
		if starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
			return v, fmt.Errorf("groupview: start offsets: %w", err)
		}
	}
	part := func(topic string, p int32) Partition {
		pt := Partition{Topic: topic, Partition: p, Committed: -1, End: -1}
		if o, ok := committed.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
			pt.Committed = o.At
		}
		if o, ok := ends.Lookup(topic, p); ok && o.Err == nil {
			pt.End = o.Offset
		}
		from := pt.Committed
		if from < 0 {
			if o, ok := starts.Lookup(topic, p); ok && o.Err == nil {
				from = o.Offset
			}
		}
		if pt.End >= 0 && from >= 0 {
			pt.Lag = max(pt.End-from, 0)
		}
		return pt
	}

	assigned := map[string]map[int32]bool{}
	for _, m := range g.Members {
		in := Instance{MemberID: m.MemberID, ClientID: m.ClientID, Host: host(m.ClientHost), Tasks: []Task{}, Standbys: []string{}}
		if meta, ok := m.Join.AsConsumer(); ok {
			in.Endpoint = assignwire.ParseMember(meta.UserData).Endpoint
		}
		if as, ok := m.Assigned.AsConsumer(); ok {
			a := assignwire.ParseAssignment(as.UserData)
			v.Generation = max(v.Generation, a.Generation)
			type key struct {
				sub int // -1: the topic's sub-topology is unknown
				p   int32
			}
			tasks := map[key]*Task{}
			for _, t := range as.Topics {
				sub, known := a.Sources[t.Topic]
				if !known {
					sub = -1
				}
				for _, p := range t.Partitions {
					if assigned[t.Topic] == nil {
						assigned[t.Topic] = map[int32]bool{}
					}
					assigned[t.Topic][p] = true
					k := key{sub, p}
					tk := tasks[k]
					if tk == nil {
						id := "?"
						if sub >= 0 {
							id = strconv.Itoa(sub)
						}
						tk = &Task{ID: id + "_" + strconv.Itoa(int(p))}
						tasks[k] = tk
					}
					pt := part(t.Topic, p)
					tk.Partitions = append(tk.Partitions, pt)
					tk.Lag += pt.Lag
				}
			}
			keys := make([]key, 0, len(tasks))
			for k := range tasks {
				keys = append(keys, k)
			}
			slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.sub, b.sub), cmp.Compare(a.p, b.p)) })
			for _, k := range keys {
				tk := tasks[k]
				slices.SortFunc(tk.Partitions, func(a, b Partition) int { return strings.Compare(a.Topic, b.Topic) })
				in.Tasks = append(in.Tasks, *tk)
				in.Lag += tk.Lag
			}
			for _, id := range a.Standby {
				in.Standbys = append(in.Standbys, id.String())
			}
		}
		v.Lag += in.Lag
		v.Instances = append(v.Instances, in)
	}
	slices.SortFunc(v.Instances, func(a, b Instance) int {
		return cmp.Or(strings.Compare(a.Endpoint, b.Endpoint), strings.Compare(a.MemberID, b.MemberID))
	})
	for _, t := range committed.Sorted() {
		if !assigned[t.Topic][t.Partition] {
			pt := part(t.Topic, t.Partition)
			v.Unassigned = append(v.Unassigned, pt)
			v.Lag += pt.Lag
		}
	}
	return v, nil
}

// host is the address of a member's connection without its port: Kafka
// reports "/10.0.0.1", kfake "127.0.0.1:54321".
func host(client string) string {
	client = strings.TrimPrefix(client, "/")
	if h, _, err := net.SplitHostPort(client); err == nil {
		return h
	}
	return client
}
