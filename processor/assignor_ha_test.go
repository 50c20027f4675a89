package processor

import (
	"sort"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/internal/task"
)

// haMember is what one member reports when it joins.
type haMember struct {
	owned []int32         // partitions of "in" it owned
	sums  map[int32]int64 // partition → offset sum of its local state
}

type haResult struct {
	owner   map[task.ID]string
	standby map[string]map[task.ID]bool
	probes  int
}

// balanceHA runs the leader's assignor over members that report their
// owned partitions and offset sums through the real join metadata, and
// decodes the real assignments.
func balanceHA(t *testing.T, cfg standbyConfig, partitions int32, members map[string]haMember) haResult {
	t.Helper()
	subOf := map[string]int{"in": 0}
	res := haResult{owner: map[task.ID]string{}, standby: map[string]map[task.ID]bool{}}
	leader := &assignor{subOf: subOf, stateful: map[int]bool{0: true}, standby: cfg, onProbe: func() { res.probes++ }}
	var ids []string
	for id := range members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var jm []kmsg.JoinGroupResponseMember
	for _, id := range ids {
		m := members[id]
		local := &localState{}
		for p, sum := range m.sums {
			local.note(task.ID{Sub: 0, Partition: p}, "s", sum-1) // a sum is checkpoint+1
		}
		var owned map[string][]int32
		if len(m.owned) > 0 {
			owned = map[string][]int32{"in": m.owned}
		}
		j := kmsg.NewJoinGroupResponseMember()
		j.MemberID = id
		j.ProtocolMetadata = (&assignor{subOf: subOf, local: local}).JoinGroupMetadata([]string{"in"}, owned, 1)
		jm = append(jm, j)
	}
	mb, _, err := leader.MemberBalancer(jm)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"in": partitions})
	if err != nil {
		t.Fatal(err)
	}
	for _, sa := range into.IntoSyncAssignment() {
		var got []task.ID
		member := &assignor{subOf: subOf, onStandby: func(ids []task.ID) { got = ids }}
		parts, err := member.ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts["in"] {
			id := task.ID{Sub: 0, Partition: p}
			if prev, dup := res.owner[id]; dup {
				t.Fatalf("task %v on %s and %s", id, prev, sa.MemberID)
			}
			res.owner[id] = sa.MemberID
		}
		res.standby[sa.MemberID] = taskSet(got)
	}
	if len(res.owner) != int(partitions) {
		t.Fatalf("%d tasks assigned, want %d", len(res.owner), partitions)
	}
	for m, ts := range res.standby {
		for id := range ts {
			if res.owner[id] == m {
				t.Errorf("task %v is both active and standby on %s", id, m)
			}
		}
	}
	return res
}

func tid(p int32) task.ID { return task.ID{Sub: 0, Partition: p} }

func TestHAStandbysStickyAndNeverWithTheOwner(t *testing.T) {
	cfg := defaultStandbyConfig()
	cfg.replicas = 1
	all := map[int32]int64{0: 100, 1: 100, 2: 100, 3: 100, 4: 100, 5: 100}
	res := balanceHA(t, cfg, 6, map[string]haMember{
		"m1": {owned: []int32{0, 1}, sums: all},
		"m2": {owned: []int32{2, 3}, sums: all},
		"m3": {owned: []int32{4, 5}, sums: all},
	})
	want := map[int32]string{0: "m1", 1: "m1", 2: "m2", 3: "m2", 4: "m3", 5: "m3"}
	for p, m := range want {
		if res.owner[tid(p)] != m {
			t.Errorf("task %d moved from %s to %s", p, m, res.owner[tid(p)])
		}
	}
	for p := range int32(6) {
		n := 0
		for _, ts := range res.standby {
			if ts[tid(p)] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("task %d has %d standbys, want 1", p, n)
		}
	}
	for m, ts := range res.standby {
		if len(ts) != 2 {
			t.Errorf("%s holds %d standbys, want 2 (spread)", m, len(ts))
		}
	}
	if res.probes != 0 {
		t.Errorf("%d probing rebalances scheduled with everyone caught up", res.probes)
	}

	// Replicas are bounded by the other members: 2 wanted, 1 possible.
	cfg.replicas = 2
	res = balanceHA(t, cfg, 2, map[string]haMember{"m1": {owned: []int32{0}}, "m2": {owned: []int32{1}}})
	if !res.standby["m2"][tid(0)] || !res.standby["m1"][tid(1)] || len(res.standby["m1"]) != 1 {
		t.Errorf("standbys %v, want each task's on the other member", res.standby)
	}
}

