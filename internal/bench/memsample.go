package bench

import (
	"sync"
	"time"

	"github.com/sluice-streams/sluice/internal/memstat"
)

// memPeaks is what sampleMemory saw at most: the Go runtime's memory as
// its memory limit counts it (memstat.GoBytes), and the rest of the
// process's RSS (memstat.OutsideGo: Pebble's C memory, the binary's and C
// libraries' pages, the C allocator's overhead).
type memPeaks struct {
	goBytes, outsideGo int64
}

// sampleMemory samples the process every interval until the returned
// stop is called, which returns the peaks (and the same again if called
// again). Peak RSS comes from the kernel (memstat.PeakRSS); these split
// it, to the resolution of the interval.
func sampleMemory(every time.Duration) (stop func() memPeaks) {
	done, out := make(chan struct{}), make(chan memPeaks, 1)
	go func() {
		var p memPeaks
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			p.goBytes = max(p.goBytes, memstat.GoBytes())
			if o, ok := memstat.OutsideGo(); ok {
				p.outsideGo = max(p.outsideGo, o)
			}
			select {
			case <-done:
				out <- p
				return
			case <-t.C:
			}
		}
	}()
	return sync.OnceValue(func() memPeaks {
		close(done)
		return <-out
	})
}
