package processor

import (
	"maps"
	"sync/atomic"
	"time"
)

// Histogram counts durations into fixed buckets. The instance's processing
// goroutines observe (num.stream.threads of them at once); any number may
// take snapshots (a metrics scrape) meanwhile, each bucket being an atomic
// counter.
type Histogram struct {
	counts [len(latencyBounds) + 1]atomic.Uint64 // the last is +Inf
	sum    atomic.Int64                          // nanoseconds
	count  atomic.Uint64
}

// latencyBounds are the bucket bounds of every latency histogram: from
// 100µs (one record through a fused sub-topology) to a minute (a stalled
// commit, or event time far behind the wall clock).
var latencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	30 * time.Second, time.Minute,
}

func newHistogram() *Histogram { return &Histogram{} }

// bucketOf is the bucket of d.
func bucketOf(d time.Duration) int {
	i := 0
	for i < len(latencyBounds) && d > latencyBounds[i] {
		i++
	}
	return i
}

// observe adds n observations of d.
func (h *Histogram) observe(d time.Duration, n uint64) {
	h.counts[bucketOf(d)].Add(n)
	h.count.Add(n)
	h.sum.Add(int64(d) * int64(n))
}

// histBatch gathers the observations of one batch of records, so that the
// histogram takes one atomic add per bucket per batch rather than three per
// record.
type histBatch struct {
	counts [len(latencyBounds) + 1]uint64
	sum    int64
	n      uint64
}

func (b *histBatch) add(d time.Duration) {
	b.counts[bucketOf(d)]++
	b.sum += int64(d)
	b.n++
}

// observeBatch adds b's observations.
func (h *Histogram) observeBatch(b *histBatch) {
	for i, c := range b.counts {
		if c > 0 {
			h.counts[i].Add(c)
		}
	}
	h.count.Add(b.n)
	h.sum.Add(b.sum)
}

// HistogramSnapshot is a histogram at one moment, in seconds, in the shape
// Prometheus wants: Buckets maps each upper bound to the cumulative count of
// observations at or below it.
type HistogramSnapshot struct {
	Buckets map[float64]uint64
	Count   uint64
	Sum     float64
}

// Snapshot reads h. The count is read before the buckets: an observation
// is added to its bucket before the count, so every observation counted is
// in a bucket read after it, and Count is the buckets' total (+Inf
// included). Observations made while it reads are left out or counted
// whole, so the difference of two snapshots is a histogram too (the web
// console's per-second quantiles). The sum may be a batch behind or ahead.
func (h *Histogram) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{Buckets: make(map[float64]uint64, len(latencyBounds))}
	count := h.count.Load()
	var cum uint64
	for i, b := range latencyBounds {
		cum += h.counts[i].Load()
		s.Buckets[b.Seconds()] = cum
	}
	s.Count = max(count, cum+h.counts[len(latencyBounds)].Load())
	s.Sum = float64(h.sum.Load()) / float64(time.Second)
	return s
}

// Abort causes, the label of sluice_aborts_total.
const (
	AbortRebalance  = "rebalance"  // partitions were revoked or lost
	AbortProduce    = "produce"    // a record of the transaction failed to produce
	AbortFlush      = "flush"      // a task failed to flush its stores or watermarks
	AbortCommit     = "commit"     // ending the transaction failed (fenced, timed out)
	AbortProcessing = "processing" // the instance stops on a record or fetch error
	AbortShutdown   = "shutdown"   // the instance stopped during the transaction
)

func (s *Stats) addAbort(cause string) {
	s.Aborts.Add(1)
	s.mu.Lock()
	countIn(&s.aborts, cause)
	s.mu.Unlock()
}

// AbortsByCause returns the aborted transactions by cause (the Abort*
// constants).
func (s *Stats) AbortsByCause() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.aborts)
}

// countIn adds one to m[k], making m if needed.
func countIn[K comparable](m *map[K]int64, k K) {
	if *m == nil {
		*m = map[K]int64{}
	}
	(*m)[k]++
}
