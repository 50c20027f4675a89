// Package memstat reads what a process's memory is made of: its resident
// set from the kernel, and the Go runtime's memory as the Go memory limit
// counts it. The rest of the resident set, which no Go limit holds, is
// the difference: Pebble's C memory, the binary's and the C libraries'
// pages, the C allocator's overhead. The processor sets the Go memory
// limit from it (state.memory.go.limit), and the bench reports it.
//
//	if rss, ok := memstat.RSS(); ok {
//		outside := rss - memstat.GoBytes()
//	}
package memstat
