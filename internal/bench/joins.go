package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
	"github.com/sluice-streams/sluice/window"
)

// The join scenarios: stream-join, an inner stream–stream join of two
// co-partitioned topics in a 1-minute window, and table-join, a stream
// enriched from a table of 100,000 keys.

// joinWithin is stream-join's window: a left record at ts joins the right
// records of its key at [ts-joinWithin, ts+joinWithin], both ends inclusive.
const joinWithin = time.Minute

// joinValueLen is the length of stream-join's input values: an 8-byte id
// ("L0000012": the 12th record of the whole input, on the left) and
// padding, like the other scenarios' ~100-byte values.
const joinValueLen = 100

// joinInput is windowed's records (the same keys and event times), each
// with a value naming it, sent alternately to the left topic "in" and the
// right topic "in2". Both topics get the default key partitioner, so they
// are co-partitioned; event times run 1 ms a record over the two topics
// together, each at most windowBound behind one before it on any
// partition, so that no record is late (see streamJoinPairs).
func joinInput(n int, r *rand.Rand) ([]*kgo.Record, int64) {
	recs, processed := timedKeyed(n, r)
	for i, rec := range recs {
		side := byte('L')
		if i%2 == 1 {
			rec.Topic, side = "in2", 'R'
		}
		rec.Value = joinValue(side, i)
	}
	return recs, processed
}

func joinValue(side byte, i int) []byte {
	v := make([]byte, joinValueLen)
	v[0] = side
	copy(v[1:8], fmt.Sprintf("%07d", i%10_000_000))
	for j := 8; j < len(v); j++ {
		v[j] = 'a' + byte(j%26)
	}
	return v
}

func streamJoinTopology() *topology.Topology { return streamJoinTopologyOf() }

// streamJoinMemoryTopology is stream-join's topology with the window's
// records in memory (topology.InMemory: ops.JoinMemory).
func streamJoinMemoryTopology() *topology.Topology { return streamJoinTopologyOf(topology.InMemory()) }

func streamJoinTopologyOf(stores ...topology.StoreOption) *topology.Topology {
	t := topology.New()
	wm := topology.Watermarks(window.BoundedOutOfOrderness(windowBound))
	l := topology.From(t, "in", serde.String, serde.Bytes, wm)
	r := topology.From(t, "in2", serde.String, serde.Bytes, wm)
	j := topology.JoinStreams(l, r, topology.JoinWindows(joinWithin), joinValues,
		topology.StreamJoined[string, []byte, []byte]{Name: "bench-join", Key: serde.String, Left: serde.Bytes, Right: serde.Bytes, Stores: stores})
	topology.To(j, "out", serde.String, serde.Bytes)
	return t
}

// joinValues is stream-join's joiner: both values, '|' between them.
func joinValues(_ string, l, r []byte) []byte {
	out := make([]byte, 0, len(l)+1+len(r))
	return append(append(append(out, l...), '|'), r...)
}

// joinPair is a left and a right input record, by their index in the
// preloaded input.
type joinPair struct{ l, r int32 }

// streamJoinPairs computes, from the preloaded input, every pair the inner
// join must emit once it has processed all of it: the left and right
// records of a key whose timestamps are at most joinWithin apart.
//
// That holds only if no record was late and none was removed before a
// record it joins arrived, which the input must make so, whatever order
// the task reads its two partitions in. It checks, partition by partition
// in offset order, that no record is more than bound behind one before it.
// Then: a partition's watermark is at most its max timestamp - bound - 1,
// and a task's is the minimum over its inputs, so when a record at ts
// arrives the watermark is below ts+1: it is not late (that takes
// ts+joinWithin <= watermark). A record at ts is removed once the
// watermark reaches ts+2*joinWithin; the other side's partition has by
// then shown a timestamp past ts+2*joinWithin+bound, so every record it
// gives afterwards is after ts+joinWithin, out of reach. It also checks
// that a key is on one partition number in both topics (co-partitioned),
// else the task could not join its records.
func streamJoinPairs(recs []*kgo.Record, bound time.Duration) (map[joinPair]int, error) {
	type part struct {
		topic string
		p     int32
	}
	byPart := map[part][]int32{}
	keyPart := map[string]int32{}
	type side struct{ l, r []int32 }
	byKey := map[string]*side{}
	for i, r := range recs {
		if r.Offset < 0 {
			return nil, fmt.Errorf("input record without an offset: %v", r)
		}
		pt := part{r.Topic, r.Partition}
		byPart[pt] = append(byPart[pt], int32(i))
		k := string(r.Key)
		if p, ok := keyPart[k]; ok && p != r.Partition {
			return nil, fmt.Errorf("key %q is on partition %d and %d: the topics are not co-partitioned", k, p, r.Partition)
		}
		keyPart[k] = r.Partition
		s := byKey[k]
		if s == nil {
			s = &side{}
			byKey[k] = s
		}
		switch r.Topic {
		case "in":
			s.l = append(s.l, int32(i))
		case "in2":
			s.r = append(s.r, int32(i))
		default:
			return nil, fmt.Errorf("input record on topic %q", r.Topic)
		}
	}
	bd := bound.Milliseconds()
	for pt, is := range byPart {
		slices.SortFunc(is, func(a, b int32) int { return cmp.Compare(recs[a].Offset, recs[b].Offset) })
		maxTS := int64(-1 << 62)
		for _, i := range is {
			ts := recs[i].Timestamp.UnixMilli()
			if ts < maxTS-bd {
				return nil, fmt.Errorf("%s/%d@%d at %d is more than %v behind %d: it could be late", pt.topic, pt.p, recs[i].Offset, ts, bound, maxTS)
			}
			maxTS = max(maxTS, ts)
		}
	}
	within := joinWithin.Milliseconds()
	pairs := map[joinPair]int{}
	for _, s := range byKey {
		for _, l := range s.l {
			lt := recs[l].Timestamp.UnixMilli()
			for _, r := range s.r {
				if d := lt - recs[r].Timestamp.UnixMilli(); -within <= d && d <= within {
					pairs[joinPair{l, r}]++
				}
			}
		}
	}
	return pairs, nil
}

