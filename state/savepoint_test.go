package state

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/filesnap"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestReadsASavepoint: a savepoint directory (manifest.json beside
// <app>/<task>/<store>) is read as a state directory, unchanged: every
// part is listed under the savepoint's application with the manifest's
// record counts, and reading changes no file (Verify still passes).
func TestReadsASavepoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sp")
	w, err := savepoint.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	kvs := rawKeys()
	st := savepoint.Store{Name: "raw", Layout: "key-value", Partitions: 2, Changelog: "app-raw-changelog"}
	for p := range int32(2) {
		pw, err := w.Part("app", savepoint.TaskID(1, p), "raw", p)
		if err != nil {
			t.Fatal(err)
		}
		var ws []store.Write
		i := 0
		for k, v := range kvs {
			if int32(i%2) == p {
				ws = append(ws, store.Write{Key: []byte(k), Value: v})
			}
			i++
		}
		if err := pw.Engine().Apply(ws, 9); err != nil {
			t.Fatal(err)
		}
		part, err := pw.Close()
		if err != nil {
			t.Fatal(err)
		}
		part.ChangelogEnd = 10
		st.Parts = append(st.Parts, part)
	}
	if err := w.Commit(&savepoint.Manifest{ID: "x", Application: "app", Created: time.Now(), Stores: []savepoint.Store{st}}); err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := r.Stores()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if len(infos) != 2 {
		t.Fatalf("stores: %+v", infos)
	}
	for i, info := range infos {
		if info.Application != "app" || info.Store != "raw" || info.SubTopology != 1 || info.Partition != int32(i) ||
			info.Records != st.Parts[i].Records || info.ChangelogOffset != 9 {
			t.Errorf("store %d: %+v, manifest part %+v", i, info, st.Parts[i])
		}
	}
	if diff := filesnap.Diff(before, files(t, dir)); diff != "" {
		t.Fatalf("reading the savepoint changed it: %s", diff)
	}
	sp, err := savepoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestLayouts: Layouts names each store's layout as the reader does with
// the topology (a count is key-value, a windowed count a window store,
// the time store of a sub-topology writing a repartition topic "time").
func TestLayouts(t *testing.T) {
	tp := topology.New()
	s := topology.From(tp, "in", serde.Bytes, serde.String)
	g := topology.GroupBy(s, func(k []byte, _ string) []byte { return k }, topology.Grouped("by-key", serde.Bytes, serde.String))
	topology.Count(g, topology.Materialized("totals", serde.Bytes, serde.Int64))
	g2 := topology.GroupBy(s, func(k []byte, _ string) []byte { return k }, topology.Grouped("by-key-2", serde.Bytes, serde.String))
	topology.CountWindows(topology.WindowedBy(g2, window.Tumbling(time.Second)), topology.Materialized("counts", serde.Bytes, serde.Int64))
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	got := Layouts(b)
	want := map[string]string{"totals": string(layout.KindKV), "counts": string(layout.KindWindow)}
	for name, l := range want {
		if got[name] != l {
			t.Errorf("Layouts[%s] = %q, want %q (all: %v)", name, got[name], l, got)
		}
	}
	for name, l := range got {
		if l == LayoutUnknown {
			t.Errorf("Layouts[%s] unknown", name)
		}
	}
}
