package memstat

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestGoBytesAndRSS: 64 MiB allocated and written shows in GoBytes and in
// the resident set, and not in what is outside Go. Negative control: before the
// allocation GoBytes is below it.
func TestGoBytesAndRSS(t *testing.T) {
	const held = 64 << 20
	debug.FreeOSMemory()
	before := GoBytes()
	rss0, ok := RSS()
	if !ok {
		t.Skip("no /proc/self/statm here")
	}
	b := make([]byte, held)
	for i := range b {
		b[i] = byte(i)
	}
	after := GoBytes()
	rss1, _ := RSS()
	out, _ := OutsideGo()
	runtime.KeepAlive(b)
	if before >= held {
		t.Errorf("negative control: GoBytes %d before the allocation, want under %d", before, held)
	}
	if after-before < held {
		t.Errorf("GoBytes %d → %d with %d allocated, want it to grow by that", before, after, held)
	}
	if rss1-rss0 < held*9/10 {
		t.Errorf("RSS %d → %d with %d written, want it to grow by about that", rss0, rss1, held)
	}
	if peak := PeakRSS(); peak < rss1 {
		t.Errorf("peak RSS %d under the RSS %d read before it", peak, rss1)
	}
	if !raceEnabled && out >= held {
		t.Errorf("outside Go %d, want the Go heap's %d not in it", out, held)
	}
	t.Logf("GoBytes %d → %d, RSS %d → %d, outside Go %d", before, after, rss0, rss1, out)
}
