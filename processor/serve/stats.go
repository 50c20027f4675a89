package serve

import (
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluice-streams/sluice/processor"
)

// The console's charts: a sampler keeps the last statsWindow of the
// instance's counters, one sample per statsInterval, and GET /stats serves
// them as per-interval rates and latencies. Prometheus does this better
// over days; the console needs minutes, from the instance alone.
const (
	statsInterval = time.Second
	statsWindow   = 10 * time.Minute
	statsSamples  = int(statsWindow / statsInterval)
)

// sample is the instance's cumulative counters at one moment.
type sample struct {
	at                                   time.Time
	processed, produced, commits, aborts int64
	restored, late, combined, ignored    int64
	tasks                                int64
	e2eCount                             uint64
	e2eSum                               float64  // seconds
	e2eBuckets                           []uint64 // cumulative, at e2eBounds
	loop                                 map[string]time.Duration
}

// statsPoint is one interval of GET /stats: the rates over it and the
// end-to-end latency of the records it processed.
type statsPoint struct {
	T           int64   `json:"t"`            // end of the interval, ms since the epoch
	InPerSec    float64 `json:"in_per_sec"`   // input records processed
	OutPerSec   float64 `json:"out_per_sec"`  // records produced
	Commits     int64   `json:"commits"`      // transactions committed in it
	Aborts      int64   `json:"aborts"`       // transactions aborted in it
	Tasks       int64   `json:"tasks"`        // tasks owned at its end
	Latencies   int64   `json:"latencies"`    // end-to-end observations in it
	LatencyMean float64 `json:"latency_mean"` // ms; 0 without observations
	LatencyP50  float64 `json:"latency_p50"`  // ms, interpolated within a bucket
	LatencyP99  float64 `json:"latency_p99"`  // ms
	Restored    int64   `json:"restored"`     // changelog records restored in it
	Late        int64   `json:"late"`         // late records in it
	// Loop is the share of the interval the instance loop spent in
	// each phase (processor.LoopPhases): poll, process, flush, end,
	// apply.
	Loop map[string]float64 `json:"loop"`
}

// statsTotals are the counters since the instance started.
type statsTotals struct {
	Processed int64 `json:"processed"`
	Produced  int64 `json:"produced"`
	Commits   int64 `json:"commits"`
	Aborts    int64 `json:"aborts"`
	Restored  int64 `json:"restored"`
	Late      int64 `json:"late"`
	Tasks     int64 `json:"tasks"`
	// Combined is the records a count's combining sinks kept from its
	// repartition topic (processor.Stats.Combined).
	Combined int64 `json:"combined"`
	// IgnoredDeletes is the deletes that nodes with no value to add, join
	// or map ignored (processor.Stats.IgnoredDeletes).
	IgnoredDeletes int64 `json:"ignored_deletes"`
}

// statsAnswer is the JSON of GET /stats.
type statsAnswer struct {
	IntervalMS int64        `json:"interval_ms"`
	WindowMS   int64        `json:"window_ms"`
	Totals     statsTotals  `json:"totals"`
	Points     []statsPoint `json:"points"` // oldest first
}

// sampler keeps the samples. It starts sampling at the first request for
// them and stops statsWindow after the last: a mux has no lifetime to tie
// a goroutine to, and nobody watching needs no samples.
type sampler struct {
	stats *processor.Stats
	now   func() time.Time

	mu struct {
		sync.Mutex
		ring     []sample // oldest first, at most statsSamples+1
		running  bool
		lastSeen time.Time // the last request
	}
}

func newSampler(stats *processor.Stats) *sampler {
	return &sampler{stats: stats, now: time.Now}
}

// read takes the counters now.
func (s *sampler) read() sample {
	st := s.stats
	smp := sample{
		at: s.now(), processed: st.Processed.Load(), produced: st.Produced.Load(),
		commits: st.Commits.Load(), aborts: st.Aborts.Load(), restored: st.Restored.Load(),
		late: st.Late.Load(), tasks: st.Tasks.Load(), combined: st.Combined.Load(),
		ignored: st.IgnoredDeletes.Load(),
		loop:    st.LoopTime(),
	}
	if st.EndToEndLatency != nil {
		h := st.EndToEndLatency.Snapshot()
		smp.e2eCount, smp.e2eSum = h.Count, h.Sum
		bounds := boundsOf(h)
		smp.e2eBuckets = make([]uint64, len(bounds))
		for i, b := range bounds {
			smp.e2eBuckets[i] = h.Buckets[b]
		}
	}
	return smp
}

// boundsOf is the sorted upper bounds of h's buckets (seconds).
func boundsOf(h processor.HistogramSnapshot) []float64 {
	bs := make([]float64, 0, len(h.Buckets))
	for b := range h.Buckets {
		bs = append(bs, b)
	}
	slices.Sort(bs)
	return bs
}

// add appends smp, dropping samples older than the window.
func (s *sampler) add(smp sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(smp)
}

