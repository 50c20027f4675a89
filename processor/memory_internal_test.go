package processor

import (
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestBoundPollsCap: a poll takes at most one commit interval's worth of
// records at the last poll's rate (and a quarter of the transaction
// timeout's, if that is shorter), and at most what the stages' free share
// of the memory budget holds at its bytes per record.
func TestBoundPollsCap(t *testing.T) {
	m := &member{a: &App{cfg: defaultConfig()}}
	m.a.cfg.commitInterval = 100 * time.Millisecond
	m.a.cfg.txnTimeout = 10 * time.Second
	m.a.cfg.rebalanceTimeout = 15 * time.Second

	// 10,000 records took 1s: one commit interval holds 1,000. The old
	// bound, a quarter of the transaction timeout, allowed 25,000: on a
	// backlog every poll was then a transaction of its own, and each
	// stage held 2.5s of writes.
	m.boundPolls(10000, time.Second, 0, 0)
	if m.pollMax != 1000 {
		t.Errorf("pollMax %d after 10,000 records in 1s with commit.interval 100ms, want 1,000", m.pollMax)
	}
	// A commit interval longer than a quarter of the transaction timeout:
	// the timeout bounds it.
	m.a.cfg.commitInterval = time.Minute
	m.boundPolls(10000, time.Second, 0, 0)
	if m.pollMax != 25000 {
		t.Errorf("pollMax %d with commit.interval 1m and transaction timeout 10s, want 25,000", m.pollMax)
	}
	// Slow records: never below one.
	m.boundPolls(1, time.Hour, 0, 0)
	if m.pollMax != 1 {
		t.Errorf("pollMax %d after one record in an hour, want 1", m.pollMax)
	}

	// By memory: a share of 1 MiB, 1,000 records grew the stages by
	// 100 KiB (~102 bytes a record).
	m.a.cfg.commitInterval = time.Minute
	m.a.mem.stage = 1 << 20
	m.boundPolls(1000, time.Millisecond, 100<<10, 100<<10)
	if want := 9240; m.pollMax < want-1 || m.pollMax > want+1 { // (1 MiB - 100 KiB) / 102.4 B
		t.Errorf("pollMax %d with 924 KiB of the share free at 102.4 bytes a record, want %d", m.pollMax, want)
	}
	// The stages are full: the early commit that follows frees at least
	// half the share.
	m.boundPolls(1000, time.Millisecond, 100<<10, 1<<20)
	if want := 5120; m.pollMax != want {
		t.Errorf("pollMax %d with a full stage, want %d (half the share)", m.pollMax, want)
	}
	// Nearly full: an eighth of the share, not a handful of records.
	m.boundPolls(1000, time.Millisecond, 100<<10, 1<<20-1)
	if want := 1280; m.pollMax != want {
		t.Errorf("pollMax %d with a nearly full stage, want %d (an eighth of the share)", m.pollMax, want)
	}
}

// TestPlanMemory: the split of the budget between the shared block cache,
// the memtables and the stages, for a topology of two stores over 8
// partitions.
func TestPlanMemory(t *testing.T) {
	top := topology.New()
	g := topology.GroupByKey(topology.From(top, "in", serde.String, serde.String))
	topology.Count(g, topology.Materialized("a", serde.String, serde.Int64))
	topology.Count(g, topology.Materialized("b", serde.String, serde.Int64))
	topology.Count(g, topology.Materialized("m", serde.String, serde.Int64, topology.InMemory()))
	a := &App{cfg: defaultConfig()}
	a.cfg.memoryBudget = 256 << 20
	b, err := top.Build()
	if err != nil {
		t.Fatal(err)
	}
	a.plan = exec.BuiltPlan(b)
	a.partitions = map[int]int32{0: 8}
	a.planMemory()
	defer a.releaseMemory()
	if a.mem.stores != 16 {
		t.Fatalf("%d stores counted, want 16", a.mem.stores)
	}
	if got := a.mem.cache.MaxSize(); got != 128<<20 {
		t.Errorf("block cache %d, want half the budget", got)
	}
	if got := a.mem.pebble.MemTableSize; got != 2<<20 { // 64 MiB / (2 × 16)
		t.Errorf("memtable %d, want 2 MiB", got)
	}
	if got := a.mem.stage; got != 64<<20 {
		t.Errorf("stage share %d, want a quarter of the budget", got)
	}
	if got := a.mem.readCache; got != 2<<20 { // 32 MiB / 16
		t.Errorf("read cache %d, want 2 MiB", got)
	}
	if a.mem.pebble.Cache != a.mem.cache {
		t.Error("the stores are not given the shared cache")
	}
}
