package topologytest_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
	"github.com/sluice-streams/sluice/window"
)

// The input of BenchmarkTumblingCountOutOfOrder and BenchmarkCount, the same
// shape as the count scenario of `sluice bench`: 8-byte keys from 100,000,
// 100-byte values; plus event time, one record per millisecond with up to
// 5 s of disorder, so that 1-minute windows close as the input goes on.
const (
	benchRecords = 1_000_000
	benchKeys    = 100_000
	benchBound   = 5 * time.Second
	benchWindow  = time.Minute
	// benchBase is 2025-01-01T00:00:00Z, on a window boundary.
	benchBase = int64(1_735_689_600_000)
)

type benchRecord struct {
	key []byte
	ts  int64
}

// outOfOrder makes n records: the i-th at benchBase + i ms minus a random
// 0 to benchBound, so a record is never more than benchBound behind one
// before it and none is late under BoundedOutOfOrderness(benchBound).
func outOfOrder(n int) []benchRecord {
	r := rand.New(rand.NewPCG(1, 2))
	bound := benchBound.Milliseconds()
	recs := make([]benchRecord, n)
	for i := range recs {
		recs[i] = benchRecord{
			key: fmt.Appendf(nil, "%08d", r.IntN(benchKeys)),
			ts:  benchBase + int64(i) - r.Int64N(bound+1),
		}
	}
	return recs
}

// BenchmarkTumblingCountOutOfOrder counts records per key in 1-minute
// tumbling windows (watermark BoundedOutOfOrderness(5s), EmitFinal, Pebble
// window store) over 1,000,000 out-of-order records through the
// broker-free driver, which commits after every record. One op is the whole
// input; compare records/s with BenchmarkCount's.
func BenchmarkTumblingCountOutOfOrder(b *testing.B) {
	recs := outOfOrder(benchRecords)
	// With one task, the final watermark is the newest timestamp minus the
	// bound minus 1; a window [s, s+size) closed once s+size-1 <= wm.
	var maxTs int64
	for _, r := range recs {
		maxTs = max(maxTs, r.ts)
	}
	wm, size := maxTs-benchBound.Milliseconds()-1, benchWindow.Milliseconds()
	closed := map[string]bool{}
	var inClosed int64
	for _, r := range recs {
		start := r.ts - r.ts%size
		if start+size-1 <= wm {
			closed[fmt.Sprintf("%s@%d", r.key, start)] = true
			inClosed++
		}
	}
	benchmarkDriver(b, recs, func() *topology.Topology {
		t := topology.New()
		s := topology.From(t, "in", serde.String, serde.Bytes, topology.Watermarks(window.BoundedOutOfOrderness(benchBound)))
		ws := topology.WindowedBy(topology.GroupByKey(s), window.Tumbling(benchWindow), topology.EmitFinal())
		c := topology.CountWindows(ws, topology.Materialized("window-counts", serde.String, serde.Int64))
		topology.To(topology.ToStream(c), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
		return t
	}, func(d *topologytest.Driver) error {
		rs, err := topologytest.NewOutputTopic(d, "out", topology.WindowedSerde(serde.String), serde.Int64Text).ReadRecords()
		if err != nil {
			return err
		}
		var sum int64
		for _, r := range rs {
			if !closed[fmt.Sprintf("%s@%d", r.Key.Key, r.Key.Window.Start)] {
				return fmt.Errorf("window %s%v is not closed by watermark %d, or was emitted twice", r.Key.Key, r.Key.Window, wm)
			}
			delete(closed, fmt.Sprintf("%s@%d", r.Key.Key, r.Key.Window.Start))
			sum += r.Value
		}
		if len(closed) > 0 || sum != inClosed {
			return fmt.Errorf("%d windows missing; counts sum to %d, want %d", len(closed), sum, inClosed)
		}
		return nil
	})
}

// BenchmarkCount is the same input through a plain count per key (one
// output record per input record), for comparison.
func BenchmarkCount(b *testing.B) {
	recs := outOfOrder(benchRecords)
	want := map[string]int64{}
	for _, r := range recs {
		want[string(r.key)]++
	}
	benchmarkDriver(b, recs, func() *topology.Topology {
		t := topology.New()
		s := topology.From(t, "in", serde.String, serde.Bytes)
		c := topology.Count(topology.GroupByKey(s), topology.Materialized("counts", serde.String, serde.Int64))
		topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
		return t
	}, func(d *topologytest.Driver) error {
		got, err := topologytest.ToMap(topologytest.NewOutputTopic(d, "out", serde.String, serde.Int64Text))
		if err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d keys counted, want %d", len(got), len(want))
		}
		for k, n := range want {
			if got[k] != n {
				return fmt.Errorf("key %s counted %d, want %d", k, got[k], n)
			}
		}
		return nil
	})
}

// benchmarkDriver pipes recs through a fresh driver of build() per op,
// timing only the piping; check, untimed, makes sure the output is right.
// It reports records/s and allocs/record besides allocs/op.
func benchmarkDriver(b *testing.B, recs []benchRecord, build func() *topology.Topology, check func(*topologytest.Driver) error) {
	val := make([]byte, 100)
	for i := range val {
		val[i] = 'a' + byte(i%26)
	}
	var mallocs uint64
	var ms runtime.MemStats
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		d, err := topologytest.New(build())
		if err != nil {
			b.Fatal(err)
		}
		in := topologytest.NewInputTopic(d, "in", serde.String, serde.Bytes)
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		b.StartTimer()
		for _, r := range recs {
			if err := in.PipeBytes(r.key, val, r.ts); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		if err := check(d); err != nil {
			b.Fatal(err)
		}
		if err := d.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	n := float64(len(recs) * b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(mallocs)/n, "allocs/record")
}
