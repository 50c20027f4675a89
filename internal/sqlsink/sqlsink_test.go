package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/sink"
)

// recorder keeps the statements a Writer sends: these tests are about the
// SQL it builds; the suite in sqlsinktest runs it against real servers.
type recorder struct{ stmts []stmt }

func (r *recorder) Exec(_ context.Context, q string, args ...any) error {
	r.stmts = append(r.stmts, stmt{q, args})
	return nil
}

var testDialect = Dialect{
	Name:        "test",
	Quote:       func(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` },
	Placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
	OnConflict:  func(pk string) string { return " ON CONFLICT (" + pk + ") DO UPDATE SET " },
	Excluded:    func(c string) string { return "EXCLUDED." + c },
	MaxParams:   100,
	Classify:    func(error) (Class, string, string) { return Other, "", "" },
}

type rec = sink.Record[string, *int]

func mirror() sluicedb.Table[string, *int] {
	return sluicedb.Table[string, *int]{
		Name:       "s.t",
		Columns:    []sluicedb.Column{{Name: "k", Type: "text"}, {Name: "v", Type: "bigint"}},
		PrimaryKey: []string{"k"},
		Row:        func(r rec) ([]any, error) { return []any{r.Key, *r.Value}, nil },
		Deleted:    func(r rec) bool { return r.Value == nil },
		Key:        func(r rec) ([]any, error) { return []any{r.Key}, nil },
	}
}

func recs(keys ...string) []rec {
	out := make([]rec, len(keys))
	for i, k := range keys {
		v := i
		out[i] = rec{Key: k, Value: &v, Offset: int64(i)}
		if strings.HasPrefix(k, "-") {
			out[i].Key, out[i].Value = k[1:], nil
		}
	}
	return out
}

func TestStatements(t *testing.T) {
	w, err := New(mirror(), testDialect, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	// a is upserted twice (the last wins), b deleted after an upsert, c
	// upserted after a delete.
	if err := w.Write(context.Background(), &r, recs("a", "b", "a", "-b", "-c", "c")); err != nil {
		t.Fatal(err)
	}
	want := []stmt{
		{`DELETE FROM "s"."t" WHERE "k" IN ($1)`, []any{"b"}},
		{`INSERT INTO "s"."t" ("k", "v") VALUES ($1, $2), ($3, $4) ON CONFLICT ("k") DO UPDATE SET "v" = EXCLUDED."v"`, []any{"a", 2, "c", 5}},
	}
	if fmt.Sprint(r.stmts) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", r.stmts, want)
	}
	if got := w.CreateSQL(); got != `CREATE TABLE IF NOT EXISTS "s"."t" ("k" text, "v" bigint, PRIMARY KEY ("k"))` {
		t.Fatal(got)
	}
}

// TestPointDeletes: with PointDeletes each tombstone is a statement of its
// own by equality on every key column, in Write and in Locate's replay
// alike; the rows still go in one statement.
func TestPointDeletes(t *testing.T) {
	d := testDialect
	d.PointDeletes = true
	tbl := mirror()
	tbl.Columns = append(tbl.Columns, sluicedb.Column{Name: "k2", Type: "text"})
	tbl.PrimaryKey = []string{"k", "k2"}
	tbl.Row = func(r rec) ([]any, error) { return []any{r.Key, *r.Value, "x"}, nil }
	tbl.Key = func(r rec) ([]any, error) { return []any{r.Key, "x"}, nil }
	w, err := New(tbl, d, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []stmt{
		{`DELETE FROM "s"."t" WHERE "k" = $1 AND "k2" = $2`, []any{"b", "x"}},
		{`DELETE FROM "s"."t" WHERE "k" = $1 AND "k2" = $2`, []any{"c", "x"}},
		{`INSERT INTO "s"."t" ("k", "v", "k2") VALUES ($1, $2, $3), ($4, $5, $6) ON CONFLICT ("k", "k2") DO UPDATE SET "v" = EXCLUDED."v"`, []any{"a", 0, "x", "d", 3, "x"}},
	}
	var r recorder
	if err := w.Write(context.Background(), &r, recs("a", "-b", "-c", "d")); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.stmts) != fmt.Sprint(want) {
		t.Fatalf("Write: got  %v\nwant %v", r.stmts, want)
	}
	r.stmts = nil
	if err := w.Locate(context.Background(), &r, recs("a", "-b", "-c", "d"), nil); err != nil {
		t.Fatal(err)
	}
	var deletes []stmt
	for _, s := range r.stmts {
		if strings.HasPrefix(s.sql, "DELETE") {
			deletes = append(deletes, s)
		}
	}
	if fmt.Sprint(deletes) != fmt.Sprint(want[:2]) {
		t.Fatalf("Locate's deletes: got  %v\nwant %v", deletes, want[:2])
	}
}

// TestBatching: a batch is a few statements, bounded by MaxParams and by
// the rows per statement, never a row per round trip.
func TestBatching(t *testing.T) {
	tbl := mirror()
	tbl.PrimaryKey, tbl.Deleted, tbl.Key = nil, nil, nil
	for _, c := range []struct{ rows, maxRows, want int }{
		{0, 1000, 0}, {1, 1000, 1}, {50, 1000, 1}, {51, 1000, 2}, {500, 1000, 10}, {500, 20, 25},
	} {
		w, err := New(tbl, testDialect, c.maxRows) // 100 parameters: 50 rows of 2 columns
		if err != nil {
			t.Fatal(err)
		}
		keys := make([]string, c.rows)
		for i := range keys {
			keys[i] = "k" // no key: every record is a row, duplicates too
		}
		var r recorder
		if err := w.Write(context.Background(), &r, recs(keys...)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range r.stmts {
			n += len(s.args) / 2
			if len(s.args) > testDialect.MaxParams || strings.Contains(s.sql, "ON CONFLICT") {
				t.Fatalf("statement %q with %d arguments", s.sql, len(s.args))
			}
		}
		if len(r.stmts) != c.want || n != c.rows {
			t.Errorf("%d rows, %d per statement: %d statements of %d rows, want %d statements", c.rows, c.maxRows, len(r.stmts), n, c.want)
		}
	}
}

func TestKeyString(t *testing.T) {
	idx := []int{0, 1}
	a := keyString([]any{"a|", "b"}, idx, false)
	b := keyString([]any{"a", "|b"}, idx, false)
	c := keyString([]any{[]byte("a|"), "b"}, idx, false)
	d := keyString([]any{nil, "b"}, idx, false)
	e := keyString([]any{"", "b"}, idx, false)
	if a == b || a != c || d == e {
		t.Fatalf("%q %q %q %q %q", a, b, c, d, e)
	}
}

func TestRowErrors(t *testing.T) {
	tbl := mirror()
	tbl.Row = func(r rec) ([]any, error) {
		if r.Key == "bad" {
			return nil, errors.New("no")
		}
		if r.Key == "short" {
			return []any{r.Key}, nil
		}
		return []any{r.Key, 1}, nil
	}
	w, err := New(tbl, testDialect, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"bad", "short"} {
		var re *sluicedb.RowError
		err := w.Write(context.Background(), &recorder{}, recs("ok", k))
		if !errors.As(err, &re) || re.Index != 1 || re.Offset != 1 {
			t.Errorf("%s: %v", k, err)
		}
	}
	if err := w.Write(context.Background(), &recorder{}, recs("ok", "fine")); err != nil {
		t.Errorf("control: %v", err)
	}
}
