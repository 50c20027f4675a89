// Package bench measures sluice against the pipe limit: a raw franz-go
// consume→produce loop on the same embedded broker, run in the same process
// from a fresh broker each time. `sluice bench` prints its results; ratios to
// the pipe are what matter, since absolute numbers depend on the machine.
package bench