func TestHAFailoverGoesToTheMostCaughtUpMember(t *testing.T) {
	cfg := defaultStandbyConfig()
	cfg.replicas = 1
	cfg.acceptableLag = 100
	// m1 owned 0 and 3 and is gone; m2 holds a fresh copy of 0, m3 of 3.
	res := balanceHA(t, cfg, 6, map[string]haMember{
		"m2": {owned: []int32{1, 2}, sums: map[int32]int64{0: 50_000, 3: 10}},
		"m3": {owned: []int32{4, 5}, sums: map[int32]int64{0: 10, 3: 50_000}},
	})
	if res.owner[tid(0)] != "m2" || res.owner[tid(3)] != "m3" {
		t.Errorf("failed-over tasks went to %s and %s, want m2 (standby of 0) and m3 (standby of 3)", res.owner[tid(0)], res.owner[tid(3)])
	}
	// Even when the caught-up member is over its share: availability first,
	// and the other member warms up.
	res = balanceHA(t, cfg, 4, map[string]haMember{
		"m2": {owned: []int32{1, 2}, sums: map[int32]int64{0: 50_000}},
		"m3": {owned: []int32{3}},
	})
	if res.owner[tid(0)] != "m2" {
		t.Errorf("task 0 went to %s, want m2, the only member with a copy", res.owner[tid(0)])
	}
	if !res.standby["m3"][tid(0)] || res.probes != 1 {
		t.Errorf("m3 standbys %v, probes %d: want a warm-up of task 0 and a probing rebalance", res.standby["m3"], res.probes)
	}
	// Negative control: without the copies, the same failover picks by
	// load alone.
	res = balanceHA(t, cfg, 6, map[string]haMember{
		"m2": {owned: []int32{1, 2}},
		"m3": {owned: []int32{4, 5}},
	})
	if res.owner[tid(0)] != "m2" || res.owner[tid(3)] != "m3" {
		t.Logf("no copies: tasks 0 and 3 went to %s and %s", res.owner[tid(0)], res.owner[tid(3)])
	}
}

func TestHAWarmupKeepsTheTaskUntilCaughtUp(t *testing.T) {
	cfg := defaultStandbyConfig()
	cfg.acceptableLag = 100
	cfg.maxWarmups = 1
	owner := map[int32]int64{0: 5000, 1: 5000, 2: 5000, 3: 5000}
	// A new member joins with nothing: the tasks stay, one warm-up.
	res := balanceHA(t, cfg, 4, map[string]haMember{
		"m1": {owned: []int32{0, 1, 2, 3}, sums: owner},
		"m2": {},
	})
	for p := range int32(4) {
		if res.owner[tid(p)] != "m1" {
			t.Errorf("task %d moved to %s before its warm-up caught up", p, res.owner[tid(p)])
		}
	}
	if len(res.standby["m2"]) != 1 || res.probes != 1 {
		t.Fatalf("m2 warm-ups %v, probes %d: want 1 (max.warmup.replicas) and a probing rebalance", res.standby["m2"], res.probes)
	}
	var warm int32
	for id := range res.standby["m2"] {
		warm = id.Partition
	}
	// The warm-up is still 101 behind: nothing moves.
	res = balanceHA(t, cfg, 4, map[string]haMember{
		"m1": {owned: []int32{0, 1, 2, 3}, sums: owner},
		"m2": {sums: map[int32]int64{warm: 4899}},
	})
	if n := len(res.owner) - countOn(res.owner, "m1"); n != 0 || res.probes != 1 {
		t.Errorf("%d tasks moved while the warm-up lags 101 > 100; probes %d", n, res.probes)
	}
	// Within the acceptable lag: the task moves, and the next one warms up.
	res = balanceHA(t, cfg, 4, map[string]haMember{
		"m1": {owned: []int32{0, 1, 2, 3}, sums: owner},
		"m2": {sums: map[int32]int64{warm: 4900}},
	})
	if res.owner[tid(warm)] != "m2" || countOn(res.owner, "m2") != 1 {
		t.Errorf("owners %v: want only the caught-up task %d on m2", res.owner, warm)
	}
	if len(res.standby["m2"]) != 1 || res.standby["m2"][tid(warm)] || res.probes != 1 {
		t.Errorf("m2 warm-ups %v, probes %d: want one other task warming up", res.standby["m2"], res.probes)
	}
	// MaxWarmupReplicas 2: two warm-ups at once, never more.
	cfg.maxWarmups = 2
	res = balanceHA(t, cfg, 4, map[string]haMember{
		"m1": {owned: []int32{0, 1, 2, 3}, sums: owner},
		"m2": {},
		"m3": {},
	})
	warmups := len(res.standby["m2"]) + len(res.standby["m3"])
	if warmups != 2 || countOn(res.owner, "m1") != 4 {
		t.Errorf("%d warm-ups, %d tasks kept on m1: want 2 and 4", warmups, countOn(res.owner, "m1"))
	}
	// Negative control: a lag acceptable enough moves at once, no warm-up.
	cfg.acceptableLag = 10_000
	res = balanceHA(t, cfg, 4, map[string]haMember{
		"m1": {owned: []int32{0, 1, 2, 3}, sums: owner},
		"m2": {},
	})
	if countOn(res.owner, "m2") != 2 || len(res.standby["m2"]) != 0 || res.probes != 0 {
		t.Errorf("owners %v, warm-ups %v, probes %d: want 2 tasks moved at once", res.owner, res.standby["m2"], res.probes)
	}
}

func countOn(owner map[task.ID]string, m string) int {
	n := 0
	for _, o := range owner {
		if o == m {
			n++
		}
	}
	return n
}
