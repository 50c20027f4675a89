package topologytest_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// The tests in this file run the joins, table aggregations and stores with
// keys of every encoded length 0..testkeys.MaxLen and UUID strings
// (testkeys.All): store keys built from a key's encoding (a length prefix,
// the key, a time) grow their buffers at lengths that "k1" never reaches.

// streamJoinKinds builds each kind of stream-stream join with a joiner
// that writes "-" for a missing side.
var streamJoinKinds = []struct {
	name             string
	leftOuter, outer bool
	build            func(l, r topology.Stream[string, string], w topology.JoinWindow, j topology.StreamJoined[string, string, string]) topology.Stream[string, string]
}{
	{"inner", false, false, func(l, r topology.Stream[string, string], w topology.JoinWindow, j topology.StreamJoined[string, string, string]) topology.Stream[string, string] {
		return topology.JoinStreams(l, r, w, func(_, a, b string) string { return a + "+" + b }, j)
	}},
	{"left", true, false, func(l, r topology.Stream[string, string], w topology.JoinWindow, j topology.StreamJoined[string, string, string]) topology.Stream[string, string] {
		return topology.LeftJoinStreams(l, r, w, func(_, a, b string, ok bool) string {
			if !ok {
				b = "-"
			}
			return a + "+" + b
		}, j)
	}},
	{"outer", true, true, func(l, r topology.Stream[string, string], w topology.JoinWindow, j topology.StreamJoined[string, string, string]) topology.Stream[string, string] {
		return topology.OuterJoinStreams(l, r, w, func(_, a string, aok bool, b string, bok bool) string {
			if !aok {
				a = "-"
			}
			if !bok {
				b = "-"
			}
			return a + "+" + b
		}, j)
	}},
}

// TestStreamJoinsEveryKeyLength runs each stream-stream join over records
// of every key length, on both sides, in and out of each other's windows,
// and checks the results against the join oracle (stream_join_test.go).
// Every key gets a left and a right record at one timestamp, so each key
// must join at least once.
func TestStreamJoinsEveryKeyLength(t *testing.T) {
	keys := testkeys.All()
	for _, kind := range streamJoinKinds {
		t.Run(kind.name, func(t *testing.T) {
			const before, after, grace = 10, 20, 5
			tp := topology.New()
			l := topology.From(tp, "left", serde.String, serde.String)
			r := topology.From(tp, "right", serde.String, serde.String)
			w := topology.JoinWindowsBetween(before*time.Millisecond, after*time.Millisecond).WithGrace(grace * time.Millisecond)
			j := topology.StreamJoined[string, string, string]{Name: "j", Key: serde.String, Left: serde.String, Right: serde.String}
			out := kind.build(l, r, w, j)
			topology.To(topology.Map(out, func(k, v string) (string, string) { return k + ":" + v, "" }), "out", serde.String, serde.String)
			d, err := topologytest.New(tp)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			in := []*topologytest.InputTopic[string, string]{
				topologytest.NewInputTopic(d, "left", serde.String, serde.String),
				topologytest.NewInputTopic(d, "right", serde.String, serde.String),
			}
			o := &joinOracle{before: before, after: after, grace: grace, leftOuter: kind.leftOuter, right: kind.outer, wm: window.NoWatermark}
			rng := rand.New(rand.NewPCG(21, 22))
			pipe := func(side int, key string, ts int64, v string) {
				t.Helper()
				if err := in[side].Pipe(key, v, ts); err != nil {
					t.Fatalf("key of %d bytes: %v", len(key), err)
				}
				o.add(side, key, ts, v)
			}
			now := int64(1000)
			for i, key := range keys {
				now += 2
				pipe(0, key, now, fmt.Sprintf("l%d", i))
				pipe(1, key, now, fmt.Sprintf("r%d", i))
				// A record of a random key, at a random distance: some
				// join, some do not.
				other := keys[rng.IntN(len(keys))]
				side := rng.IntN(2)
				pipe(side, other, max(0, now-int64(rng.IntN(40))), fmt.Sprintf("%c%dx", "lr"[side], i))
			}
			// Far past every window: the outer sides emit what never joined.
			pipe(0, "end", now+1000, "lend")
			pipe(1, "end", now+1000, "rend")
			got := readKeys(t, d, "out")
			slices.Sort(got)
			slices.Sort(o.out)
			if !slices.Equal(got, o.out) {
				t.Errorf("%d results, want %d; first difference at %d", len(got), len(o.out), firstDiff(got, o.out))
				joined := joinedKeys(got)
				missing := 0
				for _, k := range keys {
					if !joined[k] {
						if missing < 5 {
							t.Errorf("key of %d bytes joined nothing", len(k))
						}
						missing++
					}
				}
				if missing > 0 {
					t.Errorf("%d of %d keys joined nothing", missing, len(keys))
				}
			}
			if len(o.out) < len(keys) {
				t.Fatalf("weak input: %d results for %d keys", len(o.out), len(keys))
			}
		})
	}
}

// joinedKeys returns the keys of results "key:a+b" with both sides
// present (neither is "-"). The keys hold no ':' and the values no '+'.
func joinedKeys(results []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range results {
		i := strings.LastIndexByte(s, ':')
		a, b, _ := strings.Cut(s[i+1:], "+")
		if a != "-" && b != "-" {
			m[s[:i]] = true
		}
	}
	return m
}
