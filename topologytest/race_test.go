//go:build race

package topologytest_test

// raceEnabled shrinks the long randomized tests, which the race detector
// slows down about fifteen times; they run in full without it.
const raceEnabled = true
