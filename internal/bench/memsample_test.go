package bench

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/memstat"
)

// TestSampleMemory: 64 MiB held by Go while sampling shows in the Go
// peak, and the binary's pages in the peak outside Go. Negative control:
// the same sampling without the 64 MiB stays below it.
func TestSampleMemory(t *testing.T) {
	const held = 64 << 20
	measure := func(hold bool) memPeaks {
		debug.FreeOSMemory() // what earlier tests freed goes back to the OS
		stop := sampleMemory(5 * time.Millisecond)
		var b []byte
		if hold {
			b = make([]byte, held)
			for i := range b {
				b[i] = byte(i)
			}
		}
		time.Sleep(50 * time.Millisecond)
		p := stop()
		runtime.KeepAlive(b)
		return p
	}
	without, with := measure(false), measure(true)
	if with.goBytes < held {
		t.Errorf("Go peak %d with %d held, want at least that", with.goBytes, held)
	}
	if without.goBytes >= held {
		t.Errorf("negative control: Go peak %d without the %d held, want less", without.goBytes, held)
	}
	if _, ok := memstat.RSS(); ok && with.outsideGo <= 0 {
		t.Errorf("outside Go %d, want the binary's pages at least", with.outsideGo)
	}
	t.Logf("with: %+v; without: %+v", with, without)
}
