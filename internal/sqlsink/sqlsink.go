package sqlsink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/sink"
)

// Class is what an error from the database calls for.
type Class int

const (
	// Other: neither of the below (a missing table, a permission): stop.
	Other Class = iota
	// Data: the database rejected a value of the batch; a record of it is
	// to blame, and Locate finds which.
	Data
	// Conn: the connection failed or was lost; retry after reconnecting.
	Conn
)

// Dialect is what differs between databases.
type Dialect struct {
	// Name prefixes errors: "sluicepg".
	Name string
	// Quote quotes one identifier.
	Quote func(string) string
	// Placeholder is the n-th (1-based) parameter of a statement.
	Placeholder func(n int) string
	// OnConflict starts the clause after an INSERT's VALUES that updates
	// the row whose key (the quoted columns pk) exists: " ON CONFLICT (pk)
	// DO UPDATE SET " or " ON DUPLICATE KEY UPDATE ".
	OnConflict func(pk string) string
	// Excluded names the value the INSERT proposed for the quoted column
	// col: "EXCLUDED.col" or "VALUES(col)".
	Excluded func(col string) string
	// MaxParams bounds the parameters of one statement.
	MaxParams int
	// PointDeletes deletes one key per statement (WHERE k = ?), never by
	// a list (WHERE k IN (...)). MySQL's optimizer reads a small table
	// whole for a list, and InnoDB waits for every row such a read meets
	// that another transaction locked: another task's prepared batch,
	// which keeps its locks until the Kafka transaction that waits for
	// this batch commits. A point delete reads its own key only.
	PointDeletes bool
	// Classify tells what err calls for, with the database's error code
	// and message.
	Classify func(err error) (c Class, code, message string)
}

// Execer runs one statement.
type Execer interface {
	Exec(ctx context.Context, query string, args ...any) error
}

// Writer writes batches of records into one table.
type Writer[K, V any] struct {
	t       sluicedb.Table[K, V]
	d       Dialect
	keyIdx  []int
	maxRows int
	table   string // quoted
	cols    string // quoted, comma-separated
	keys    []string
	colName []string
	upsert  string
}

// New returns a writer of t's rows, at most maxRows rows per statement.
func New[K, V any](t sluicedb.Table[K, V], d Dialect, maxRows int) (*Writer[K, V], error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if maxRows <= 0 {
		maxRows = 1000
	}
	w := &Writer[K, V]{t: t, d: d, keyIdx: t.KeyIndexes(), maxRows: maxRows, table: QuoteName(d, t.Name), keys: t.PrimaryKey}
	for _, c := range t.Columns {
		w.colName = append(w.colName, c.Name)
	}
	w.cols = quoteList(d, w.colName)
	if len(t.PrimaryKey) > 0 && !t.Insert {
		w.upsert = upsertClause(d, w.colName, t.PrimaryKey)
	}
	return w, nil
}

// QuoteName quotes a possibly schema-qualified name.
func QuoteName(d Dialect, name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = d.Quote(p)
	}
	return strings.Join(parts, ".")
}

// upsertClause replaces every non-key column (a table of key columns only
// sets a key column to itself, a no-op both databases accept).
func upsertClause(d Dialect, cols, pk []string) string {
	var set []string
	for _, c := range cols {
		if !slices.Contains(pk, c) {
			set = append(set, d.Quote(c)+" = "+d.Excluded(d.Quote(c)))
		}
	}
	if len(set) == 0 {
		set = append(set, d.Quote(pk[0])+" = "+d.Excluded(d.Quote(pk[0])))
	}
	return d.OnConflict(quoteList(d, pk)) + strings.Join(set, ", ")
}

func quoteList(d Dialect, names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = d.Quote(n)
	}
	return strings.Join(q, ", ")
}

// CreateSQL is the CREATE TABLE IF NOT EXISTS statement of the table.
func (w *Writer[K, V]) CreateSQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (", w.table)
	for i, c := range w.t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", w.d.Quote(c.Name), c.Type)
	}
	if len(w.keys) > 0 {
		fmt.Fprintf(&b, ", PRIMARY KEY (%s)", quoteList(w.d, w.keys))
	}
	b.WriteString(")")
	return b.String()
}

// op is one record's effect: a row to write, or a key to delete.
type op struct {
	idx  int // in the batch
	vals []any
	del  bool
}

// plan turns records into ops: deletes, then rows, a key's last record
// winning. A record Row or Key rejects is a *sluicedb.RowError.
func (w *Writer[K, V]) plan(recs []sink.Record[K, V]) (dels, rows []op, err error) {
	collapse := len(w.keys) > 0 && !w.t.Insert
	var last map[string]int // key -> position in all
	all := make([]op, 0, len(recs))
	if collapse {
		last = make(map[string]int, len(recs))
	}
	for i, r := range recs {
		o := op{idx: i}
		if w.t.Deleted != nil && w.t.Deleted(r) {
			o.del = true
			o.vals, err = w.t.Key(r)
			if err == nil && len(o.vals) != len(w.keys) {
				err = fmt.Errorf("Key returned %d values for %d key columns", len(o.vals), len(w.keys))
			}
		} else {
			o.vals, err = w.row(r)
		}
		if err != nil {
			return nil, nil, w.rowError(i, r, "", err.Error(), err)
		}
		if !collapse {
			all = append(all, o)
			continue
		}
		k := keyString(o.vals, w.keyIdx, o.del)
		if j, ok := last[k]; ok {
			all[j].idx = -1 // superseded by this record
		}
		last[k] = len(all)
		all = append(all, o)
	}
	for _, o := range all {
		switch {
		case o.idx < 0:
		case o.del:
			dels = append(dels, o)
		default:
			rows = append(rows, o)
		}
	}
	return dels, rows, nil
}

