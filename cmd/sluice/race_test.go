//go:build race

package main

// raceEnabled: the test binary runs under the race detector, which sees
// nothing of the processes the README tour starts.
const raceEnabled = true
