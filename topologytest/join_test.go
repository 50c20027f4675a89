package topologytest_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// TestStreamTableJoinsMatchOracle interleaves table updates (with deletes)
// and stream records at random, and checks every joined record against a
// brute-force model of the table as it stands when the record arrives.
func TestStreamTableJoinsMatchOracle(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(fmt.Sprintf("left=%v", left), func(t *testing.T) {
			tp := topology.New()
			clicks := topology.From(tp, "clicks", serde.String, serde.String)
			users := topology.TableFrom(tp, "users", topology.Materialized("users", serde.String, serde.String))
			var joined topology.Stream[string, string]
			if left {
				joined = topology.LeftJoinTable(clicks, users, func(k, click, region string, ok bool) string {
					if !ok {
						region = "?"
					}
					return click + "@" + region
				})
			} else {
				joined = topology.JoinTable(clicks, users, func(k, click, region string) string { return click + "@" + region })
			}
			topology.To(joined, "out", serde.String, serde.String)
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			cin := topologytest.NewInputTopic(d, "clicks", serde.String, serde.String)
			uin := topologytest.NewInputTopic(d, "users", serde.String, serde.String)
			out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
			rng := rand.New(rand.NewPCG(5, 6))
			table := map[string]string{}
			var want, got []string
			for i := range 2000 {
				user := fmt.Sprintf("u%d", rng.IntN(20))
				switch rng.IntN(3) {
				case 0:
					region := fmt.Sprintf("r%d", rng.IntN(5))
					if err := uin.Pipe(user, region, int64(i)); err != nil {
						t.Fatal(err)
					}
					table[user] = region
				case 1:
					if err := uin.PipeBytes([]byte(user), nil, int64(i)); err != nil {
						t.Fatal(err)
					}
					delete(table, user)
				default:
					click := fmt.Sprintf("c%d", i)
					if err := cin.Pipe(user, click, int64(i)); err != nil {
						t.Fatal(err)
					}
					if region, ok := table[user]; ok {
						want = append(want, user+"="+click+"@"+region)
					} else if left {
						want = append(want, user+"="+click+"@?")
					}
				}
			}
			rs, err := out.ReadRecords()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				got = append(got, r.Key+"="+r.Value)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("joined %d records, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
			if len(want) < 300 {
				t.Fatalf("only %d joined records: the input does not exercise the join", len(want))
			}
		})
	}
}

