// Package sqlsink turns batches of records into SQL statements for the
// database adapters (plugin/sluicepg, plugin/sluicemysql): multi-row
// inserts and upserts, and multi-row deletes for tombstones, a few
// statements per batch whatever its size, never a row per round trip. When
// the database rejects a batch for its data, Locate finds the record it
// rejected by bisection under savepoints, so that the error names it.
//
// It imports no driver: each adapter gives a Dialect (quoting,
// placeholders, upsert clause, error classes) and an Execer.
package sqlsink
