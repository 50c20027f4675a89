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

// joinOracle models a stream-stream join record by record: the watermark
// is the minimum over the two inputs of max(ts)-1 (Monotonous), a record is
// late when ts+after+grace (left) or ts+before+grace (right) is at or
// below its own input's watermark before it (never below the task's: see
// Task.judgedWatermark), joins the stored records of the other side
// in range, and is removed — emitted unjoined on an outer side — once the
// watermark reaches ts+before+after+grace.
type joinOracle struct {
	before, after, grace int64
	leftOuter, right     bool // right: right side outer
	maxTs                [2]int64
	wm                   int64
	stored               [2][]joinRec
	out                  []string
	late                 int
}

type joinRec struct {
	key    string
	ts     int64
	v      string
	joined bool
}

func (o *joinOracle) add(side int, key string, ts int64, v string) {
	lateAfter := o.after + o.grace
	if side == 1 {
		lateAfter = o.before + o.grace
	}
	judged := o.wm
	if o.maxTs[side] > 0 {
		judged = max(judged, o.maxTs[side]-2)
	}
	if ts+lateAfter <= judged {
		o.late++
	} else {
		lo, hi := ts-o.before, ts+o.after // left's view: right ts in [ts-before, ts+after]
		if side == 1 {
			lo, hi = ts-o.after, ts+o.before
		}
		rec := joinRec{key: key, ts: ts, v: v}
		other := &o.stored[1-side]
		for i := range *other {
			y := &(*other)[i]
			if y.key == key && y.ts >= lo && y.ts <= hi {
				rec.joined, y.joined = true, true
				if side == 0 {
					o.out = append(o.out, key+":"+v+"+"+y.v)
				} else {
					o.out = append(o.out, key+":"+y.v+"+"+v)
				}
			}
		}
		o.stored[side] = append(o.stored[side], rec)
	}
	o.maxTs[side] = max(o.maxTs[side], ts+1)
	if o.maxTs[0] > 0 && o.maxTs[1] > 0 {
		o.wm = max(o.wm, min(o.maxTs[0], o.maxTs[1])-2)
	}
	for s := range 2 {
		var keep []joinRec
		for _, r := range o.stored[s] {
			if r.ts+o.before+o.after+o.grace > o.wm {
				keep = append(keep, r)
				continue
			}
			if !r.joined && (s == 0 && o.leftOuter || s == 1 && o.right) {
				if s == 0 {
					o.out = append(o.out, r.key+":"+r.v+"+-")
				} else {
					o.out = append(o.out, r.key+":-+"+r.v)
				}
			}
		}
		o.stored[s] = keep
	}
}

// joinOracleKeys are TestStreamStreamJoinsMatchOracle's five keys, of the
// shapes that broke layouts before: empty, one byte, a UUID, a key whose
// length takes two bytes of uvarint, and one of 127 bytes, one short of it.
var joinOracleKeys = []string{"", "k", testkeys.UUIDs(1)[0], testkeys.Len(130, 1), testkeys.Len(127, 2)}

// TestStreamStreamJoinsMatchOracle runs inner, left and outer joins,
// their stores in Pebble and in memory (ops.JoinMemory), over random
// records of both sides with keys of every shape, and checks the results
// against joinOracle's.
func TestStreamStreamJoinsMatchOracle(t *testing.T) {
	totalLate := 0
	defer func() {
		if totalLate == 0 {
			t.Error("no seed had a late record: lateness is not exercised")
		}
	}()
	for _, kind := range []string{"inner", "left", "outer", "inner-memory", "left-memory", "outer-memory"} {
		kind, inMemory := strings.CutSuffix(kind, "-memory")
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("%s/%v/%d", kind, inMemory, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				before, after, grace := int64(rng.IntN(30)), int64(rng.IntN(30)), int64(rng.IntN(20))
				tp := topology.New()
				l := topology.From(tp, "left", serde.String, serde.String)
				r := topology.From(tp, "right", serde.String, serde.String)
				w := topology.JoinWindowsBetween(time.Duration(before)*time.Millisecond, time.Duration(after)*time.Millisecond).
					WithGrace(time.Duration(grace) * time.Millisecond)
				j := topology.StreamJoined[string, string, string]{Name: "j", Key: serde.String, Left: serde.String, Right: serde.String}
				if inMemory {
					j.Stores = []topology.StoreOption{topology.InMemory()}
				}
				var out topology.Stream[string, string]
				switch kind {
				case "inner":
					out = topology.JoinStreams(l, r, w, func(_, a, b string) string { return a + "+" + b }, j)
				case "left":
					out = topology.LeftJoinStreams(l, r, w, func(_, a, b string, ok bool) string {
						if !ok {
							b = "-"
						}
						return a + "+" + b
					}, j)
				default:
					out = topology.OuterJoinStreams(l, r, w, func(_, a string, aok bool, b string, bok bool) string {
						if !aok {
							a = "-"
						}
						if !bok {
							b = "-"
						}
						return a + "+" + b
					}, j)
				}
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
				o := &joinOracle{before: before, after: after, grace: grace, leftOuter: kind != "inner", right: kind == "outer", wm: window.NoWatermark}
				now := int64(1000)
				for i := range 600 {
					now += int64(rng.IntN(6))
					side := rng.IntN(2)
					ts := max(0, now-int64(rng.IntN(40)))
					key := joinOracleKeys[rng.IntN(len(joinOracleKeys))]
					v := fmt.Sprintf("%c%d", "lr"[side], i)
					if err := in[side].Pipe(key, v, ts); err != nil {
						t.Fatal(err)
					}
					o.add(side, key, ts, v)
				}
				got := readKeys(t, d, "out")
				slices.Sort(got)
				slices.Sort(o.out)
				if !slices.Equal(got, o.out) {
					t.Errorf("%d results, want %d (window -%d/+%d, grace %d)\n got  %v\n want %v", len(got), len(o.out), before, after, grace, got, o.out)
				}
				totalLate += o.late
				if len(o.out) < 40 { // (per-input lateness drops more than the task watermark did)
					t.Fatalf("weak input: %d results", len(o.out))
				}
			})
		}
	}
}
