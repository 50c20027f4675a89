package sluicedb_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for the test's reader
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testdb"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/plugin/sluicemysql"
	"github.com/sluice-streams/sluice/plugin/sluicepg"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/topology"
)

// mirrorStore is both kinds of sink, as the adapters are.
type mirrorStore interface {
	sink.Participant[string, topology.Change[int64]]
	sink.Idempotent[string, topology.Change[int64]]
	Close() error
}

// TestMirrorTable: a Table[string, int64] read from a topic is mirrored into
// a database table through TableChanges and Mirror, on PostgreSQL and
// MariaDB, in both modes: updates upsert, tombstones delete rows that were
// there (the check of the final state fails before the deletes: its
// negative control).
func TestMirrorTable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts database servers; not with -short")
	}
	type server struct {
		name   string
		create func(context.Context, string) (string, error)
		open   func(ctx context.Context, url string, t sluicedb.Table[string, topology.Change[int64]]) (mirrorStore, *sql.DB, error)
	}
	pg := testdb.StartPostgres(t)
	my := testdb.StartMariaDB(t)
	servers := []server{
		{"postgres", pg.CreateDatabase, func(ctx context.Context, url string, tb sluicedb.Table[string, topology.Change[int64]]) (mirrorStore, *sql.DB, error) {
			s, err := sluicepg.New(ctx, url, tb)
			if err != nil {
				return nil, nil, err
			}
			db, err := sql.Open("pgx", url)
			return s, db, err
		}},
		{"mariadb", my.CreateDatabase, func(ctx context.Context, url string, tb sluicedb.Table[string, topology.Change[int64]]) (mirrorStore, *sql.DB, error) {
			s, err := sluicemysql.New(ctx, url, tb)
			if err != nil {
				return nil, nil, err
			}
			return s, s.DB(), nil
		}},
	}
	for _, srv := range servers {
		for _, mode := range []string{"two_phase", "offsets"} {
			t.Run(srv.name+"/"+mode, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				url, err := srv.create(ctx, "mirror_"+mode)
				if err != nil {
					t.Fatal(err)
				}
				values := sluicedb.Table[string, int64]{
					Name:       "prices",
					Columns:    []sluicedb.Column{{Name: "k", Type: "varchar(64)"}, {Name: "v", Type: "bigint"}},
					PrimaryKey: []string{"k"},
					Row:        func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
					Key:        func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key}, nil },
					Create:     true,
				}
				rows, err := sluicedb.Mirror(values)
				if err != nil {
					t.Fatal(err)
				}
				st, db, err := srv.open(ctx, url, rows)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				defer db.Close()
				runMirror(t, ctx, mode, st, db)
			})
		}
	}
}

func runMirror(t *testing.T, ctx context.Context, mode string, st mirrorStore, db *sql.DB) {
	addrs := testbroker.Addrs(t)
	p := testbroker.Unique(t, "mirror-")
	in := p + "-in"
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, in); err != nil {
		t.Fatal(err)
	}

	tp := topology.New()
	changes := topology.TableChanges(topology.TableFrom(tp, in, topology.Materialized("prices", serde.String, serde.Int64)))
	if mode == "offsets" {
		topology.ToIdempotent(changes, "prices-db", sink.Idempotent[string, topology.Change[int64]](st), serde.String, serde.JSON[topology.Change[int64]]())
	} else {
		topology.ToParticipant(changes, "prices-db", sink.Participant[string, topology.Change[int64]](st))
	}
	app, err := processor.New(tp, processor.Brokers(addrs...), processor.ApplicationID(p+"-app"),
		processor.StateDir(t.TempDir()), processor.CommitInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	produce := func(kvs ...any) {
		var recs []*kgo.Record
		for i := 0; i < len(kvs); i += 2 {
			r := &kgo.Record{Key: []byte(kvs[i].(string))}
			if v, ok := kvs[i+1].(int64); ok {
				r.Value, _ = serde.Int64.Encode(v)
			}
			recs = append(recs, r)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	read := func() (map[string]int64, error) {
		rs, err := db.QueryContext(ctx, "SELECT k, v FROM prices")
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		got := map[string]int64{}
		for rs.Next() {
			var k string
			var v int64
			if err := rs.Scan(&k, &v); err != nil {
				return nil, err
			}
			got[k] = v
		}
		return got, rs.Err()
	}
	waitFor := func(want map[string]int64) error {
		var got map[string]int64
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if got, err = read(); err == nil && maps.Equal(got, want) {
				return nil
			}
		}
		return fmt.Errorf("table holds %v (%v), want %v", got, err, want)
	}

	long := strings.Repeat("k", 64)
	produce("a", int64(1), "b", int64(2), "c", int64(3), long, int64(-1), "ü", int64(5))
	if err := waitFor(map[string]int64{"a": 1, "b": 2, "c": 3, long: -1, "ü": 5}); err != nil {
		t.Fatal(err)
	}
	final := map[string]int64{"a": 10, "d": 4, "ü": 5}
	// The negative control: b, c and long are still rows.
	if got, err := read(); err != nil || maps.Equal(got, final) {
		t.Fatalf("the final state before the deletes: %v, %v", got, err)
	}
	produce("a", int64(10), "b", nil, "d", int64(4), "c", nil, long, nil, "e", int64(7), "e", nil)
	if err := waitFor(final); err != nil {
		t.Fatal(err)
	}
}

// TestMirrorNeedsKey: Mirror refuses a mapping it cannot delete with.
func TestMirrorNeedsKey(t *testing.T) {
	good := sluicedb.Table[string, int64]{Name: "t", Columns: []sluicedb.Column{{Name: "k"}, {Name: "v"}}, PrimaryKey: []string{"k"},
		Row: func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key, r.Value}, nil },
		Key: func(r sink.Record[string, int64]) ([]any, error) { return []any{r.Key}, nil }}
	m, err := sluicedb.Mirror(good)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Deleted(sink.Record[string, topology.Change[int64]]{Value: topology.Change[int64]{Deleted: true}}) {
		t.Error("a deleted change is not a delete")
	}
	for name, bad := range map[string]func(*sluicedb.Table[string, int64]){
		"no key":         func(t *sluicedb.Table[string, int64]) { t.Key = nil },
		"no primary key": func(t *sluicedb.Table[string, int64]) { t.PrimaryKey = nil },
		"insert":         func(t *sluicedb.Table[string, int64]) { t.Insert = true },
	} {
		tb := good
		bad(&tb)
		if _, err := sluicedb.Mirror(tb); err == nil {
			t.Errorf("%s: Mirror accepted it", name)
		}
	}
}
