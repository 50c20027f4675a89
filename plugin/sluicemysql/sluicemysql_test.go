package sluicemysql

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"github.com/sluice-streams/sluice/internal/sqlsink/sqlsinktest"
	"github.com/sluice-streams/sluice/internal/testdb"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
)

type bill = sqlsinktest.Bill

func harness(t *testing.T) *sqlsinktest.Harness {
	m := testdb.StartMariaDB(t)
	// The reader is root on the socket: KillConnections(the sink's user)
	// spares it.
	reader, err := sql.Open("mysql", m.RootDSN()+testdb.MariaDBDatabase)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	return &sqlsinktest.Harness{
		URL: m.URL(),
		Open: func(ctx context.Context, url string, t sluicedb.Table[string, *bill]) (sqlsinktest.Sink, error) {
			return New(ctx, url, t)
		},
		Close:   func(s sqlsinktest.Sink) { s.(*Sink[string, *bill]).Close() },
		Hook:    func(s sqlsinktest.Sink, fn func()) { s.(*Sink[string, *bill]).beforePrepare = fn },
		Reader:  reader,
		Restart: m.Restart,
		Crash:   m.Crash,
		Kill:    func(ctx context.Context) (int, error) { return m.KillConnections(ctx, m.User()) },
		Text: func(n int) string {
			return "varchar(" + strconv.Itoa(n) + ") CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
		},
		Int:       "bigint",
		Bytes:     "longblob",
		NULInText: true,
	}
}

func TestSuite(t *testing.T) { sqlsinktest.Run(t, harness(t)) }
