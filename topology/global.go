package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/serde"
)

// GlobalTable is a table replicated in full to every instance (Kafka
// Streams' GlobalKTable): all partitions of its topic, read to their end
// before the instance processes anything, then kept current as the topic
// grows. Joining with it needs no co-partitioning. Lookups see the table as
// it is when the record is processed, which is not part of the
// transaction: a replay may see a newer version of a row.
type GlobalTable[K, V any] struct {
	t    *Topology
	name string
	ks   serde.Serde[K]
	vs   serde.Serde[V]
}

// GlobalTableFrom reads topic as a global table named m's name; m's serdes
// read its keys and values. A null value deletes a row. The topic may also
// be read by a source or table of the topology.
func GlobalTableFrom[K, V any](t *Topology, topic string, m Materialization[K, V]) GlobalTable[K, V] {
	switch {
	case topic == "":
		t.errorf(ErrMissingName, "a global table needs a topic")
	case m.Name() == "":
		t.errorf(ErrMissingName, "a global table must be named")
	case m.ks == nil || m.vs == nil:
		t.errorf(ErrMissingSerde, "global table %q needs a key and a value serde", m.Name())
	default:
		if err := validTopicPart(m.Name()); err != nil {
			t.errorf(ErrInvalidTopicName, "global table %q: %v", m.Name(), err)
		}
		for _, g := range t.globals {
			if g.Name == m.Name() {
				t.errorf(ErrDuplicateName, "global table %q is defined twice", m.Name())
			}
		}
		if _, dup := t.stores[m.Name()]; dup {
			t.errorf(ErrDuplicateName, "global table %q has the name of a store", m.Name())
		}
		t.globals = append(t.globals, &exec.Global{Name: m.Name(), Topic: topic})
	}
	return GlobalTable[K, V]{t: t, name: m.Name(), ks: m.ks, vs: m.vs}
}

// JoinGlobal joins each stream record with the row of the global table
// whose key keyOf extracts from it (Kafka Streams'
// KStream.join(GlobalKTable)); records with no row are dropped.
func JoinGlobal[K, V, GK, GV, VR any](s Stream[K, V], g GlobalTable[GK, GV], keyOf func(K, V) GK, joiner func(K, V, GV) VR) Stream[K, VR] {
	if joiner == nil || keyOf == nil {
		s.t.errorf(ErrNilFunction, "JoinGlobal needs a key extractor and a joiner")
	}
	return globalJoin(s, g, "JOIN-GLOBAL", keyOf, func(k K, v V, gv GV, ok bool) (VR, bool) {
		if !ok {
			var zero VR
			return zero, false
		}
		return joiner(k, v, gv), true
	})
}

// LeftJoinGlobal is JoinGlobal keeping every record: joiner gets ok=false
// when the global table has no row for it.
func LeftJoinGlobal[K, V, GK, GV, VR any](s Stream[K, V], g GlobalTable[GK, GV], keyOf func(K, V) GK, joiner func(k K, v V, gv GV, ok bool) VR) Stream[K, VR] {
	if joiner == nil || keyOf == nil {
		s.t.errorf(ErrNilFunction, "LeftJoinGlobal needs a key extractor and a joiner")
	}
	return globalJoin(s, g, "LEFTJOIN-GLOBAL", keyOf, func(k K, v V, gv GV, ok bool) (VR, bool) {
		return joiner(k, v, gv, ok), true
	})
}

func globalJoin[K, V, GK, GV, VR any](s Stream[K, V], g GlobalTable[GK, GV], kind string, keyOf func(K, V) GK, join func(K, V, GV, bool) (VR, bool)) Stream[K, VR] {
	t := s.t
	if g.t != t {
		t.errorf(ErrForeignHandle, "join with a global table of another topology")
	}
	n := t.add(&exec.Node{Name: t.name("", kind), Kind: exec.KindProcessor, Globals: []string{g.name}, New: func() exec.Processor {
		return ops.NewGlobalJoin(ops.GlobalJoinConfig[K, V, GK, GV, VR]{Table: g.name, Key: g.ks, Value: g.vs, KeyOf: keyOf, Join: join})
	}}, s.n)
	// The key is unchanged: no repartition is needed downstream.
	return Stream[K, VR]{t: t, n: n, keyChanged: s.keyChanged, ks: s.ks}
}

// Name is the global table's name.
func (g GlobalTable[K, V]) Name() string { return g.name }
