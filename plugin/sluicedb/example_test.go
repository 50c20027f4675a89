package sluicedb_test

import (
	"fmt"
	"os"

	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/sink"
)

func ExampleParseURL() {
	os.Setenv(sluicedb.PasswordEnv, "s3cret") // the password need not be on the command line
	defer os.Unsetenv(sluicedb.PasswordEnv)
	u, err := sluicedb.ParseURL("postgres://billing@db:5432/ledger?sslmode=disable")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(u.Scheme, u.Host, u.Port, u.Database, u.Password == "s3cret")
	fmt.Println(u.Redacted())
	// Output:
	// postgres db 5432 ledger true
	// postgres://billing@db:5432/ledger?sslmode=disable
}

type totals struct{ Count, Sum int64 }

// A Table[string, *totals] mirrored into account_totals: upserted on
// change, deleted on a tombstone (a nil value).
func ExampleTable() {
	t := sluicedb.Table[string, *totals]{
		Name:       "account_totals",
		Columns:    []sluicedb.Column{{Name: "account", Type: "varchar(64)"}, {Name: "count", Type: "bigint"}, {Name: "sum_cents", Type: "bigint"}},
		PrimaryKey: []string{"account"},
		Row: func(r sink.Record[string, *totals]) ([]any, error) {
			return []any{r.Key, r.Value.Count, r.Value.Sum}, nil
		},
		Deleted: func(r sink.Record[string, *totals]) bool { return r.Value == nil },
		Key:     func(r sink.Record[string, *totals]) ([]any, error) { return []any{r.Key}, nil },
		Create:  true,
	}
	fmt.Println(t.Validate())
	t.Key = nil
	fmt.Println(t.Validate())
	// Output:
	// <nil>
	// sluicedb: bad table mapping: table "account_totals": deleting tombstones needs a PrimaryKey and a Key function
}