func (w *Writer[K, V]) row(r sink.Record[K, V]) ([]any, error) {
	vals, err := w.t.Row(r)
	if err == nil && len(vals) != len(w.t.Columns) {
		err = fmt.Errorf("Row returned %d values for %d columns", len(vals), len(w.t.Columns))
	}
	return vals, err
}

func pick(row []any, idx []int) []any {
	out := make([]any, len(idx))
	for i, j := range idx {
		out[i] = row[j]
	}
	return out
}

// keyString identifies a key: its values as %v, length-prefixed, so that
// ("a|", "b") and ("a", "|b") differ.
func keyString(vals []any, keyIdx []int, del bool) string {
	key := vals
	if !del {
		key = pick(vals, keyIdx)
	}
	var b strings.Builder
	for _, v := range key {
		var s string
		switch v := v.(type) {
		case []byte:
			s = string(v)
		case nil:
			s = "\x00nil"
		default:
			s = fmt.Sprintf("%v", v)
		}
		fmt.Fprintf(&b, "%d:%s", len(s), s)
	}
	return b.String()
}

func (w *Writer[K, V]) rowError(i int, r sink.Record[K, V], code, msg string, err error) *sluicedb.RowError {
	return &sluicedb.RowError{Table: w.t.Name, Index: i, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Code: code, Message: msg, Err: err}
}

// stmt is one statement and its arguments.
type stmt struct {
	sql  string
	args []any
}

// perStmt is how many ops of width parameters one statement takes.
func (w *Writer[K, V]) perStmt(width int) int {
	n := w.maxRows
	if w.d.MaxParams > 0 && n*width > w.d.MaxParams {
		n = w.d.MaxParams / width
	}
	return max(n, 1)
}

// perDelete is how many deletes one statement takes.
func (w *Writer[K, V]) perDelete() int {
	if w.d.PointDeletes {
		return 1
	}
	return w.perStmt(len(w.keys))
}

func (w *Writer[K, V]) deleteStmt(ops []op) stmt {
	var b strings.Builder
	args := make([]any, 0, len(ops)*len(w.keys))
	fmt.Fprintf(&b, "DELETE FROM %s WHERE ", w.table)
	if len(ops) == 1 && w.d.PointDeletes {
		for i, k := range w.keys {
			if i > 0 {
				b.WriteString(" AND ")
			}
			fmt.Fprintf(&b, "%s = %s", w.d.Quote(k), w.d.Placeholder(i+1))
		}
		return stmt{b.String(), ops[0].vals}
	}
	if len(w.keys) == 1 {
		fmt.Fprintf(&b, "%s IN (", w.d.Quote(w.keys[0]))
	} else {
		fmt.Fprintf(&b, "(%s) IN (", quoteList(w.d, w.keys))
	}
	for i, o := range ops {
		if i > 0 {
			b.WriteString(", ")
		}
		w.tuple(&b, len(args), len(o.vals), len(w.keys) > 1)
		args = append(args, o.vals...)
	}
	b.WriteString(")")
	return stmt{b.String(), args}
}

func (w *Writer[K, V]) insertStmt(ops []op) stmt {
	var b strings.Builder
	args := make([]any, 0, len(ops)*len(w.colName))
	fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", w.table, w.cols)
	for i, o := range ops {
		if i > 0 {
			b.WriteString(", ")
		}
		w.tuple(&b, len(args), len(o.vals), true)
		args = append(args, o.vals...)
	}
	b.WriteString(w.upsert)
	return stmt{b.String(), args}
}

// tuple writes (p1, p2, ...) for n parameters numbered after base.
func (w *Writer[K, V]) tuple(b *strings.Builder, base, n int, paren bool) {
	if paren {
		b.WriteByte('(')
	}
	for j := range n {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(w.d.Placeholder(base + j + 1))
	}
	if paren {
		b.WriteByte(')')
	}
}

// chunks splits ops into statements.
func (w *Writer[K, V]) chunks(ops []op, n int, build func([]op) stmt) []stmt {
	var out []stmt
	for len(ops) > 0 {
		k := min(n, len(ops))
		out = append(out, build(ops[:k]))
		ops = ops[k:]
	}
	return out
}

// DataError is Write's error when the database rejected the batch for its
// data: the transaction is to be rolled back and Locate run in a new one.
type DataError struct{ Err error }

