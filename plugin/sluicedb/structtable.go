package sluicedb

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/sluice-streams/sluice/sink"
)

// StructTable returns a Table named name whose columns are the fields of T
// tagged `db`, in field order, and whose Row is row followed by reading
// those fields. A tag is the column name, then options: "pk" (the field is
// part of the primary key, in field order) and, last because a type may
// hold commas, "type=..." (the SQL type, for Create):
//
//	type billRow struct {
//		ID     string `db:"bill_id,pk,type=varchar(64)"`
//		Amount int64  `db:"amount_cents,type=numeric(12,0)"`
//		Note   string // untagged: not a column
//	}
//	t, err := sluicedb.StructTable("bills", func(r sink.Record[string, Bill]) (billRow, error) { ... })
//
// The result is an ordinary Table: set Deleted and Key, Insert or Create
// on it as needed.
func StructTable[K, V, T any](name string, row func(sink.Record[K, V]) (T, error)) (Table[K, V], error) {
	rt := reflect.TypeFor[T]()
	if rt.Kind() != reflect.Struct {
		return Table[K, V]{}, fmt.Errorf("%w: StructTable %q: %v is not a struct", ErrTable, name, rt)
	}
	t := Table[K, V]{Name: name}
	var fields []int
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag, ok := f.Tag.Lookup("db")
		if !ok || tag == "-" {
			continue
		}
		if !f.IsExported() {
			return Table[K, V]{}, fmt.Errorf("%w: StructTable %q: field %s is tagged but not exported", ErrTable, name, f.Name)
		}
		col, opts, _ := strings.Cut(tag, ",")
		c := Column{Name: col}
		for opts != "" {
			if typ, ok := strings.CutPrefix(opts, "type="); ok {
				c.Type = typ
				break
			}
			var opt string
			opt, opts, _ = strings.Cut(opts, ",")
			switch opt {
			case "pk":
				t.PrimaryKey = append(t.PrimaryKey, col)
			default:
				return Table[K, V]{}, fmt.Errorf("%w: StructTable %q: field %s: unknown option %q", ErrTable, name, f.Name, opt)
			}
		}
		t.Columns = append(t.Columns, c)
		fields = append(fields, i)
	}
	t.Row = func(r sink.Record[K, V]) ([]any, error) {
		v, err := row(r)
		if err != nil {
			return nil, err
		}
		rv := reflect.ValueOf(&v).Elem()
		out := make([]any, len(fields))
		for j, i := range fields {
			out[j] = rv.Field(i).Interface()
		}
		return out, nil
	}
	if err := t.Validate(); err != nil {
		return Table[K, V]{}, err
	}
	return t, nil
}
