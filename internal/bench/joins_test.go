package bench

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/txn"
)

// cloneRecs copies records (not their bytes) so that one can be changed.
func cloneRecs(in []*kgo.Record) []*kgo.Record {
	out := make([]*kgo.Record, len(in))
	for i, r := range in {
		c := *r
		out[i] = &c
	}
	return out
}

// TestStreamJoinPairs checks the oracle on a hand-made input: pairs within
// the window on both ends, one just outside, keys apart, and an input
// that could be late or is not co-partitioned refused.
func TestStreamJoinPairs(t *testing.T) {
	rec := func(topic string, p int32, off int64, key string, ts int64) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(key), Partition: p, Offset: off, Timestamp: time.UnixMilli(ts)}
	}
	w := joinWithin.Milliseconds()
	recs := []*kgo.Record{
		rec("in", 0, 0, "a", 100_000),
		rec("in2", 0, 0, "a", 100_000-w),   // 1: joins 0 (the window's start, inclusive)
		rec("in2", 0, 2, "a", 100_000+w),   // 2: joins 0 (its end)
		rec("in2", 0, 3, "a", 100_000+w+1), // 3: just outside
		rec("in2", 0, 1, "b", 100_000),     // 4: another key
		rec("in", 1, 0, "c", 5),
		rec("in2", 1, 4, "c", 5), // 6: joins 5, on its own partition
	}
	pairs, err := streamJoinPairs(recs, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[joinPair]int{{0, 1}: 1, {0, 2}: 1, {5, 6}: 1}
	if len(pairs) != len(want) {
		t.Fatalf("pairs %v, want %v", pairs, want)
	}
	for p, n := range want {
		if pairs[p] != n {
			t.Errorf("pairs %v, want %v", pairs, want)
		}
	}
	late := append(cloneRecs(recs), rec("in2", 0, 9, "a", 100_000+w+1-5001))
	if _, err := streamJoinPairs(late, 5*time.Second); err == nil {
		t.Error("a record more than the bound behind its partition was accepted")
	}
	apart := append(cloneRecs(recs), rec("in2", 1, 9, "a", 160_000))
	if _, err := streamJoinPairs(apart, 5*time.Second); err == nil {
		t.Error("a key on two partitions was accepted")
	}
}

// TestJoinScenarios runs stream-join and table-join small under both
// guarantees, and checks that each verification passes on the real output
// and fails on a wrong one (negative controls): an output record lost,
// repeated (under exactly_once), or with another value, and the same
// output against an input with one record changed.
func TestJoinScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs on an embedded broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	type check func(input, out []*kgo.Record, g txn.Guarantee) (string, error)
	checks := map[string]struct {
		check  check
		tamper func(t *testing.T, in []*kgo.Record) // changes one record
	}{
		"stream-join": {checkStreamJoin, func(t *testing.T, in []*kgo.Record) {
			// A left record that joins: under another key it joins nothing.
			pairs, err := streamJoinPairs(in, windowBound)
			if err != nil {
				t.Fatal(err)
			}
			for p := range pairs {
				in[p.l].Key = []byte("elsewhere")
				return
			}
		}},
		"table-join": {func(input, out []*kgo.Record, g txn.Guarantee) (string, error) {
			return checkTableJoin(input, tableRows(tableInput()), out, g)
		}, func(t *testing.T, in []*kgo.Record) {
			rows := tableRows(tableInput())
			for _, r := range in {
				if _, ok := rows[string(r.Key)]; ok {
					r.Key = []byte("00000009") // a key without a row
					return
				}
			}
		}},
	}
	cfg := Config{Records: 20_000, Partitions: 4, CommitInterval: 50 * time.Millisecond}
	for name, c := range checks {
		for _, g := range []txn.Guarantee{txn.ExactlyOnce, txn.AtLeastOnce} {
			t.Run(name+"/"+g.String(), func(t *testing.T) {
				sc, _ := scenarioNamed(name)
				verify := sc.verify
				sc.verify = func(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error) {
					note, err := verify(ctx, addrs, g, input)
					if err != nil {
						return note, err
					}
					out, err := readOut(ctx, addrs, "out")
					if err != nil {
						return "", err
					}
					if len(out) < 3 {
						t.Fatalf("%d outputs", len(out))
					}
					wrong := map[string][]*kgo.Record{
						"an output lost":  out[1:],
						"another value":   append(cloneRecs(out[1:]), func() *kgo.Record { c := *out[0]; c.Value = append([]byte("x"), c.Value[1:]...); return &c }()),
						"an output twice": append(cloneRecs(out), out[len(out)/2]),
					}
					for what, o := range wrong {
						if what == "an output twice" && g != txn.ExactlyOnce {
							continue // the guarantee allows it
						}
						if _, err := c.check(input, o, g); err == nil {
							t.Errorf("%s: verified", what)
						}
					}
					in := cloneRecs(input)
					c.tamper(t, in)
					if _, err := c.check(in, out, g); err == nil {
						t.Error("the output verified against an input with one record changed")
					}
					return note, nil
				}
				res, err := runOne(ctx, cfg, sc, g)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%.0f records/s; %s", res.PerSecond, res.Note)
			})
		}
	}
}

// TestJoinInputs: stream-join's input is windowed's (keys and times),
// half on each topic; table-join's table has its 100,000 keys.
func TestJoinInputs(t *testing.T) {
	a, _ := timedKeyed(1000, rand.New(rand.NewPCG(1, 2)))
	b, _ := joinInput(1000, rand.New(rand.NewPCG(1, 2)))
	topics := map[string]int{}
	for i := range a {
		if string(a[i].Key) != string(b[i].Key) || !a[i].Timestamp.Equal(b[i].Timestamp) || len(b[i].Value) != joinValueLen {
			t.Fatalf("record %d differs from windowed's", i)
		}
		topics[b[i].Topic]++
	}
	if topics["in"] != 500 || topics["in2"] != 500 {
		t.Errorf("topics %v", topics)
	}
	rows := tableRows(tableInput())
	if len(rows) != tableKeys-tableDeletes {
		t.Errorf("%d rows, want %d", len(rows), tableKeys-tableDeletes)
	}
}
