// Package sluicedb holds what sluice's database adapters share, without a
// database driver: the URL of a database, the mapping of records to a table,
// and the error that tells a rejected row from a lost connection.
//
// The adapters are plugin/sluicepg (PostgreSQL, through pgx) and
// plugin/sluicemysql (MySQL and MariaDB, through go-sql-driver/mysql). Each
// returns a sink that is both a sink.Participant (two-phase commit: the
// database transaction prepared before sluice's Kafka transaction commits,
// committed after it) and a sink.Idempotent (offsets mode: rows and their
// source coordinates written in one ordinary transaction after the Kafka
// commit).
//
//	table := sluicedb.Table[string, Bill]{
//		Name:       "bills_accepted",
//		Columns:    []sluicedb.Column{{"bill_id", "text"}, {"amount_cents", "bigint"}},
//		Row: func(r sink.Record[string, Bill]) ([]any, error) {
//			return []any{r.Key, r.Value.Cents}, nil
//		},
//	}
//	u, err := sluicedb.ParseURL("postgres://app@db:5432/billing") // password from SLUICE_DB_PASSWORD
//	s, err := sluicepg.New(ctx, u.String(), table)
//
// A rejected row (a constraint, a type, a value too long) comes back as a
// *RowError naming the record and carrying the database's message; a lost
// connection wraps ErrConnection. The first is for a dead-letter topic, the
// second for a retry.
package sluicedb
