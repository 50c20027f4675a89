//go:build unix

package integration

import (
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/readback"
)

// TestFoldedCountsExactlyOnceUnderSIGKILL runs two wordcount instances with
// fold.updates on and SIGKILLs one of them in each of four rounds of input,
// restarting it on its state. The counts must end exact, every word's
// updates rising, never repeated: held updates die with the process and
// the transaction they belong to, and the replay holds them again. There
// must also be fewer updates than words counted, or nothing was folded.
// With folding the count's repartition sink combines each transaction's
// words by key: the committed repartition records, each standing for the
// words in its sluice.count header, must add up to every word exactly
// once, some standing for several.
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

	recs, err := readback.ReadCommitted(testContext(t, time.Minute), c.addrs, c.appID+"-counts-repartition")
	if err != nil {
		t.Fatal(err)
	}
	got, combined := map[string]int64{}, 0
	for _, r := range recs {
		w := int64(1)
		for _, h := range r.Headers {
			if h.Key == "sluice.count" && len(h.Value) == 8 {
				w = int64(binary.BigEndian.Uint64(h.Value))
			}
		}
		if w > 1 {
			combined++
		}
		got[string(r.Key)] += w
	}
	for word, n := range c.want {
		if got[word] != n {
			t.Errorf("the repartition topic counts %s %d times, want %d", word, got[word], n)
		}
	}
	if len(got) != len(c.want) {
		t.Errorf("the repartition topic has %d words, want %d", len(got), len(c.want))
	}
	t.Logf("%d repartition records for %d words, %d standing for several", len(recs), words, combined)
	if combined == 0 {
		t.Error("no repartition record stands for several words: nothing combined")
	}
}
