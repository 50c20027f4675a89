// Package readback reads a topic from its start to its current end offsets
// as an independent read_committed consumer: how the demo and the tests
// check what sluice committed.
package readback
