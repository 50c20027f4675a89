package sluicedb

import (
	"fmt"

	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/topology"
)

// Mirror turns t, a mapping of a table's values (with PrimaryKey and Key),
// into the mapping of topology.TableChanges' stream: a change upserts its
// row (t.Row of the new value), a delete removes the row whose key t.Key
// gives (called with the record's key and a zero value). So a Table[K,V]
// is mirrored into a database table by
//
//	rows, err := sluicedb.Mirror(t)
//	s, err := sluicepg.New(ctx, url, rows)
//	topology.ToParticipant(topology.TableChanges(tb), "mirror", s)
func Mirror[K, V any](t Table[K, V]) (Table[K, topology.Change[V]], error) {
	if len(t.PrimaryKey) == 0 || t.Key == nil || t.Row == nil || t.Insert || t.Deleted != nil {
		return Table[K, topology.Change[V]]{}, fmt.Errorf("%w: Mirror of table %q needs PrimaryKey, Row and Key, and no Insert nor Deleted", ErrTable, t.Name)
	}
	value := func(r sink.Record[K, topology.Change[V]]) sink.Record[K, V] {
		return sink.Record[K, V]{Key: r.Key, Value: r.Value.Value, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	}
	m := Table[K, topology.Change[V]]{
		Name: t.Name, Columns: t.Columns, PrimaryKey: t.PrimaryKey, Create: t.Create,
		Row:     func(r sink.Record[K, topology.Change[V]]) ([]any, error) { return t.Row(value(r)) },
		Deleted: func(r sink.Record[K, topology.Change[V]]) bool { return r.Value.Deleted },
		Key:     func(r sink.Record[K, topology.Change[V]]) ([]any, error) { return t.Key(value(r)) },
	}
	return m, m.Validate()
}
