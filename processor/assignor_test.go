package processor

import (
	"fmt"
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/task"
)

// balance runs the assignor as a group leader would, for members that each
// report what they owned; it returns member → task set, checking that every
// task's partitions went to one member.
func balance(t *testing.T, a *assignor, topics map[string]int32, owned map[string]map[string][]int32) map[string]map[task.ID]bool {
	t.Helper()
	var interests []string
	for tp := range topics {
		interests = append(interests, tp)
	}
	sort.Strings(interests)
	var members []kmsg.JoinGroupResponseMember
	var ids []string
	for id := range owned {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = a.JoinGroupMetadata(interests, owned[id], 1)
		members = append(members, m)
	}
	mb, _, err := a.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		t.Fatal(err)
	}
	plan := into.(*routedPlan).AsMemberIDMap()
	out := map[string]map[task.ID]bool{}
	ownerOf := map[string]string{} // "topic/p" → member
	for member, tps := range plan {
		out[member] = map[task.ID]bool{}
		for tp, ps := range tps {
			for _, p := range ps {
				key := fmt.Sprintf("%s/%d", tp, p)
				if prev, dup := ownerOf[key]; dup {
					t.Fatalf("%s assigned to %s and %s", key, prev, member)
				}
				ownerOf[key] = member
				out[member][task.ID{Sub: a.subOf[tp], Partition: p}] = true
			}
		}
	}
	// Co-partitioning: partition p of every topic of a sub-topology is
	// with one member.
	for tp, n := range topics {
		for p := int32(0); p < n; p++ {
			for tp2, n2 := range topics {
				if a.subOf[tp2] == a.subOf[tp] && p < n2 && ownerOf[fmt.Sprintf("%s/%d", tp, p)] != ownerOf[fmt.Sprintf("%s/%d", tp2, p)] {
					t.Errorf("task %d_%d split: %s/%d and %s/%d on different members", a.subOf[tp], p, tp, p, tp2, p)
				}
			}
		}
	}
	if len(ownerOf) != func() (n int) {
		for _, c := range topics {
			n += int(c)
		}
		return n
	}() {
		t.Errorf("%d partitions assigned, want all", len(ownerOf))
	}
	return out
}

func TestAssignorKeepsTasksTogetherAndBalanced(t *testing.T) {
	a := &assignor{subOf: map[string]int{"bills": 0, "app-x-repartition": 0, "app-y-repartition": 1}}
	topics := map[string]int32{"bills": 6, "app-x-repartition": 6, "app-y-repartition": 6}
	got := balance(t, a, topics, map[string]map[string][]int32{"m1": nil, "m2": nil, "m3": nil})
	for m, ts := range got {
		if len(ts) != 4 { // 12 tasks over 3 members
			t.Errorf("%s has %d tasks, want 4", m, len(ts))
		}
	}
}

func TestAssignorIsSticky(t *testing.T) {
	a := &assignor{subOf: map[string]int{"in": 0}}
	topics := map[string]int32{"in": 6}
	first := balance(t, a, topics, map[string]map[string][]int32{"m1": nil, "m2": nil})
	owned := map[string]map[string][]int32{}
	for m, ts := range first {
		owned[m] = map[string][]int32{}
		for id := range ts {
			owned[m]["in"] = append(owned[m]["in"], id.Partition)
		}
	}
	// A third member joins: the first two keep what they can (two each),
	// and only the moved tasks change hands.
	owned["m3"] = nil
	second := balance(t, a, topics, owned)
	moved := 0
	for m, ts := range second {
		if len(ts) != 2 {
			t.Errorf("%s has %d tasks after the join, want 2", m, len(ts))
		}
		for id := range ts {
			if m != "m3" && !first[m][id] {
				t.Errorf("task %v moved between old members %s", id, m)
			}
			if m == "m3" {
				moved++
			}
		}
	}
	if moved != 2 {
		t.Errorf("%d tasks moved to the new member, want 2", moved)
	}
}
