//go:build !race

package topologytest_test

const raceEnabled = false
