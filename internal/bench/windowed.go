package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
	"github.com/sluice-streams/sluice/window"
)

// The windowed scenario: a count per key in tumbling windows over the count
// scenario's records, given event times.
const (
	windowSize = time.Minute
	// windowBound is the out-of-orderness both of the input and of the
	// watermark strategy, so no record is late.
	windowBound = 5 * time.Second
	// windowBase is the event time of the first record,
	// 2025-01-01T00:00:00Z, on a window boundary.
	windowBase = int64(1_735_689_600_000)
)

// timedKeyed is keyed's records (the same keys and values) with event times:
// the i-th record at windowBase + i ms minus a random 0 to windowBound, so
// windows close as the input goes on (60,000 records a window) and a record
// is never more than windowBound behind one before it, on any partition.
// Its own generator leaves keyed's random sequence, so the count scenario's
// input, unchanged.
func timedKeyed(n int, r *rand.Rand) ([]*kgo.Record, int64) {
	recs, processed := keyed(n, r)
	tr := rand.New(rand.NewPCG(3, 4))
	bound := windowBound.Milliseconds()
	for i, rec := range recs {
		rec.Timestamp = time.UnixMilli(windowBase + int64(i) - tr.Int64N(bound+1))
	}
	return recs, processed
}

func windowedTopology() *topology.Topology {
	t := topology.New()
	s := topology.From(t, "in", serde.String, serde.Bytes, topology.Watermarks(window.BoundedOutOfOrderness(windowBound)))
	ws := topology.WindowedBy(topology.GroupByKey(s), window.Tumbling(windowSize), topology.EmitFinal())
	c := topology.CountWindows(ws, topology.Materialized("window-counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(c), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
	return t
}

// windowKey is one key's window, by its start.
type windowKey struct {
	key   string
	start int64
}

// closedWindows computes, from the preloaded input, what the windowed job
// must have emitted once it has processed all of it: the count of every
// window closed by the final watermark of its task. Each task reads one
// partition, so it replays each partition in offset order, as its task
// does: a record whose window had closed before it came is late (dropped);
// after each record the watermark becomes max(ts) - bound - 1. A window
// [s, s+size) closes when the watermark reaches s+size-1. recs must carry
// the partitions and offsets the preload was given.
func closedWindows(recs []*kgo.Record, size, bound time.Duration) (closed map[windowKey]int64, late int, err error) {
	byPart := map[int32][]*kgo.Record{}
	for _, r := range recs {
		if r.Offset < 0 {
			return nil, 0, fmt.Errorf("input record without an offset: %v", r)
		}
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	sz, bd := size.Milliseconds(), bound.Milliseconds()
	closed = map[windowKey]int64{}
	for _, rs := range byPart {
		slices.SortFunc(rs, func(a, b *kgo.Record) int { return cmp.Compare(a.Offset, b.Offset) })
		wm := window.NoWatermark
		open := map[windowKey]int64{}
		for _, r := range rs {
			ts := r.Timestamp.UnixMilli()
			start := ts - ts%sz // timestamps are not negative
			if start+sz-1 <= wm {
				late++
			} else {
				open[windowKey{string(r.Key), start}]++
			}
			wm = max(wm, ts-bd-1)
		}
		for w, n := range open {
			if w.start+sz-1 <= wm {
				closed[w] = n
			}
		}
	}
	return closed, late, nil
}

// verifyWindowed reads the output back (read_committed) and checks that it
// holds exactly the windows closedWindows expects, each once with its
// count and stamped with its last millisecond. Under at_least_once a
// window may repeat, with the same count: that is the guarantee.
func verifyWindowed(ctx context.Context, addrs []string, g txn.Guarantee, recs []*kgo.Record) (string, error) {
	want, late, err := closedWindows(recs, windowSize, windowBound)
	if err != nil {
		return "", err
	}
	if late > 0 {
		return "", fmt.Errorf("the input has %d late records; it is made to have none", late)
	}
	if len(want) == 0 {
		return "", fmt.Errorf("no window closes over %d records: the scenario would measure no firing", len(recs))
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := readback.ReadCommitted(rctx, addrs, "out")
	if err != nil {
		return "", err
	}
	ks := topology.WindowedSerde(serde.String)
	got := make(map[windowKey]int64, len(want))
	dups := 0
	for _, r := range out {
		w, err := ks.Decode(r.Key)
		if err != nil {
			return "", fmt.Errorf("out@%d/%d: %w", r.Partition, r.Offset, err)
		}
		n, err := serde.Int64Text.Decode(r.Value)
		if err != nil {
			return "", fmt.Errorf("out@%d/%d: %w", r.Partition, r.Offset, err)
		}
		if w.Window.End-w.Window.Start != windowSize.Milliseconds() || w.Window.Start%windowSize.Milliseconds() != 0 {
			return "", fmt.Errorf("out@%d/%d: window %v is not a %v tumbling window", r.Partition, r.Offset, w.Window, windowSize)
		}
		if ts := r.Timestamp.UnixMilli(); ts != w.Window.End-1 {
			return "", fmt.Errorf("out@%d/%d: window %v stamped %d, want its last millisecond", r.Partition, r.Offset, w.Window, ts)
		}
		k := windowKey{w.Key, w.Window.Start}
		if old, ok := got[k]; ok {
			if g == txn.ExactlyOnce || old != n {
				return "", fmt.Errorf("window %s%v emitted twice, counts %d and %d", k.key, w.Window, old, n)
			}
			dups++
		}
		got[k] = n
	}
	var missing, wrong, extra []string
	for k, n := range want {
		switch m, ok := got[k]; {
		case !ok:
			missing = append(missing, fmt.Sprintf("%s@%d=%d", k.key, k.start, n))
		case m != n:
			wrong = append(wrong, fmt.Sprintf("%s@%d=%d, want %d", k.key, k.start, m, n))
		}
	}
	for k, n := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, fmt.Sprintf("%s@%d=%d", k.key, k.start, n))
		}
	}
	if len(missing)+len(wrong)+len(extra) > 0 {
		return "", fmt.Errorf("output differs from the %d closed windows: %d missing %v, %d wrong %v, %d not closed %v",
			len(want), len(missing), first(missing), len(wrong), first(wrong), len(extra), first(extra))
	}
	note := fmt.Sprintf("verified: the %d closed windows, exactly", len(want))
	if dups > 0 {
		note += fmt.Sprintf(" (%d repeated)", dups)
	}
	return note, nil
}

// first returns a few of ss, sorted, for an error message.
func first(ss []string) []string {
	slices.Sort(ss)
	return ss[:min(len(ss), 5)]
}