// TestTableTableJoinsMatchOracle updates and deletes rows of two tables at
// random and checks, after every update, that the joined table (read from
// its change stream, tombstones deleting) equals the join of the two tables
// as they stand.
func TestTableTableJoinsMatchOracle(t *testing.T) {
	type joinKind struct {
		name  string
		build func(l, r topology.Table[string, string]) topology.Table[string, string]
		want  func(l, r map[string]string) map[string]string
	}
	kinds := []joinKind{
		{"inner", func(l, r topology.Table[string, string]) topology.Table[string, string] {
			return topology.JoinTables(l, r, func(_, a, b string) string { return a + "+" + b })
		}, func(l, r map[string]string) map[string]string {
			m := map[string]string{}
			for k, a := range l {
				if b, ok := r[k]; ok {
					m[k] = a + "+" + b
				}
			}
			return m
		}},
		{"left", func(l, r topology.Table[string, string]) topology.Table[string, string] {
			return topology.LeftJoinTables(l, r, func(_, a, b string, ok bool) string {
				if !ok {
					b = "-"
				}
				return a + "+" + b
			})
		}, func(l, r map[string]string) map[string]string {
			m := map[string]string{}
			for k, a := range l {
				b, ok := r[k]
				if !ok {
					b = "-"
				}
				m[k] = a + "+" + b
			}
			return m
		}},
		{"outer", func(l, r topology.Table[string, string]) topology.Table[string, string] {
			return topology.OuterJoinTables(l, r, func(_, a string, aok bool, b string, bok bool) string {
				if !aok {
					a = "-"
				}
				if !bok {
					b = "-"
				}
				return a + "+" + b
			})
		}, func(l, r map[string]string) map[string]string {
			m := map[string]string{}
			for k := range l {
				m[k] = ""
			}
			for k := range r {
				m[k] = ""
			}
			for k := range m {
				a, aok := l[k]
				b, bok := r[k]
				if !aok {
					a = "-"
				}
				if !bok {
					b = "-"
				}
				m[k] = a + "+" + b
			}
			return m
		}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			tp := topology.New()
			l := topology.TableFrom(tp, "left", topology.Materialized("left", serde.String, serde.String))
			r := topology.TableFrom(tp, "right", topology.Materialized("right", serde.String, serde.String))
			topology.To(topology.ToStream(kind.build(l, r)), "out", serde.String, serde.String)
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			in := map[string]*topologytest.InputTopic[string, string]{
				"left":  topologytest.NewInputTopic(d, "left", serde.String, serde.String),
				"right": topologytest.NewInputTopic(d, "right", serde.String, serde.String),
			}
			out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
			rng := rand.New(rand.NewPCG(7, 8))
			tables := map[string]map[string]string{"left": {}, "right": {}}
			view := map[string]string{}
			deletes := 0
			for i := range 1500 {
				side := []string{"left", "right"}[rng.IntN(2)]
				k := fmt.Sprintf("k%d", rng.IntN(15))
				if rng.IntN(4) == 0 {
					if err := in[side].PipeBytes([]byte(k), nil, int64(i)); err != nil {
						t.Fatal(err)
					}
					if _, ok := tables[side][k]; ok {
						deletes++
					}
					delete(tables[side], k)
				} else {
					v := fmt.Sprintf("%s%d", side[:1], i)
					if err := in[side].Pipe(k, v, int64(i)); err != nil {
						t.Fatal(err)
					}
					tables[side][k] = v
				}
				if err := topologytest.UpdateMap(out, view); err != nil {
					t.Fatal(err)
				}
				if want := kind.want(tables["left"], tables["right"]); !maps.Equal(view, want) {
					t.Fatalf("after update %d (%s %s): joined table %v, want %v", i, side, k, view, want)
				}
			}
			if deletes < 100 {
				t.Fatalf("only %d deletes", deletes)
			}
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestStreamGlobalJoinMatchesOracle joins clicks (keyed by click id) with a
// global table of users through a user id inside the click: no
// co-partitioning, no repartition.
func TestStreamGlobalJoinMatchesOracle(t *testing.T) {
	tp := topology.New()
	clicks := topology.From(tp, "clicks", serde.String, serde.String) // value: user id
	users := topology.GlobalTableFrom(tp, "users", topology.Materialized("users", serde.String, serde.String))
	joined := topology.LeftJoinGlobal(clicks, users, func(_, user string) string { return user },
		func(click, user, region string, ok bool) string {
			if !ok {
				region = "?"
			}
			return user + "@" + region
		})
	topology.To(joined, "out", serde.String, serde.String)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	cin := topologytest.NewInputTopic(d, "clicks", serde.String, serde.String)
	uin := topologytest.NewInputTopic(d, "users", serde.String, serde.String)
	out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
	rng := rand.New(rand.NewPCG(9, 10))
	table := map[string]string{}
	var want []string
	for i := range 1500 {
		user := fmt.Sprintf("u%d", rng.IntN(20))
		switch rng.IntN(3) {
		case 0:
			region := fmt.Sprintf("r%d", rng.IntN(4))
			if err := uin.Pipe(user, region, int64(i)); err != nil {
				t.Fatal(err)
			}
			table[user] = region
		case 1:
			if err := uin.PipeBytes([]byte(user), nil, int64(i)); err != nil {
				t.Fatal(err)
			}
			delete(table, user)
		default:
			click := fmt.Sprintf("c%d", i)
			if err := cin.Pipe(click, user, int64(i)); err != nil {
				t.Fatal(err)
			}
			region, ok := table[user]
			if !ok {
				region = "?"
			}
			want = append(want, click+"="+user+"@"+region)
		}
	}
	rs, err := out.ReadRecords()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Key+"="+r.Value)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("joined %d records, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
}

// TestForeignKeyJoinsMatchOracle joins orders (keyed by order, holding a
// customer id) with customers through that id, while orders move between
// customers, customers change, and both get deleted; after every update the
// joined table must equal the join of the two tables as they stand.
func TestForeignKeyJoinsMatchOracle(t *testing.T) {
	for _, left := range []bool{false, true} {
		t.Run(fmt.Sprintf("left=%v", left), func(t *testing.T) {
			tp := topology.New()
			orders := topology.TableFrom(tp, "orders", topology.Materialized("orders", serde.String, serde.String)) // value: customer id
			customers := topology.TableFrom(tp, "customers", topology.Materialized("customers", serde.String, serde.String))
			fk := func(customer string) string { return customer }
			j := topology.ForeignKeyJoined[string]{Name: "order-customer", Result: serde.String}
			var joined topology.Table[string, string]
			if left {
				joined = topology.LeftJoinTablesByForeignKey(orders, customers, fk, func(c, name string, ok bool) string {
					if !ok {
						name = "?"
					}
					return c + "=" + name
				}, j)
			} else {
				joined = topology.JoinTablesByForeignKey(orders, customers, fk, func(c, name string) string { return c + "=" + name }, j)
			}
			topology.To(topology.ToStream(joined), "out", serde.String, serde.String)
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			oin := topologytest.NewInputTopic(d, "orders", serde.String, serde.String)
			cin := topologytest.NewInputTopic(d, "customers", serde.String, serde.String)
			out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
			rng := rand.New(rand.NewPCG(12, 13))
			ordersT, customersT, view := map[string]string{}, map[string]string{}, map[string]string{}
			moves := 0
			for i := range 2000 {
				switch rng.IntN(6) {
				case 0, 1, 2:
					o, c := fmt.Sprintf("o%d", rng.IntN(25)), fmt.Sprintf("c%d", rng.IntN(6))
					if old, ok := ordersT[o]; ok && old != c {
						moves++
					}
					if err := oin.Pipe(o, c, int64(i)); err != nil {
						t.Fatal(err)
					}
					ordersT[o] = c
				case 3:
					o := fmt.Sprintf("o%d", rng.IntN(25))
					if err := oin.PipeBytes([]byte(o), nil, int64(i)); err != nil {
						t.Fatal(err)
					}
					delete(ordersT, o)
				case 4:
					c := fmt.Sprintf("c%d", rng.IntN(6))
					name := fmt.Sprintf("n%d", i)
					if err := cin.Pipe(c, name, int64(i)); err != nil {
						t.Fatal(err)
					}
					customersT[c] = name
				default:
					c := fmt.Sprintf("c%d", rng.IntN(6))
					if err := cin.PipeBytes([]byte(c), nil, int64(i)); err != nil {
						t.Fatal(err)
					}
					delete(customersT, c)
				}
				if err := topologytest.UpdateMap(out, view); err != nil {
					t.Fatal(err)
				}
				want := map[string]string{}
				for o, c := range ordersT {
					if name, ok := customersT[c]; ok {
						want[o] = c + "=" + name
					} else if left {
						want[o] = c + "=?"
					}
				}
				if !maps.Equal(view, want) {
					t.Fatalf("after update %d: joined %v, want %v", i, view, want)
				}
			}
			if moves < 100 {
				t.Fatalf("only %d foreign-key changes", moves)
			}
		})
	}
}
