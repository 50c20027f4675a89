// Package state reads the local state a sluice application leaves on disk,
// the read side of Flink's State Processor API: users list the stores of a
// stopped instance's state directory and iterate their records, raw or
// typed through serdes of their own, to write their own analyses.
//
//	r, err := state.Open("/var/lib/sluice/sluice-wordcount",
//		state.WithTopology(examples.WordCount("text-lines", "word-counts", "text-lines-dlq")))
//	if err != nil { ... }       // state.ErrInUse: an instance is running in it
//	defer r.Close()
//	for _, s := range r.Stores() { fmt.Println(s.Task, s.Store, s.Records, s.ChangelogOffset) }
//	err = state.KeyValues(r, "counts", serde.String, serde.Int64,
//		func(kv state.KeyValue[string, int64]) error { ...; return nil })
//
// The reader never writes: it takes the application directory's lock (so a
// running instance's directory is refused, and no instance starts in it
// while it reads) and opens every Pebble store read-only. What it reads is
// the committed state each store reflects, up to the changelog offset
// StoreInfo.ChangelogOffset names (invariant 2: a store holds only
// committed writes, applied with that offset).
//
// Store bytes are read through internal/layout: a key-value store's keys and
// values are its serdes' encodings; a window store's windows are
// layout.WindowKey entries or, laid out by start, layout.StartKey ones
// (KeyValues and Windows read both). Stores of
// private layouts (timers, join buffers, keyed state, time stores) are
// listed with their layout name and read raw (Records).
//
// A savepoint directory (package savepoint) holds the same
// <application>/<task>/<store> Pebble directories beside its manifest, so
// Open reads it as a state root, with everything above unchanged.
package state
