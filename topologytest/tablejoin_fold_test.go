package topologytest_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// tierSums joins a table of customers' tiers with a table of their
// balances (kind: inner, left or outer; a missing tier is "none", a
// missing balance 0), and sums the balances per tier: the shape whose sums
// go wrong when the join retracts rows it never emitted.
// With uncachedRight the balances' store has no write cache, so their
// updates never fold while the tiers' do.
func tierSums(tp *topology.Topology, kind string, uncachedRight bool) (joined topology.Table[string, string], sums topology.Table[string, int64]) {
	tiers := topology.TableFrom(tp, "tiers", topology.Materialized("tiers", serde.String, serde.String))
	var opts []topology.StoreOption
	if uncachedRight {
		opts = append(opts, topology.WithoutCache())
	}
	balances := topology.TableFrom(tp, "balances", topology.Materialized("balances", serde.String, serde.Int64, opts...))
	row := func(tier string, tok bool, n int64, nok bool) string {
		if !tok {
			tier = "none"
		}
		if !nok {
			n = 0
		}
		return tier + " " + strconv.FormatInt(n, 10)
	}
	switch kind {
	case "inner":
		joined = topology.JoinTables(tiers, balances, func(_ string, tier string, n int64) string { return row(tier, true, n, true) })
	case "left":
		joined = topology.LeftJoinTables(tiers, balances, func(_ string, tier string, n int64, ok bool) string { return row(tier, true, n, ok) })
	default:
		joined = topology.OuterJoinTables(tiers, balances, func(_ string, tier string, tok bool, n int64, nok bool) string { return row(tier, tok, n, nok) })
	}
	grouped := topology.GroupTableBy(joined, func(_ string, v string) (string, int64) {
		tier, n, _ := strings.Cut(v, " ")
		x, _ := strconv.ParseInt(n, 10, 64)
		return tier, x
	}, topology.Grouped("by-tier", serde.String, serde.Int64))
	sums = topology.ReduceTable(grouped, func(a, b int64) int64 { return a + b }, func(a, b int64) int64 { return a - b },
		topology.Materialized("tier-sums", serde.String, serde.Int64))
	return joined, sums
}

// tierOracle is tierSums computed from the two tables as they stand.
func tierOracle(kind string, tiers map[string]string, balances map[string]int64) (map[string]string, map[string]int64) {
	joined := map[string]string{}
	for k := range tiers {
		joined[k] = ""
	}
	for k := range balances {
		joined[k] = ""
	}
	sums := map[string]int64{}
	for k := range joined {
		tier, tok := tiers[k]
		n, nok := balances[k]
		if kind == "inner" && (!tok || !nok) || kind == "left" && !tok {
			delete(joined, k)
			continue
		}
		if !tok {
			tier = "none"
		}
		joined[k] = tier + " " + strconv.FormatInt(n, 10)
		sums[tier] += n
	}
	return joined, sums
}

