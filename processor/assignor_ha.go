package processor

import (
	"github.com/sluice-streams/sluice/internal/task"
)

// haPlan is the leader's decision: the owner of each task, and each member's
// standby and warm-up tasks.
type haPlan struct {
	owner   map[task.ID]int    // task → member index
	standby []map[task.ID]bool // member index → standby and warm-up tasks
	warmups int
	// probe says a task was kept away from its balanced owner while that
	// member warms up: the leader should rebalance again later.
	probe bool
}

// planHA assigns tasks to members (indexes into sums; ids lists them in
// member id order). It is a pure function of what the members reported, so
// the tests drive it directly.
//
//  1. Sticky: a task stays with its previous owner while that member is
//     within its fair share (quota): of the stateful tasks first (balanced
//     among themselves, as Kafka Streams does), then of all tasks.
//  2. A task without an owner goes to the least loaded caught-up member with
//     room, else to the least loaded member; ties go to the member with more
//     of the task's state.
//  3. Warm-up: a stateful task whose new owner is not caught up stays with
//     its previous owner, or goes to the most caught-up member, and the
//     intended owner gets a warm-up replica (at most maxWarmups in the
//     group); the leader probes again later.
//  4. Standbys: each stateful task gets up to replicas standbys on members
//     other than its owner, preferring members that hold some of its state,
//     then members with fewer standbys, then more state, then the members
//     after the owner in id order.
//
// A member is caught up on a task when its offset sum is within
// acceptableLag of the best any member reported (the previous owner always
// is): the leader has no end offsets, so lag is relative to the best copy.
func planHA(tasks []task.ID, ids []int, prev map[task.ID]int, sums []map[task.ID]int64, stateful map[int]bool, cfg standbyConfig) haPlan {
	n := len(sums)
	h := haPlan{owner: make(map[task.ID]int, len(tasks)), standby: make([]map[task.ID]bool, n)}
	for i := range h.standby {
		h.standby[i] = map[task.ID]bool{}
	}
	if n == 0 {
		return h
	}
	off := func(m int, t task.ID) int64 { return max(sums[m][t], 0) }
	best := map[task.ID]int64{}
	for _, t := range tasks {
		for m := range n {
			best[t] = max(best[t], off(m, t))
		}
	}
	caught := func(m int, t task.ID) bool {
		if !stateful[t.Sub] {
			return true
		}
		if p, ok := prev[t]; ok && p == m {
			return true
		}
		return best[t]-off(m, t) <= cfg.acceptableLag
	}
	// Stateful tasks are balanced among themselves first (they carry the
	// state and most of the work, as in Kafka Streams), then all tasks.
	var statefulTasks []task.ID
	for _, t := range tasks {
		if stateful[t.Sub] {
			statefulTasks = append(statefulTasks, t)
		}
	}
	load := make([]int, n)      // all tasks
	loadState := make([]int, n) // stateful tasks
	rank := make([]int, n)
	for i, m := range ids {
		rank[m] = i
	}
	// better reports whether member a beats b as t's owner: less loaded
	// (by the measure in use), then more of t's state, then id order.
	better := func(l []int, a, b int, t task.ID) bool {
		if l[a] != l[b] {
			return l[a] < l[b]
		}
		if load[a] != load[b] {
			return load[a] < load[b]
		}
		if off(a, t) != off(b, t) {
			return off(a, t) > off(b, t)
		}
		return rank[a] < rank[b]
	}
	assign := func(ts []task.ID, l []int) {
		quota := (len(ts) + n - 1) / n
		for _, t := range ts {
			if _, done := h.owner[t]; done {
				continue
			}
			if m, ok := prev[t]; ok && l[m] < quota {
				h.owner[t] = m
				load[m]++
				if stateful[t.Sub] {
					loadState[m]++
				}
			}
		}
		for _, t := range ts {
			if _, done := h.owner[t]; done {
				continue
			}
			pick := -1
			for _, m := range ids {
				if l[m] < quota && caught(m, t) && (pick < 0 || better(l, m, pick, t)) {
					pick = m
				}
			}
			if pick < 0 {
				for _, m := range ids {
					if pick < 0 || better(l, m, pick, t) {
						pick = m
					}
				}
			}
			h.owner[t] = pick
			load[pick]++
			if stateful[t.Sub] {
				loadState[pick]++
			}
		}
	}
	assign(statefulTasks, loadState)
	assign(tasks, load)
	for _, t := range tasks {
		target := h.owner[t]
		if caught(target, t) {
			continue
		}
		src := -1
		if p, ok := prev[t]; ok {
			src = p
		} else {
			for _, m := range ids {
				if caught(m, t) && (src < 0 || off(m, t) > off(src, t)) {
					src = m
				}
			}
		}
		if src < 0 || src == target {
			continue
		}
		if h.warmups < cfg.maxWarmups {
			h.standby[target][t] = true
			h.warmups++
		}
		load[target]--
		load[src]++
		h.owner[t] = src
		h.probe = true
	}
	if cfg.replicas == 0 {
		return h
	}
	// ring breaks the last ties: the next member after the owner in id
	// order, so that equal members take turns.
	ring := func(m int, t task.ID) int { return (rank[m] - rank[h.owner[t]] + n) % n }
	standbys := make([]int, n)
	for m := range n {
		standbys[m] = len(h.standby[m])
	}
	for _, t := range tasks {
		if !stateful[t.Sub] {
			continue
		}
		for range cfg.replicas {
			pick := -1
			for _, m := range ids {
				if m == h.owner[t] || h.standby[m][t] {
					continue
				}
				if pick < 0 {
					pick = m
					continue
				}
				hm, hp := off(m, t) > 0, off(pick, t) > 0
				switch {
				case hm != hp:
					if hm {
						pick = m
					}
				case standbys[m] != standbys[pick]:
					if standbys[m] < standbys[pick] {
						pick = m
					}
				case off(m, t) != off(pick, t):
					if off(m, t) > off(pick, t) {
						pick = m
					}
				case ring(m, t) < ring(pick, t):
					pick = m
				}
			}
			if pick < 0 {
				break
			}
			h.standby[pick][t] = true
			standbys[pick]++
		}
	}
	return h
}
