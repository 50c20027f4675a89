package sqlsink

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/sink"
)

// DefaultOffsetsTable is the table of offsets mode's coordinates.
const DefaultOffsetsTable = "sluice_sink_offsets"

// Tx is an open ordinary transaction.
type Tx interface {
	Execer
	// Pairs runs a query whose rows are (int32, int64).
	Pairs(ctx context.Context, query string, args ...any) (map[int32]int64, error)
}

// Offsets reads and writes the coordinates table:
// (sink, topic, kafka_partition) → next_offset.
type Offsets struct {
	d     Dialect
	table string // quoted
}

// NewOffsets returns the coordinates table named name.
func NewOffsets(d Dialect, name string) Offsets {
	return Offsets{d: d, table: QuoteName(d, name)}
}

// CreateSQL creates the table if missing. Names are varchar(255) so that
// MySQL can index them.
func (o Offsets) CreateSQL() string {
	q := o.d.Quote
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s varchar(255) NOT NULL, %s varchar(255) NOT NULL, %s integer NOT NULL, %s bigint NOT NULL, PRIMARY KEY (%s, %s, %s))",
		o.table, q("sink"), q("topic"), q("kafka_partition"), q("next_offset"), q("sink"), q("topic"), q("kafka_partition"))
}

// ReadSQL and its arguments read the offsets of sink and topic.
func (o Offsets) ReadSQL(sinkName, topic string) (string, []any) {
	q := o.d.Quote
	return fmt.Sprintf("SELECT %s, %s FROM %s WHERE %s = %s AND %s = %s", q("kafka_partition"), q("next_offset"), o.table,
		q("sink"), o.d.Placeholder(1), q("topic"), o.d.Placeholder(2)), []any{sinkName, topic}
}

// Write stores recs through w and next in tx, skipping each record below
// its partition's stored next offset, and never moving a stored offset
// back: a replay, or a second writer racing this one, writes nothing
// twice. The partitions' rows are created first and locked (FOR UPDATE),
// so that two writers of one partition take turns. The caller commits tx;
// a *DataError means it is to be rolled back, and Locate run on the
// records kept (their indexes in recs are returned).
func Write[K, V any](ctx context.Context, tx Tx, w *Writer[K, V], o Offsets, sinkName, topic string, recs []sink.Record[K, V], next map[int32]int64) (kept []sink.Record[K, V], idx []int, err error) {
	parts := slices.Sorted(maps.Keys(next)) // sorted: two writers lock in one order
	for _, r := range recs {
		if _, ok := next[r.Partition]; !ok {
			return nil, nil, fmt.Errorf("%s: record %s/%d@%d has no next offset for its partition", w.d.Name, r.Topic, r.Partition, r.Offset)
		}
	}
	if len(parts) == 0 {
		return nil, nil, nil
	}
	q := o.d.Quote
	cols := fmt.Sprintf("%s, %s, %s, %s", q("sink"), q("topic"), q("kafka_partition"), q("next_offset"))
	pk := fmt.Sprintf("%s, %s, %s", q("sink"), q("topic"), q("kafka_partition"))
	upsert := func(vals func(p int32) int64, set string) (string, []any) {
		var b strings.Builder
		var args []any
		fmt.Fprintf(&b, "INSERT INTO %s (%s) VALUES ", o.table, cols)
		for i, p := range parts {
			if i > 0 {
				b.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&b, "(%s, %s, %s, %s)", o.d.Placeholder(n+1), o.d.Placeholder(n+2), o.d.Placeholder(n+3), o.d.Placeholder(n+4))
			args = append(args, sinkName, topic, p, vals(p))
		}
		b.WriteString(o.d.OnConflict(pk) + set)
		return b.String(), args
	}
	sql, args := upsert(func(int32) int64 { return 0 }, q("next_offset")+" = "+o.table+"."+q("next_offset"))
	if err := tx.Exec(ctx, sql, args...); err != nil {
		return nil, nil, w.Classify(err)
	}
	sql, args = o.ReadSQL(sinkName, topic)
	var in []string
	for _, p := range parts {
		args = append(args, p)
		in = append(in, o.d.Placeholder(len(args)))
	}
	sql += fmt.Sprintf(" AND %s IN (%s) FOR UPDATE", q("kafka_partition"), strings.Join(in, ", "))
	stored, err := tx.Pairs(ctx, sql, args...)
	if err != nil {
		return nil, nil, w.Classify(err)
	}
	for i, r := range recs {
		if r.Offset >= stored[r.Partition] {
			kept = append(kept, r)
			idx = append(idx, i)
		}
	}
	if err := w.Write(ctx, tx, kept); err != nil {
		return kept, idx, err
	}
	sql, args = upsert(func(p int32) int64 { return next[p] },
		q("next_offset")+" = GREATEST("+o.table+"."+q("next_offset")+", "+o.d.Excluded(q("next_offset"))+")")
	if err := tx.Exec(ctx, sql, args...); err != nil {
		return kept, idx, w.Classify(err)
	}
	return kept, idx, nil
}

// Reindex turns the index of a *sluicedb.RowError from kept's into recs'.
func Reindex(err error, idx []int) error {
	if re, ok := err.(*sluicedb.RowError); ok && re.Index >= 0 && re.Index < len(idx) {
		re.Index = idx[re.Index]
	}
	return err
}