// TestTableJoinRetractsWhatItEmitted updates both sides of table-table
// joins at random, with deletes, over keys of every length, committing
// every few records with updates folded and not (and with only one side
// folding): after every commit the
// joined table and the per-tier sums downstream (read from their change
// streams) must equal the oracle's. With folding, the old side of a joined
// change must be the row the join last emitted, not one made of a side's
// value that moved on within the commit.
func TestTableJoinRetractsWhatItEmitted(t *testing.T) {
	keys := testkeys.All()
	for _, kind := range []string{"inner", "left", "outer"} {
		for _, c := range []struct {
			fold, uncachedRight bool
			every               int
		}{{false, false, 1}, {false, false, 7}, {true, false, 1}, {true, false, 2}, {true, false, 7}, {true, false, 40}, {true, true, 7}} {
			t.Run(fmt.Sprintf("%s/fold=%v/every=%d/uncached-right=%v", kind, c.fold, c.every, c.uncachedRight), func(t *testing.T) {
				tp := topology.New()
				joined, sums := tierSums(tp, kind, c.uncachedRight)
				topology.To(topology.ToStream(joined), "joined", serde.String, serde.String)
				topology.To(topology.ToStream(sums), "sums", serde.String, serde.Int64)
				opts := []topologytest.Option{topologytest.CommitEvery(c.every)}
				if c.fold {
					opts = append(opts, topologytest.FoldUpdates())
				}
				d, err := topologytest.New(tp, opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				tin := topologytest.NewInputTopic(d, "tiers", serde.String, serde.String)
				bin := topologytest.NewInputTopic(d, "balances", serde.String, serde.Int64)
				jout := topologytest.NewOutputTopic(d, "joined", serde.String, serde.String)
				sout := topologytest.NewOutputTopic(d, "sums", serde.String, serde.Int64)
				rng := rand.New(rand.NewPCG(uint64(c.every), 31))
				tiers, balances := map[string]string{}, map[string]int64{}
				jview, sview := map[string]string{}, map[string]int64{}
				check := func(i int) {
					t.Helper()
					if err := topologytest.UpdateMap(jout, jview); err != nil {
						t.Fatal(err)
					}
					if err := topologytest.UpdateMap(sout, sview); err != nil {
						t.Fatal(err)
					}
					wantJ, wantS := tierOracle(kind, tiers, balances)
					maps.DeleteFunc(sview, func(_ string, n int64) bool { return n == 0 })
					maps.DeleteFunc(wantS, func(_ string, n int64) bool { return n == 0 })
					if !maps.Equal(jview, wantJ) {
						t.Fatalf("after %d records: joined table of %d rows, want %d", i, len(jview), len(wantJ))
					}
					if !maps.Equal(sview, wantS) {
						t.Fatalf("after %d records: sums %v, want %v", i, sview, wantS)
					}
				}
				const records = 1200
				for i := range records {
					k := keys[rng.IntN(len(keys))]
					switch rng.IntN(5) {
					case 0, 1:
						tier := []string{"gold", "silver", "bronze"}[rng.IntN(3)]
						if err := tin.Pipe(k, tier, int64(i)); err != nil {
							t.Fatal(err)
						}
						tiers[k] = tier
					case 2, 3:
						n := int64(rng.IntN(20)) * 50
						if err := bin.Pipe(k, n, int64(i)); err != nil {
							t.Fatal(err)
						}
						balances[k] = n
					default:
						in, side := "tiers", 0
						if rng.IntN(2) == 0 {
							in, side = "balances", 1
						}
						var err error
						if side == 0 {
							err = tin.PipeBytes([]byte(k), nil, int64(i))
							delete(tiers, k)
						} else {
							err = bin.PipeBytes([]byte(k), nil, int64(i))
							delete(balances, k)
						}
						if err != nil {
							t.Fatalf("delete from %s: %v", in, err)
						}
					}
					if (i+1)%c.every == 0 {
						check(i + 1)
					}
				}
				if err := d.Commit(); err != nil {
					t.Fatal(err)
				}
				check(records)
			})
		}
	}
}

// TestTableJoinFoldedSwap is the case: within one commit a
// customer moves from gold to silver and its balance from 50 to 150.
func TestTableJoinFoldedSwap(t *testing.T) {
	tp := topology.New()
	_, sums := tierSums(tp, "inner", false)
	topology.To(topology.ToStream(sums), "sums", serde.String, serde.Int64)
	d, err := topologytest.New(tp, topologytest.FoldUpdates(), topologytest.CommitEvery(2))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tin := topologytest.NewInputTopic(d, "tiers", serde.String, serde.String)
	bin := topologytest.NewInputTopic(d, "balances", serde.String, serde.Int64)
	sout := topologytest.NewOutputTopic(d, "sums", serde.String, serde.Int64)
	uuid := testkeys.UUIDs(1)[0]
	for _, step := range []func() error{
		func() error { return tin.Pipe(uuid, "gold", 1) },
		func() error { return bin.Pipe(uuid, 50, 1) }, // commit: gold 50
		func() error { return tin.Pipe(uuid, "silver", 2) },
		func() error { return bin.Pipe(uuid, 150, 2) }, // commit
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := topologytest.ToMap(sout)
	if err != nil {
		t.Fatal(err)
	}
	if got["gold"] != 0 || got["silver"] != 150 {
		t.Fatalf("gold %d, silver %d; want 0 and 150", got["gold"], got["silver"])
	}
}
