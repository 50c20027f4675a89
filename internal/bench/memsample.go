package bench

import (
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// memPeaks is what sampleMemory saw at most: the Go runtime's memory as
// its memory limit counts it (mapped and not released to the OS:
// runtime/debug.SetMemoryLimit), and the rest of the process's RSS at the
// same moment (Pebble's C memory, the binary's and C libraries' pages,
// the C allocator's overhead), which no Go limit holds.
type memPeaks struct {
	goBytes, outsideGo int64
}

// sampleMemory samples the process every interval until the returned
// stop is called, which returns the peaks. Peak RSS comes from the kernel
// (peakRSS); these split it, to the resolution of the interval.
func sampleMemory(every time.Duration) (stop func() memPeaks) {
	done, out := make(chan struct{}), make(chan memPeaks, 1)
	go func() {
		var p memPeaks
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			metrics.Read(s)
			g := int64(s[0].Value.Uint64() - s[1].Value.Uint64())
			p.goBytes = max(p.goBytes, g)
			if rss := currentRSS(); rss > 0 {
				p.outsideGo = max(p.outsideGo, rss-g)
			}
			select {
			case <-done:
				out <- p
				return
			case <-t.C:
			}
		}
	}()
	return func() memPeaks {
		close(done)
		return <-out
	}
}

// currentRSS reads the process's resident set from /proc/self/statm; 0
// where there is none.
func currentRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}
