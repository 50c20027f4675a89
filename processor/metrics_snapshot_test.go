package processor

import (
	"sync"
	"testing"
	"time"
)

// TestSnapshotConsistent: a snapshot taken while batches are observed
// counts exactly the observations its buckets hold, so the difference of
// two snapshots is a histogram (the console's per-second quantiles rely on
// it; so does Prometheus: count equals the +Inf bucket). Every observation
// here is under the last bound, so Count must equal the last bucket. The
// control: the observers ran, and snapshots saw them in flight.
func TestSnapshotConsistent(t *testing.T) {
	h := newHistogram()
	last := latencyBounds[len(latencyBounds)-1].Seconds()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var b histBatch
				for j := range 50 {
					b.add(time.Duration(1+(g*50+j+i)%5000) * time.Millisecond)
				}
				h.observeBatch(&b)
			}
		}()
	}
	// Until enough snapshots saw observations arrive, bounded in time for
	// a loaded machine, where the observers may be scheduled seldom.
	deadline := time.Now().Add(20 * time.Second)
	snaps, moving := 0, 0
	prev := uint64(0)
	for (moving < 100 || snaps < 1000) && time.Now().Before(deadline) {
		s := h.Snapshot()
		snaps++
		if s.Count != s.Buckets[last] {
			t.Fatalf("snapshot %d: count %d, buckets hold %d", snaps, s.Count, s.Buckets[last])
		}
		if s.Count > prev {
			moving++
		}
		prev = s.Count
	}
	close(stop)
	wg.Wait()
	if moving < 10 || h.Snapshot().Count == 0 {
		t.Fatalf("only %d of %d snapshots saw observations arrive", moving, snaps)
	}
}
