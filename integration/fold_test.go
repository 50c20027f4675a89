//go:build unix

package integration

import (
	"syscall"
	"testing"
	"time"
)

// TestFoldedCountsExactlyOnceUnderSIGKILL runs two wordcount instances with
// fold.updates on and SIGKILLs one of them in each of four rounds of input,
// restarting it on its state. The counts must end exact, every word's
// updates rising, never repeated: held updates die with the process and
// the transaction they belong to, and the replay holds them again. There
// must also be fewer updates than words counted, or nothing was folded.
func TestFoldedCountsExactlyOnceUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	c := newWCCluster(t, 2, false, "--fold-updates", "--session-timeout", "6s")
	for _, nd := range c.nodes {
		c.start(nd)
	}
	for round := range 4 {
		c.produceLines(2_000)
		time.Sleep(time.Duration(100+c.rng.IntN(700)) * time.Millisecond)
		victim := c.nodes[round%2]
		c.stop(victim, syscall.SIGKILL)
		c.produceLines(1_000)
		c.start(victim)
	}
	updates := c.waitCounts(3 * time.Minute)
	var words int64
	for _, n := range c.want {
		words += n
	}
	t.Logf("%d words counted in %d updates", words, updates)
	if int64(updates) >= words {
		t.Errorf("%d updates for %d words: nothing folded", updates, words)
	}
}