// verifyStreamJoin reads the output back (read_committed) and checks it
// against streamJoinPairs.
func verifyStreamJoin(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error) {
	out, err := readOut(ctx, addrs, "out")
	if err != nil {
		return "", err
	}
	return checkStreamJoin(input, out, g)
}

// checkStreamJoin checks that out holds every pair of streamJoinPairs
// exactly once (under at_least_once, at least once), with the pair's key,
// both values joined, and the later of the two timestamps, and nothing
// else.
func checkStreamJoin(input, out []*kgo.Record, g txn.Guarantee) (string, error) {
	want, err := streamJoinPairs(input, windowBound)
	if err != nil {
		return "", err
	}
	if len(want) == 0 {
		return "", fmt.Errorf("no pair joins over %d records: the scenario would measure no join", len(input))
	}
	byID := map[string]int32{}
	for i, r := range input {
		if len(r.Value) >= 8 {
			byID[string(r.Value[:8])] = int32(i)
		}
	}
	got := make(map[joinPair]int, len(want))
	for _, o := range out {
		at := fmt.Sprintf("out@%d/%d", o.Partition, o.Offset)
		if len(o.Value) != 2*joinValueLen+1 || o.Value[joinValueLen] != '|' {
			return "", fmt.Errorf("%s: value of %d bytes is not two joined values", at, len(o.Value))
		}
		l, lok := byID[string(o.Value[:8])]
		r, rok := byID[string(o.Value[joinValueLen+1:joinValueLen+9])]
		if !lok || !rok {
			return "", fmt.Errorf("%s: value %.8q|%.8q names no input", at, o.Value, o.Value[joinValueLen+1:])
		}
		lr, rr := input[l], input[r]
		switch {
		case !bytes.Equal(o.Value[:joinValueLen], lr.Value) || !bytes.Equal(o.Value[joinValueLen+1:], rr.Value):
			return "", fmt.Errorf("%s: the joined values differ from the inputs'", at)
		case !bytes.Equal(o.Key, lr.Key) || !bytes.Equal(o.Key, rr.Key):
			return "", fmt.Errorf("%s: key %q joins %q and %q", at, o.Key, lr.Key, rr.Key)
		case !o.Timestamp.Equal(maxTime(lr.Timestamp, rr.Timestamp)):
			return "", fmt.Errorf("%s: stamped %v, want the later of %v and %v", at, o.Timestamp, lr.Timestamp, rr.Timestamp)
		}
		got[joinPair{l, r}]++
	}
	repeats := 0
	var missing, extra []string
	for p, n := range want {
		m := got[p]
		switch {
		case m < n:
			missing = append(missing, fmt.Sprintf("%.8s|%.8s", input[p.l].Value, input[p.r].Value))
		case m > n && g == txn.ExactlyOnce:
			extra = append(extra, fmt.Sprintf("%.8s|%.8s ×%d", input[p.l].Value, input[p.r].Value, m))
		}
		repeats += max(m-n, 0)
		delete(got, p)
	}
	for p, m := range got {
		extra = append(extra, fmt.Sprintf("%.8s|%.8s ×%d", input[p.l].Value, input[p.r].Value, m))
	}
	if len(missing)+len(extra) > 0 {
		return "", fmt.Errorf("output differs from the %d joined pairs: %d missing %v, %d too many %v",
			len(want), len(missing), first(missing), len(extra), first(extra))
	}
	return verified(len(want), "joined pairs", repeats), nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// The table-join scenario's table, on topic "table": one row for each of
// 100,000 keys, written before the timed run. 90,000 of them are keys the
// stream has (keyed's, but not those ending in 9); 10,000 the stream never
// has. Then the first 10,000 rows are updated and the next 1,000 deleted,
// so that a join with a stale or deleted row shows in the output.
const (
	tableKeys    = 100_000
	tableUpdates = 10_000
	tableDeletes = 1_000
	tableApp     = "bench-table-join"
)

// tableInput makes the table's records, in the order they are produced.
func tableInput() []*kgo.Record {
	var keys []string
	for i := 0; len(keys) < tableKeys; i++ {
		if i < 100_000 && i%10 == 9 {
			continue
		}
		keys = append(keys, fmt.Sprintf("%08d", i))
	}
	recs := make([]*kgo.Record, 0, len(keys)+tableUpdates+tableDeletes)
	row := func(k string, version int) *kgo.Record {
		v := fmt.Appendf(nil, "tier-%d/name-%s/v%d", len(k)%3, k, version)
		return &kgo.Record{Topic: "table", Key: []byte(k), Value: v}
	}
	for _, k := range keys {
		recs = append(recs, row(k, 1))
	}
	for _, k := range keys[:tableUpdates] {
		recs = append(recs, row(k, 2))
	}
	for _, k := range keys[tableUpdates : tableUpdates+tableDeletes] {
		recs = append(recs, &kgo.Record{Topic: "table", Key: []byte(k)})
	}
	return recs
}

// tableRows is the table's final state.
func tableRows(recs []*kgo.Record) map[string][]byte {
	rows := map[string][]byte{}
	for _, r := range recs {
		if r.Value == nil {
			delete(rows, string(r.Key))
		} else {
			rows[string(r.Key)] = r.Value
		}
	}
	return rows
}

func tableJoinTopology() *topology.Topology {
	t := topology.New()
	tb := topology.TableFrom(t, "table", topology.Materialized("bench-table", serde.String, serde.Bytes))
	s := topology.From(t, "in", serde.String, serde.Bytes)
	j := topology.JoinTable(s, tb, enrichValue)
	topology.To(j, "out", serde.String, serde.Bytes)
	return t
}

// enrichValue is table-join's joiner: the stream's value, '|', the row.
func enrichValue(_ string, v, row []byte) []byte {
	out := make([]byte, 0, len(v)+1+len(row))
	return append(append(append(out, v...), '|'), row...)
}

// prepareTableJoin produces the table (before the stream: it runs
// before the input is preloaded), loads it into the job's store and stops
// the job: the timed run, an instance of the same application on the same
// state directory, starts with the table in Pebble and only the stream to
// read.
func prepareTableJoin(ctx context.Context, e jobEnv, _ int64) error {
	if err := preload(ctx, e.addrs, tableInput()); err != nil {
		return err
	}
	app, err := processor.New(tableJoinTopology(), e.opts(tableApp)...)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(rctx) }()
	_, werr := waitCommitted(ctx, app.Stats().Processed.Load, int64(len(tableInput())))
	cancel()
	if err := <-done; werr == nil {
		werr = err
	}
	return werr
}

