// Package sluicemysql writes sluice's records into MySQL or MariaDB,
// through go-sql-driver/mysql. It is the only package of sluice that
// imports that driver.
//
//	s, err := sluicemysql.New(ctx, "mysql://app@db:3306/billing", table)
//	defer s.Close()
//
// A *Sink is both of sluice's external sinks (package sink):
//
//   - a sink.Participant: Prepare runs XA START xid, the batch's
//     statements, XA END xid and XA PREPARE xid on one connection, which it
//     holds; XA COMMIT and XA ROLLBACK resolve the transaction on that
//     connection and close it, wrapping sink.ErrNotPrepared on XAER_NOTA;
//     Prepared lists XA RECOVER by prefix. XA RECOVER shows the whole
//     server's prepared transactions, not one database's: give each
//     application its own prefix. The user needs XA_RECOVER_ADMIN on MySQL
//     8, and PROCESS for the waits below.
//     MariaDB loses a transaction that another session commits while its
//     preparing session is still ending, and SHOW ENGINE INNODB STATUS,
//     which tells when a session has ended, crashed MariaDB 10.11 when read
//     while one did. So the preparing session resolves its transaction,
//     and only when it cannot (unresolved after 5s, Close, MaxConns, a lost
//     answer) does the session end with the transaction prepared, and is
//     watched until it has; resolving an id another process prepared
//     first waits for the user's sessions holding a transaction to end,
//     and for any session still ending. At most MaxConns-1 sessions are
//     held.
//   - a sink.Idempotent: Write stores the rows and the next offset of each
//     source partition in one ordinary transaction, in the table
//     sluice_sink_offsets (sink, topic, kafka_partition, next_offset),
//     created if missing; Offsets reads it.
//
// Tables must be InnoDB (transactions). The rows of a batch go in a few
// multi-row statements (INSERT ... VALUES (...), (...) with ON DUPLICATE
// KEY UPDATE for upserts), with the driver's interpolateParams on, so that
// a statement is one round trip; MaxRows bounds a statement (mind
// max_allowed_packet for wide rows). Tombstones are deleted one key per
// statement (DELETE ... WHERE key = ?): for a list of keys the optimizer may
// read a small table whole, and that read would wait for the rows another
// task's prepared transaction holds until the Kafka commit, which waits for
// this one. Prepare's statements wait for a lock no longer than its context
// (innodb_lock_wait_timeout is set from it).
// A row the server rejects (SQLSTATE classes 22 and 23, and errors such as
// 1364 no default, 1366 incorrect value) is a *sluicedb.RowError naming
// the record; a lost connection wraps sluicedb.ErrConnection. Run the
// server in a strict sql_mode (the default since MySQL 5.7 and MariaDB
// 10.2.4): otherwise it truncates a value too long with a warning rather
// than rejecting it.
package sluicemysql
