package sluicedb

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-streams/sluice/sink"
)

// ErrTable is wrapped by Table.Validate's errors.
var ErrTable = errors.New("sluicedb: bad table mapping")

// Column is a column a Table writes: its name and, for CREATE TABLE only,
// its SQL type.
type Column struct {
	Name string
	Type string // e.g. "bigint", "varchar(64)"; used only when Create is set
}

// Table maps records to the rows of one database table.
//
// Without PrimaryKey every record is inserted. With it, a record upserts its
// row (insert, or replace every column of the row with the same key), and
// Insert makes it a plain insert, where a second row with the key is a
// rejected row. To mirror a Table[K,V], set Deleted: a record it reports is
// a tombstone, and deletes the row whose key Key gives.
//
// Within one batch, records are applied as if one by one: for a key, the
// last record wins. Keys are compared as Go values (fmt's %v of each
// column), so on a MySQL column with a case-insensitive collation give one
// batch's keys in one case.
type Table[K, V any] struct {
	// Name is the table's name, schema-qualified if needed ("s.t").
	Name string
	// Columns are the columns Row fills, in its order.
	Columns []Column
	// PrimaryKey names the key columns, among Columns.
	PrimaryKey []string
	// Insert, with PrimaryKey, inserts rather than upserts.
	Insert bool
	// Row returns the values of Columns for a record. An error rejects the
	// record (a *RowError, as if the database had).
	Row func(sink.Record[K, V]) ([]any, error)
	// Deleted reports a tombstone. Nil: no record is one.
	Deleted func(sink.Record[K, V]) bool
	// Key returns the values of PrimaryKey for a tombstone (Row is not
	// called for one: its value is usually empty). Required with Deleted.
	Key func(sink.Record[K, V]) ([]any, error)
	// Create creates the table (CREATE TABLE IF NOT EXISTS, with Columns'
	// types and the primary key) when the sink opens.
	Create bool
}

// Validate reports a mapping the adapters cannot use.
func (t Table[K, V]) Validate() error {
	var errs []error
	if t.Name == "" {
		errs = append(errs, fmt.Errorf("%w: no name", ErrTable))
	}
	if len(t.Columns) == 0 {
		errs = append(errs, fmt.Errorf("%w: table %q has no columns", ErrTable, t.Name))
	}
	if t.Row == nil {
		errs = append(errs, fmt.Errorf("%w: table %q has no Row function", ErrTable, t.Name))
	}
	seen := map[string]bool{}
	for _, c := range t.Columns {
		if c.Name == "" || seen[c.Name] {
			errs = append(errs, fmt.Errorf("%w: table %q: column name %q empty or repeated", ErrTable, t.Name, c.Name))
		}
		seen[c.Name] = true
		if t.Create && c.Type == "" {
			errs = append(errs, fmt.Errorf("%w: table %q: Create needs the type of column %q", ErrTable, t.Name, c.Name))
		}
	}
	for _, k := range t.PrimaryKey {
		if !seen[k] {
			errs = append(errs, fmt.Errorf("%w: table %q: primary key column %q is not among Columns", ErrTable, t.Name, k))
		}
	}
	if t.Deleted != nil && (len(t.PrimaryKey) == 0 || t.Key == nil) {
		errs = append(errs, fmt.Errorf("%w: table %q: deleting tombstones needs a PrimaryKey and a Key function", ErrTable, t.Name))
	}
	if t.Insert && t.Deleted != nil {
		errs = append(errs, fmt.Errorf("%w: table %q: Insert and Deleted: a mirrored table upserts", ErrTable, t.Name))
	}
	if t.Insert && len(t.PrimaryKey) == 0 {
		errs = append(errs, fmt.Errorf("%w: table %q: Insert is for a table with a PrimaryKey (without one, every record is inserted)", ErrTable, t.Name))
	}
	return errors.Join(errs...)
}

// KeyIndexes returns the positions of PrimaryKey within Columns.
func (t Table[K, V]) KeyIndexes() []int {
	idx := make([]int, len(t.PrimaryKey))
	for i, k := range t.PrimaryKey {
		idx[i] = slices.IndexFunc(t.Columns, func(c Column) bool { return c.Name == k })
	}
	return idx
}