func (s *sampler) addLocked(smp sample) {
	s.mu.ring = append(s.mu.ring, smp)
	if over := len(s.mu.ring) - (statsSamples + 1); over > 0 {
		s.mu.ring = slices.Delete(s.mu.ring, 0, over)
	}
}

// touch notes a request, and starts the sampling goroutine if it is not
// running. The goroutine owns itself: it ends statsWindow after the last
// touch, which bounds its life.
func (s *sampler) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.lastSeen = s.now()
	if s.mu.running {
		return
	}
	s.mu.running = true
	s.mu.ring = s.mu.ring[:0] // a gap would read as a flat line
	s.addLocked(s.read())
	go s.loop()
}

func (s *sampler) loop() {
	t := time.NewTicker(statsInterval)
	defer t.Stop()
	for range t.C {
		smp := s.read()
		s.mu.Lock()
		if smp.at.Sub(s.mu.lastSeen) > statsWindow {
			s.mu.running = false
			s.mu.Unlock()
			return
		}
		s.addLocked(smp)
		s.mu.Unlock()
	}
}

// answer is the samples as GET /stats serves them, with the totals as of
// now.
func (s *sampler) answer() statsAnswer {
	cur := s.read()
	s.mu.Lock()
	ring := slices.Clone(s.mu.ring)
	s.mu.Unlock()
	a := statsAnswer{
		IntervalMS: statsInterval.Milliseconds(), WindowMS: statsWindow.Milliseconds(),
		Totals: statsTotals{
			Processed: cur.processed, Produced: cur.produced, Commits: cur.commits, Aborts: cur.aborts,
			Restored: cur.restored, Late: cur.late, Tasks: cur.tasks, Combined: cur.combined,
			IgnoredDeletes: cur.ignored,
		},
		Points: make([]statsPoint, 0, len(ring)),
	}
	var bounds []float64
	if s.stats.EndToEndLatency != nil {
		bounds = boundsOf(s.stats.EndToEndLatency.Snapshot())
	}
	for i := 1; i < len(ring); i++ {
		a.Points = append(a.Points, point(ring[i-1], ring[i], bounds))
	}
	return a
}

// point is the interval from p to c.
func point(p, c sample, bounds []float64) statsPoint {
	secs := c.at.Sub(p.at).Seconds()
	if secs <= 0 {
		secs = statsInterval.Seconds()
	}
	pt := statsPoint{
		T:         c.at.UnixMilli(),
		InPerSec:  float64(c.processed-p.processed) / secs,
		OutPerSec: float64(c.produced-p.produced) / secs,
		Commits:   c.commits - p.commits, Aborts: c.aborts - p.aborts,
		Tasks: c.tasks, Restored: c.restored - p.restored, Late: c.late - p.late,
		Loop: make(map[string]float64, len(processor.LoopPhases)),
	}
	for _, ph := range processor.LoopPhases {
		pt.Loop[ph] = max(c.loop[ph]-p.loop[ph], 0).Seconds() / secs
	}
	n := int64(c.e2eCount) - int64(p.e2eCount)
	if n <= 0 || len(c.e2eBuckets) != len(bounds) || len(p.e2eBuckets) != len(bounds) {
		return pt
	}
	pt.Latencies = n
	pt.LatencyMean = (c.e2eSum - p.e2eSum) / float64(n) * 1000
	delta := make([]uint64, len(bounds))
	for i := range bounds {
		delta[i] = c.e2eBuckets[i] - min(p.e2eBuckets[i], c.e2eBuckets[i])
	}
	pt.LatencyP50 = quantile(0.5, bounds, delta, uint64(n)) * 1000
	pt.LatencyP99 = quantile(0.99, bounds, delta, uint64(n)) * 1000
	return pt
}

// quantile estimates the q-quantile (seconds) of count observations in
// cumulative buckets at bounds, interpolating linearly within the bucket
// it falls in, as Prometheus' histogram_quantile does; past the last bound
// it is the last bound.
func quantile(q float64, bounds []float64, cum []uint64, count uint64) float64 {
	if count == 0 || len(bounds) == 0 {
		return 0
	}
	rank := q * float64(count)
	lower, below := 0.0, uint64(0)
	for i, b := range bounds {
		if float64(cum[i]) >= rank {
			in := cum[i] - below
			if in == 0 {
				return b
			}
			return lower + (b-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = b, cum[i]
	}
	return bounds[len(bounds)-1]
}

// serveStats answers GET /stats.
func (s *sampler) serveStats(w http.ResponseWriter, _ *http.Request) {
	s.touch()
	a := s.answer()
	for i := range a.Points {
		p := &a.Points[i]
		for _, f := range []*float64{&p.InPerSec, &p.OutPerSec, &p.LatencyMean, &p.LatencyP50, &p.LatencyP99} {
			if math.IsNaN(*f) || math.IsInf(*f, 0) {
				*f = 0
			}
		}
	}
	writeJSON(w, http.StatusOK, a)
}
