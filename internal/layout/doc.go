// Package layout is the byte layout of every store kind sluice keeps: the
// keys and values the operator runtimes write into a store, and the range
// helpers that scan them. Everything that reads store bytes — the operator
// runtimes, interactive queries, restore, the state tools and the tests —
// goes through this package, so that changing how a store is laid out is a
// change to one package.
//
// The table of prefixes is in prefixes.go and in DESIGN.md.
//
// Times in keys are 8 bytes big-endian with the sign bit flipped
// (AppendTime), so byte order is numeric order and indexes scan in time
// order. A user key inside a composite key is written uvarint(len) key, so
// that no key is a prefix of another's entries.
package layout
