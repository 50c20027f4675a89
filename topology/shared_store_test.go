package topology_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestMaterializationSharedAcrossTopologies: a Materialization kept in a
// variable (as processor.Query invites) and handed to two topologies is
// two stores, one per topology: what one topology makes of it (a window
// store, a table source's changelog) does not leak into the other, and
// building both at once is not a data race (run with -race).
func TestMaterializationSharedAcrossTopologies(t *testing.T) {
	m := topology.Materialized("counts", serde.String, serde.Int64)

	windowed := topology.New()
	topology.CountWindows(topology.WindowedBy(topology.GroupByKey(topology.From(windowed, "in", serde.String, serde.String)),
		window.Tumbling(time.Minute)), m)
	sourced := topology.New()
	topology.TableFrom(sourced, "counts-topic", m)
	plain := topology.New()
	topology.Count(topology.GroupByKey(topology.From(plain, "in", serde.String, serde.String)), m)

	store := func(top *topology.Topology) *exec.Store {
		b, err := top.Build()
		if err != nil {
			t.Fatal(err)
		}
		return exec.BuiltPlan(b).Stores["counts"]
	}
	if s := store(windowed); !s.Windowed || s.Source != "" {
		t.Errorf("the window store: windowed %v, source %q; want windowed, no source", s.Windowed, s.Source)
	}
	if s := store(sourced); s.Windowed || s.Source != "counts-topic" {
		t.Errorf("the table source's store: windowed %v, source %q; want not windowed, source counts-topic", s.Windowed, s.Source)
	}
	if s := store(plain); s.Windowed || s.Source != "" || s.Retention != 0 {
		t.Errorf("the count's store: windowed %v, source %q, retention %v; want a plain key-value store", s.Windowed, s.Source, s.Retention)
	}

	// Built concurrently, as two instances in one process build theirs.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			top := topology.New()
			topology.CountWindows(topology.WindowedBy(topology.GroupByKey(topology.From(top, "in", serde.String, serde.String)),
				window.Tumbling(time.Minute)), m)
			if _, err := top.Build(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
