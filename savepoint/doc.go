// Package savepoint is the on-disk form of a savepoint: a consistent cut of
// an application's state (every task's stores) and its input positions,
// taken by `sluice savepoint create` (processor.TakeSavepoint) and started
// from by `sluice run --from-savepoint` (processor.FromSavepoint).
//
// A savepoint directory holds
//
//	manifest.json                   Manifest: application, topology
//	                                fingerprint, input offsets, stores
//	<application>/<task>/<store>/   one Pebble store per task and store
//
// so that it is also a state root that package state and `sluice state`
// read unchanged. A Writer builds one in a temporary sibling directory and
// renames it into place only when the manifest is written: a savepoint
// directory either is complete or does not exist, and none is ever
// overwritten.
//
//	w, err := savepoint.Create(dir)   // ErrExists if dir exists
//	pw, err := w.Part("app", "0_3", "counts", 3)
//	... fill pw.Engine() ...
//	part, err := pw.Close()           // counts and checksums it
//	// or take a store another process wrote under w.Staging(),
//	// e.g. a Pebble checkpoint of a task's store (hard links):
//	part, err = w.Adopt(savepoint.PartDir("app", "0_4", "counts"), 4)
//	err = w.Commit(manifest)          // manifest.json, then the rename
//
//	sp, err := savepoint.Open(dir)    // ErrIncomplete, ErrFormat
//	err = sp.Verify()                 // ErrCorrupt names the store's directory
//	err = sp.Each("counts", 3, func(k, v []byte) error { ... })
package savepoint