func runTableJoin(ctx context.Context, e jobEnv, onExit func(error)) (job, error) {
	stop, app, err := start(ctx, tableJoinTopology(), onExit, e.opts(tableApp)...)
	if err != nil {
		return job{}, err
	}
	return job{stop, app.Stats().Processed.Load, app.Stats().Produced.Load, app.Stats().LoopTime}, nil
}

// verifyTableJoin reads the output back (read_committed) and checks it
// against the table's final rows.
func verifyTableJoin(ctx context.Context, addrs []string, g txn.Guarantee, input []*kgo.Record) (string, error) {
	out, err := readOut(ctx, addrs, "out")
	if err != nil {
		return "", err
	}
	return checkTableJoin(input, tableRows(tableInput()), out, g)
}

// checkTableJoin checks that out holds, for each stream record whose key
// has a row, one record with its key and its value joined with the row,
// exactly once under exactly_once, and nothing else.
func checkTableJoin(input []*kgo.Record, rows map[string][]byte, out []*kgo.Record, g txn.Guarantee) (string, error) {
	want := make(map[string]int, len(input))
	dropped := 0
	for _, r := range input {
		row, ok := rows[string(r.Key)]
		if !ok {
			dropped++
			continue
		}
		want[string(r.Key)+"\x00"+string(enrichValue("", r.Value, row))]++
	}
	if dropped == 0 || dropped == len(input) {
		return "", fmt.Errorf("%d of %d stream records have no row: the scenario is made to drop some and join most", dropped, len(input))
	}
	got := make(map[string]int, len(want))
	for _, o := range out {
		got[string(o.Key)+"\x00"+string(o.Value)]++
	}
	repeats := 0
	for k, n := range want {
		m := got[k]
		if m < n || m > n && g == txn.ExactlyOnce {
			return "", fmt.Errorf("key %q: %d outputs of a value, want %d", keyOf(k), m, n)
		}
		repeats += m - n
		delete(got, k)
	}
	for k, m := range got {
		return "", fmt.Errorf("%d outputs of key %q with a value no stream record and row give", m, keyOf(k))
	}
	return verified(len(input)-dropped, "stream records joined ("+strconv.Itoa(dropped)+" without a row dropped)", repeats), nil
}

func keyOf(k string) string {
	k, _, _ = strings.Cut(k, "\x00")
	return k
}
