package memstat

import (
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
)

// RSS is the process's resident set now, from /proc/self/statm; false
// where there is none (not Linux).
func RSS() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// PeakRSS is the most the process's resident set has been (VmHWM, from
// /proc/self/status); 0 where there is none.
func PeakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// GoBytes is the Go runtime's memory now as runtime/debug.SetMemoryLimit
// counts it: mapped and not released (heap, stacks, the runtime's
// metadata): all the memory the runtime has mapped, less what of it it
// has released to the OS.
func GoBytes() int64 {
	s := [...]metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s[:])
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// OutsideGo is the part of the resident set that is not the Go runtime's
// now, at least 0; false where the resident set cannot be read. It errs
// low: memory the runtime has mapped but not yet touched counts as Go's
// without being resident.
func OutsideGo() (int64, bool) {
	rss, ok := RSS()
	if !ok {
		return 0, false
	}
	return max(rss-GoBytes(), 0), true
}
