package topology_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

func countsTopology(vs serde.Serde[int64]) *topology.Topology {
	tp := topology.New()
	s := topology.From(tp, "in", serde.Bytes, serde.String)
	topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.Bytes, vs))
	return tp
}

// TestMigrationMistakes: Build reports a migration without a function,
// of an unknown store, registered twice or without serdes, all at once.
func TestMigrationMistakes(t *testing.T) {
	tp := countsTopology(serde.Int64)
	topology.MigrateStore(tp, "counts", nil)
	topology.MigrateStore(tp, "nowhere", func(k, v []byte) ([]byte, []byte, error) { return k, v, nil })
	topology.MigrateStore(tp, "", func(k, v []byte) ([]byte, []byte, error) { return k, v, nil })
	topology.MigrateKeyValues[[]byte, int64, []byte, int64](tp, "counts", nil, serde.Int64, serde.Bytes, serde.Int64, nil)
	_, err := tp.Build()
	for _, want := range []error{topology.ErrNilFunction, topology.ErrUnknownStore, topology.ErrMissingName, topology.ErrMissingSerde} {
		if !errors.Is(err, want) {
			t.Errorf("Build: %v, want it to wrap %v", err, want)
		}
	}
	tp = countsTopology(serde.Int64)
	fn := func(k, v []byte) ([]byte, []byte, error) { return k, v, nil }
	topology.MigrateStore(tp, "counts", fn)
	topology.MigrateStore(tp, "counts", fn)
	if _, err := tp.Build(); !errors.Is(err, topology.ErrDuplicateName) || !strings.Contains(err.Error(), "migrated twice") {
		t.Errorf("Build: %v, want the second migration refused", err)
	}
}

// TestMigrateKeyValuesRewritesDropsAndFails: the typed migration decodes
// with the old serdes and encodes with the new ones, for keys of every
// length; DropEntry drops (a nil key); another error is returned; bytes
// the old serde cannot decode are an error naming the serde.
func TestMigrateKeyValuesRewritesDropsAndFails(t *testing.T) {
	tp := countsTopology(serde.Int64Text)
	topology.MigrateKeyValues(tp, "counts", serde.Bytes, serde.Int64, serde.Bytes, serde.Int64Text, func(k []byte, v int64) ([]byte, int64, error) {
		switch {
		case len(k) == 7:
			return nil, 0, topology.DropEntry
		case len(k) == 9:
			return nil, 0, errors.New("nine")
		}
		return k, v + 1, nil
	})
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	mig := b.Plan().Migrations["counts"]
	if mig == nil || !mig.KeyValue {
		t.Fatalf("plan's migration %+v, want a key-value one", mig)
	}
	for _, k := range testkeys.Bytes() {
		old, _ := serde.Int64.Encode(int64(len(k)))
		nk, nv, err := mig.Fn(k, old)
		switch len(k) {
		case 7:
			if err != nil || nk != nil {
				t.Errorf("key of 7 bytes: %x %q %v, want dropped", nk, nv, err)
			}
		case 9:
			if err == nil || !strings.Contains(err.Error(), "nine") {
				t.Errorf("key of 9 bytes: %v, want the function's error", err)
			}
		default:
			want, _ := serde.Int64Text.Encode(int64(len(k)) + 1)
			if err != nil || nk == nil || !bytes.Equal(nk, k) || !bytes.Equal(nv, want) {
				t.Errorf("key %x: %x %q %v, want the key and %q", k, nk, nv, err, want)
			}
		}
	}
	if _, _, err := mig.Fn([]byte("k"), []byte("not eight bytes")); err == nil || !strings.Contains(err.Error(), serde.ID(serde.Int64)) {
		t.Errorf("undecodable value: %v, want an error naming the old serde", err)
	}
}

// TestStoresCarrySerdeIdentitiesAndLayouts: every store the DSL declares
// says its layout, and the stores with user serdes their identities, so
// that a savepoint can tell what changed.
func TestStoresCarrySerdeIdentitiesAndLayouts(t *testing.T) {
	tp := topology.New()
	s := topology.From(tp, "in", serde.String, serde.String)
	topology.Count(topology.GroupByKey(s), topology.Materialized("kv", serde.String, serde.Int64))
	topology.CountWindows(topology.WindowedBy(topology.GroupByKey(s), window.Tumbling(time.Minute)), topology.Materialized("win", serde.String, serde.Int64))
	topology.CountWindows(topology.WindowedBy(topology.GroupByKey(s), window.Sliding(time.Minute)), topology.Materialized("slide", serde.String, serde.Int64))
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]layout.StoreKind{"kv": layout.KindKV, "win": layout.KindWindow, "slide": layout.KindSliding}
	for name, kind := range want {
		st := b.Plan().Stores[name]
		if st.Layout != kind || st.KeySerde != serde.ID(serde.String) || !strings.HasPrefix(st.ValueSerde, serde.ID(serde.Int64)) {
			t.Errorf("store %s: layout %q key %q value %q, want %q with the string and int64 serdes", name, st.Layout, st.KeySerde, st.ValueSerde, kind)
		}
	}
	if v := b.Plan().Stores["slide"].ValueSerde; !strings.Contains(v, "records:"+serde.ID(serde.String)) {
		t.Errorf("sliding store's value identity %q does not name the kept records' serde", v)
	}
}
