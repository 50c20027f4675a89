//go:build unix

package integration

import (
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/processor"
)

// TestRollingRestartWithStaticMembership restarts three wordcount instances
// one after the other (SIGTERM, then start again on the same state
// directory) while input keeps arriving. With group.instance.id set, the
// group never rebalances: every assignment any instance logs carries the
// generation the group had before the roll, and the other instances log no
// assignment at all while one restarts. The counts stay exactly once. The
// negative control does the same with dynamic membership: each restart
// rebalances the group (the generation moves), which the same check sees.
func TestRollingRestartWithStaticMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	for _, static := range []bool{true, false} {
		name := "static"
		if !static {
			name = "dynamic"
		}
		t.Run(name, func(t *testing.T) { testRollingRestart(t, static) })
	}
}

var assignedRE = regexp.MustCompile(`msg="partitions assigned" generation=(\d+)`)

// generations returns the generation of every assignment the node logged.
func (nd *wcNode) generations(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile(nd.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, m := range assignedRE.FindAllSubmatch(b, -1) {
		g, _ := strconv.Atoi(string(m[1]))
		out = append(out, g)
	}
	return out
}

func testRollingRestart(t *testing.T, static bool) {
	c := newWCCluster(t, 3, static, "--standby-replicas", "1", "--session-timeout", "30s")
	for _, nd := range c.nodes {
		c.start(nd)
	}
	running := func(nd *wcNode) bool {
		for _, st := range nd.tasks() {
			if st.State == processor.TaskRunning {
				return true
			}
		}
		return false
	}
	await(t, time.Minute, "every instance running tasks", func() bool {
		return running(c.nodes[0]) && running(c.nodes[1]) && running(c.nodes[2])
	})
	// The group is settled once no instance logged an assignment for a
	// few seconds.
	logged := func() (n int) {
		for _, nd := range c.nodes {
			n += len(nd.generations(t))
		}
		return n
	}
	last, since := logged(), time.Now()
	await(t, time.Minute, "the group settled", func() bool {
		if n := logged(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > 3*time.Second
	})
	before := 0
	for _, nd := range c.nodes {
		gs := nd.generations(t)
		before = max(before, gs[len(gs)-1])
	}
	c.produceLines(2_000)
	c.waitCounts(2 * time.Minute)

	for i, nd := range c.nodes {
		others := map[*wcNode]int{}
		for _, o := range c.nodes {
			if o != nd {
				others[o] = len(o.generations(t))
			}
		}
		c.produceLines(1_000)
		c.stop(nd, syscall.SIGTERM)
		c.produceLines(1_000)
		c.start(nd)
		await(t, time.Minute, nd.name+" running tasks again", func() bool { return running(nd) })
		c.waitCounts(2 * time.Minute)
		for o, n := range others {
			if gs := o.generations(t); len(gs) != n {
				t.Logf("restart %d (%s): %s got %d assignments meanwhile, generations %v", i+1, nd.name, o.name, len(gs)-n, gs[n:])
				if static {
					t.Errorf("static restart of %s rebalanced the group: %s got new assignments", nd.name, o.name)
				}
			}
		}
	}
	c.produceLines(2_000)
	c.waitCounts(2 * time.Minute)

	after := 0
	for _, nd := range c.nodes {
		gs := nd.generations(t)
		after = max(after, gs[len(gs)-1])
	}
	t.Logf("membership static=%v: generation %d before the rolling restart, %d after", static, before, after)
	if static && after != before {
		t.Errorf("the rolling restart moved the group from generation %d to %d", before, after)
	}
	if !static && after == before {
		t.Errorf("negative control: dynamic restarts left the generation at %d; the check cannot see rebalances", before)
	}
	for _, nd := range c.nodes {
		c.stop(nd, syscall.SIGTERM)
	}
}
