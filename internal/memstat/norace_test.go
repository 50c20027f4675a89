//go:build !race

package memstat

const raceEnabled = false
