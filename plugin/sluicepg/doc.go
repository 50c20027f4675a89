// Package sluicepg writes sluice's records into PostgreSQL, through pgx. It
// is the only package of sluice that imports pgx.
//
//	s, err := sluicepg.New(ctx, "postgres://app@db:5432/billing", table)
//	defer s.Close()
//
// A *Sink is both of sluice's external sinks (package sink):
//
//   - a sink.Participant: Prepare runs BEGIN, the batch's statements and
//     PREPARE TRANSACTION xid on one connection; CommitPrepared and
//     RollbackPrepared run COMMIT PREPARED / ROLLBACK PREPARED, wrapping
//     sink.ErrNotPrepared when PostgreSQL knows no such transaction;
//     Prepared lists pg_prepared_xacts of this database by prefix. The
//     server needs max_prepared_transactions > 0 (its default is 0).
//   - a sink.Idempotent: Write stores the rows and the next offset of each
//     source partition in one ordinary transaction, in the table
//     sluice_sink_offsets (sink, topic, kafka_partition, next_offset),
//     created if missing; Offsets reads it.
//
// The rows of a batch go in a few multi-row statements (INSERT ... VALUES
// (...), (...) with ON CONFLICT ... DO UPDATE for upserts, DELETE ... WHERE
// key IN (...) for tombstones): see sluicedb.Table for the mapping. A row
// PostgreSQL rejects (SQLSTATE classes 22 and 23, or a value pgx cannot
// encode for its column) is a *sluicedb.RowError naming the record; a lost
// connection wraps sluicedb.ErrConnection.
package sluicepg
