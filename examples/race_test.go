//go:build race

package examples_test

// raceEnabled makes the Nexmark tests use fewer events: the race detector
// slows them about fivefold.
const raceEnabled = true
