//go:build race

package memstat

// raceEnabled: the race detector keeps shadow memory for the Go heap
// outside the Go runtime's accounts, so the resident set outside Go grows
// with the heap.
const raceEnabled = true
