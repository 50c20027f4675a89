// Package store holds sluice's key-value state: byte-keyed stores in byte
// order, typed only by the layers above (serdes run at the store boundary).
//
// Two layers:
//
//   - An Engine holds committed state: Pebble on disk (OpenPebble) or a map
//     in memory (NewMemory). Apply writes a batch together with the changelog
//     offset it reaches, atomically.
//   - A Staged store sits on an Engine and is what a task reads and writes.
//     Writes go to a stage; Get and Range see the stage over the engine.
//
// Why stage at all: invariant 2 (ARCHITECTURE.md) says local state equals
// committed state. A task's writes belong to the Kafka transaction that
// carries their changelog records, and that transaction may still abort. So
// the stage reaches the engine only after the transaction commits, together
// with the changelog offset it reaches; an abort discards the stage. The
// engine therefore never holds uncommitted state, and a crash never forces a
// wipe: on restart the store replays only the changelog tail past
// Engine.Checkpoint.
//
// The one exception is a Direct engine, which lives in memory alone and
// undoes the open transaction's writes itself (a stream join's buffer,
// ops.JoinMemory): a Staged over it stages nothing, and a crash loses the
// engine whole, which the changelog rebuilds.
//
// One commit, as the runtime drives it:
//
//	eng, err := store.OpenPebble(filepath.Join(stateDir, taskID, "counts"))
//	st := store.NewStaged("counts", eng)
//	st.SetChangelog(func(k, v []byte) { produce(changelogTopic, k, v) }) // v == nil: tombstone
//
//	// processing, inside the open transaction
//	v, ok, err := st.Get(k)
//	err = st.Put(k, next(v, ok))
//
//	// commit
//	st.Flush()                   // emit the folded changelog records into the txn
//	lastOffset, err := endTxn()  // commit the Kafka transaction
//	if err != nil {
//		st.Abort()               // the stage dies with the transaction
//	} else {
//		err = st.Commit(lastOffset) // writes + checkpoint, atomically
//	}
//
// With the cache on (the default) repeated writes of a key within one
// transaction fold into one changelog record at Flush; WithoutCache emits a
// record per write. Independently, the stage keeps committed values it wrote
// or read as a read cache bounded in bytes (WithReadCache), so that the next
// transaction reads them from a map rather than the engine.
//
// A store whose keys expire in ranges (a stream join's segments, a window
// store's due expiry entries, or the due windows of a store laid out by
// start) drops one with DropRange: one changelog record for the range
// (SetRangeChangelog; the runtime marks it with a header, and a restore
// replays it as Write{Key: start, End: end}, a range delete), not a
// tombstone per key. Logged says whether the changelog has
// heard of a key in a range, and so whether a drop stands for anything
// that silent deletes would not.
//
// A store written once a record whose keys go by range drops (a stream
// join's buffer) packs its changelog records (WithPacking): the writes of
// one group of keys go out in one record (SetPackChangelog; the runtime
// marks it with a header, and a restore replays the writes UnpackWrites
// reads from it), since a Kafka record costs far more than its bytes.
//
// A table whose updates are forwarded once per key and flush (folding, Kafka
// Streams' record cache) holds them in the stage too: PutHeld writes like
// Put and keeps, with the key's entry, the write's record context and the
// value the key had before its first held write; TakeHeld hands out one
// update per key. Held updates follow the stage, rolled back and aborted
// with the writes they describe.
package store
