package sluicedb

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-streams/sluice/sink"
)

type billRow struct {
	ID      string `db:"bill_id,pk,type=varchar(64)"`
	Account string `db:"account,pk"`
	Amount  int64  `db:"amount_cents,type=numeric(12,0)"`
	Note    string
	Skip    int    `db:"-"`
	Blob    []byte `db:"blob"`
}

func TestStructTable(t *testing.T) {
	tbl, err := StructTable("bills", func(r sink.Record[string, int64]) (billRow, error) {
		if r.Value < 0 {
			return billRow{}, errors.New("negative")
		}
		return billRow{ID: r.Key, Account: "a", Amount: r.Value, Note: "n", Blob: []byte{0}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Column{{"bill_id", "varchar(64)"}, {"account", ""}, {"amount_cents", "numeric(12,0)"}, {"blob", ""}}
	if fmt.Sprint(tbl.Columns) != fmt.Sprint(want) || fmt.Sprint(tbl.PrimaryKey) != "[bill_id account]" {
		t.Fatalf("%v %v", tbl.Columns, tbl.PrimaryKey)
	}
	vals, err := tbl.Row(sink.Record[string, int64]{Key: "b1", Value: 7})
	if err != nil || fmt.Sprint(vals) != "[b1 a 7 [0]]" {
		t.Fatalf("Row = %v, %v", vals, err)
	}
	if _, err := tbl.Row(sink.Record[string, int64]{Value: -1}); err == nil {
		t.Fatal("row's error lost")
	}
	type unexported struct {
		x int `db:"x"`
	}
	type badOpt struct {
		X int `db:"x,unique"`
	}
	type none struct{ X int }
	for name, err := range map[string]error{
		"not a struct": func() error {
			_, err := StructTable("t", func(sink.Record[string, int]) (int, error) { return 0, nil })
			return err
		}(),
		"unexported": func() error {
			_, err := StructTable("t", func(sink.Record[string, int]) (unexported, error) { return unexported{}, nil })
			return err
		}(),
		"option": func() error {
			_, err := StructTable("t", func(sink.Record[string, int]) (badOpt, error) { return badOpt{}, nil })
			return err
		}(),
		"no columns": func() error {
			_, err := StructTable("t", func(sink.Record[string, int]) (none, error) { return none{}, nil })
			return err
		}(),
	} {
		if !errors.Is(err, ErrTable) {
			t.Errorf("%s: %v, want ErrTable", name, err)
		}
	}
}
