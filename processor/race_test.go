//go:build race

package processor_test

// raceEnabled: the race detector slows processing about fifteen times.
const raceEnabled = true