func (e *DataError) Error() string { return e.Err.Error() }
func (e *DataError) Unwrap() error { return e.Err }

// Write writes recs through ex, inside the caller's transaction. A batch
// the database rejects for its data is a *DataError (the transaction is
// then unusable on PostgreSQL); a record Row rejects, a
// *sluicedb.RowError; a lost connection wraps sluicedb.ErrConnection.
func (w *Writer[K, V]) Write(ctx context.Context, ex Execer, recs []sink.Record[K, V]) error {
	dels, rows, err := w.plan(recs)
	if err != nil {
		return err
	}
	for _, s := range w.statements(dels, rows) {
		if err := ex.Exec(ctx, s.sql, s.args...); err != nil {
			return w.Classify(err)
		}
	}
	return nil
}

func (w *Writer[K, V]) statements(dels, rows []op) []stmt {
	s := w.chunks(dels, w.perDelete(), w.deleteStmt)
	return append(s, w.chunks(rows, w.perStmt(len(w.colName)), w.insertStmt)...)
}

// Classify wraps a database error by its class: *DataError, ErrConnection,
// or as it is.
func (w *Writer[K, V]) Classify(err error) error {
	switch c, _, _ := w.d.Classify(err); c {
	case Data:
		return &DataError{Err: fmt.Errorf("%s: write %s: %w", w.d.Name, w.t.Name, err)}
	case Conn:
		return fmt.Errorf("%s: write %s: %w: %w", w.d.Name, w.t.Name, sluicedb.ErrConnection, err)
	default:
		return fmt.Errorf("%s: write %s: %w", w.d.Name, w.t.Name, err)
	}
}

// Locate replays recs through ex, in a new ordinary transaction the caller
// rolls back afterwards, and returns the *sluicedb.RowError of the first
// record the database rejects, found by bisection under savepoints (a few
// statements per halving, not a row per round trip). It returns cause when
// no single record is rejected on its own.
func (w *Writer[K, V]) Locate(ctx context.Context, ex Execer, recs []sink.Record[K, V], cause error) error {
	dels, rows, err := w.plan(recs)
	if err != nil {
		return err
	}
	if bad, berr, err := w.find(ctx, ex, dels, w.perDelete(), w.deleteStmt); err != nil || bad != nil {
		return w.located(recs, bad, berr, err)
	}
	if bad, berr, err := w.find(ctx, ex, rows, w.perStmt(len(w.colName)), w.insertStmt); err != nil || bad != nil {
		return w.located(recs, bad, berr, err)
	}
	return cause
}

func (w *Writer[K, V]) located(recs []sink.Record[K, V], bad *op, berr, err error) error {
	if err != nil {
		return err
	}
	_, code, msg := w.d.Classify(berr)
	return w.rowError(bad.idx, recs[bad.idx], code, msg, berr)
}

// find applies ops chunk by chunk, each under a savepoint; a chunk the
// database rejects for its data is halved until one op remains: that op
// and its error. err is a failure that is not about data.
func (w *Writer[K, V]) find(ctx context.Context, ex Execer, ops []op, n int, build func([]op) stmt) (*op, error, error) {
	for len(ops) > 0 {
		k := min(n, len(ops))
		bad, berr, err := w.bisect(ctx, ex, ops[:k], build)
		if err != nil || bad != nil {
			return bad, berr, err
		}
		ops = ops[k:]
	}
	return nil, nil, nil
}

func (w *Writer[K, V]) bisect(ctx context.Context, ex Execer, ops []op, build func([]op) stmt) (*op, error, error) {
	if len(ops) == 0 {
		return nil, nil, nil
	}
	berr, err := w.try(ctx, ex, build(ops))
	if err != nil || berr == nil {
		return nil, nil, err
	}
	if len(ops) == 1 {
		return &ops[0], berr, nil
	}
	h := len(ops) / 2
	if bad, berr, err := w.bisect(ctx, ex, ops[:h], build); err != nil || bad != nil {
		return bad, berr, err
	}
	return w.bisect(ctx, ex, ops[h:], build)
}

// try runs s under a savepoint: berr is a data rejection (rolled back to
// the savepoint), err anything else.
func (w *Writer[K, V]) try(ctx context.Context, ex Execer, s stmt) (berr, err error) {
	if err := ex.Exec(ctx, "SAVEPOINT sluice_locate"); err != nil {
		return nil, w.Classify(err)
	}
	if xerr := ex.Exec(ctx, s.sql, s.args...); xerr != nil {
		if c, _, _ := w.d.Classify(xerr); c != Data {
			return nil, w.Classify(xerr)
		}
		if err := ex.Exec(ctx, "ROLLBACK TO SAVEPOINT sluice_locate"); err != nil {
			return nil, w.Classify(err)
		}
		return xerr, nil
	}
	if err := ex.Exec(ctx, "RELEASE SAVEPOINT sluice_locate"); err != nil {
		return nil, w.Classify(err)
	}
	return nil, nil
}

// IsData reports a *DataError.
func IsData(err error) bool {
	var d *DataError
	return errors.As(err, &d)
}
