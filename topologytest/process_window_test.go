package topologytest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// elementsTopology lists each firing's elements as "key:v1,v2,...".
func elementsTopology(w topology.Windows, wopts []topology.WindowOption, popts ...topology.ProcessWindowOption[int64]) *topology.Topology {
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.Int64)
	ws := topology.WindowedBy(topology.GroupByKey(in), w, wopts...)
	out := topology.ProcessWindows(ws, func(k string, _ window.Bounds, elems []topology.Element[int64]) []string {
		var vs []string
		for _, e := range elems {
			vs = append(vs, fmt.Sprint(e.Value))
		}
		return []string{k + ":" + strings.Join(vs, ",")}
	}, topology.Materialized("elems", serde.String, serde.Int64), popts...)
	topology.To(topology.Map(out, func(_ topology.Windowed[string], s string) (string, string) { return s, "" }), "out", serde.String, serde.String)
	return tp
}

func TestFullWindowFunctionsAndEvictors(t *testing.T) {
	tumbling := window.Tumbling(100 * time.Millisecond)
	cases := []struct {
		name  string
		tp    *topology.Topology
		input [][2]int64 // ts, value (key "a" unless value >= 100: key "b")
		want  []string   // after each record
	}{
		{"tumbling, all elements", elementsTopology(tumbling, nil),
			[][2]int64{{10, 1}, {20, 2}, {30, 3}, {150, 100}},
			[]string{"", "", "", "a:1,2,3"}},
		{"count evictor before", elementsTopology(tumbling, nil, topology.EvictBefore(topology.CountEvictor[int64](2))),
			[][2]int64{{10, 1}, {20, 2}, {30, 3}, {150, 100}},
			[]string{"", "", "", "a:2,3"}},
		{"time evictor before", elementsTopology(tumbling, nil, topology.EvictBefore(topology.TimeEvictor[int64](15*time.Millisecond))),
			[][2]int64{{10, 1}, {20, 2}, {30, 3}, {150, 100}},
			[]string{"", "", "", "a:2,3"}},
		{"evictor after, with early firings: the second firing lacks what the first evicted",
			elementsTopology(tumbling, []topology.WindowOption{topology.WithTrigger(window.EarlyEvery(2))}, topology.EvictAfter(topology.CountEvictor[int64](1))),
			[][2]int64{{10, 1}, {20, 2}, {30, 3}, {40, 4}},
			[]string{"", "a:1,2", "", "a:2,3,4"}},
		{"tumbling count windows", elementsTopology(window.TumblingCount(2), nil),
			[][2]int64{{10, 1}, {5, 2}, {30, 3}, {40, 4}, {50, 5}},
			[]string{"", "a:1,2", "", "a:3,4", ""}},
		{"sliding count windows", elementsTopology(window.SlidingCount(3, 2), nil),
			[][2]int64{{10, 1}, {20, 2}, {30, 3}, {40, 4}, {50, 5}, {60, 6}},
			[]string{"", "a:1,2", "", "a:2,3,4", "", "a:4,5,6"}},
		{"sessions merge their elements", elementsTopology(window.InactivityGap(30*time.Millisecond),
			[]topology.WindowOption{topology.EmitFinal(), topology.AllowedLateness(50 * time.Millisecond)}),
			[][2]int64{{10, 1}, {50, 2}, {30, 3}, {200, 100}},
			[]string{"", "", "", "a:1,2,3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := topologytest.New(c.tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64)
			out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
			for i, in := range c.input {
				key := "a"
				if in[1] >= 100 {
					key = "b"
				}
				if err := pipe.Pipe(key, in[1], in[0]); err != nil {
					t.Fatal(err)
				}
				rs, err := out.ReadRecords()
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, r := range rs {
					got = append(got, r.Key)
				}
				if strings.Join(got, " ") != c.want[i] {
					t.Errorf("record %d (ts %d): fired %q, want %q", i, in[0], got, c.want[i])
				}
			}
		})
	}
}

func TestCountWindowAggregations(t *testing.T) {
	for _, c := range []struct {
		name string
		w    window.Count
		want []string
	}{
		{"tumbling", window.TumblingCount(3), []string{"", "", "6", "", "", "15", ""}},
		{"sliding", window.SlidingCount(3, 2), []string{"", "3", "", "9", "", "15", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := topology.New()
			in := topology.From(tp, "in", serde.String, serde.Int64)
			sums := topology.ReduceWindows(topology.WindowedBy(topology.GroupByKey(in), c.w),
				func(a, b int64) int64 { return a + b }, topology.Materialized("sums", serde.String, serde.Int64))
			topology.To(topology.Map(topology.ToStream(sums), func(w topology.Windowed[string], n int64) (string, string) { return fmt.Sprint(n), "" }), "out", serde.String, serde.String)
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			pipe := topologytest.NewInputTopic(d, "in", serde.String, serde.Int64)
			out := topologytest.NewOutputTopic(d, "out", serde.String, serde.String)
			for i := range 7 {
				if err := pipe.Pipe("k", int64(i+1), int64(100-i)); err != nil { // out of order: count windows ignore time
					t.Fatal(err)
				}
				rs, _ := out.ReadRecords()
				got := ""
				for _, r := range rs {
					got += r.Key
				}
				if got != c.want[i] {
					t.Errorf("record %d: fired %q, want %q", i+1, got, c.want[i])
				}
			}
		})
	}
}
