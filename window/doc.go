// Package window cuts an unbounded stream into finite windows and tracks
// event time with watermarks. It holds definitions and small deterministic
// state machines — no goroutines, no clock of its own, nothing read but the
// arguments — that the runtime's windowed aggregations, triggers and stores
// build on, so that results depend only on the records and on what was
// committed with them (invariant 5 of ARCHITECTURE.md).
//
// All times are milliseconds since the epoch, as int64.
//
// # Windows are half-open
//
// Every window is a Bounds, [Start, End): a record at exactly End belongs to
// the next window. There is no hidden grace period: how long a window stays
// open for late records is always the caller's explicit choice, made
// against the watermark.
//
//   - Time: Tumbling(size) and Hopping(size, advance), aligned to the epoch.
//     Assign returns the windows holding a timestamp.
//   - Sessions: InactivityGap(gap), Kafka Streams' session windows. A
//     session of records first..last is Bounds{first, last+1}; Merge places
//     a record among a key's sessions, returning the merged session and the
//     sessions it replaces (a record within gap of two sessions bridges
//     them); Closed says when the watermark has passed last+gap.
//   - Count: TumblingCount(n) and SlidingCount(size, slide), Flink's count
//     windows, over a per-key record counter rather than time: Fires, Window
//     (the record indices [from, to) a firing covers) and Retain (what a
//     key's buffer must keep).
//
// For example:
//
//	w := window.Tumbling(time.Minute)
//	for _, b := range w.Assign(nil, ts) { ... } // the one window holding ts
//
//	merged, absorbed := window.InactivityGap(5*time.Minute).Merge(sessions, ts)
//	// delete absorbed, store merged with their aggregates folded together
//
// # Watermarks
//
// A watermark W says that no more records with a timestamp <= W are
// expected (Flink's convention); a record at ts <= W is late. NoWatermark
// (math.MinInt64) means nothing is known yet. A Strategy makes one input's
// watermark from its records: BoundedOutOfOrderness(d) gives maxTs - d - 1,
// Monotonous() maxTs - 1, PerRecord(fn) whatever fn says, clamped so it
// never goes back.
//
// A Tracker combines the inputs of one task, numbered 0..n-1 (its input
// partitions, or the upstream writers of a repartition topic, fed with
// Advance): the task's watermark is the minimum over the inputs that are not
// idle, and never decreases. An input that has not reported yet holds it at
// NoWatermark. An input is idle once SetIdle says so or, only if an
// IdleTimeout was configured, once Tick finds it silent for longer than the
// timeout; it rejoins with its next record or watermark, and the task's
// watermark then waits for it to catch up rather than going back (where
// Flink instead ignores a rejoined input until it catches up). The idle
// timeout is off by default because it is the one wall-clock input and so
// the one thing that makes replay decide differently.
//
//	t, err := window.NewTracker(window.BoundedOutOfOrderness(5*time.Second), partitions)
//	...
//	if ts <= t.Watermark() { /* late: the caller's policy */ }
//	t.Observe(partition, ts)
//	for _, b := range open { if b.End-1 <= t.Watermark() { /* fire b */ } }
//	state, _ := t.MarshalBinary() // commit with the offsets; UnmarshalBinary on restart
//
// A time window [Start, End) is complete once the watermark reaches End-1.
package window
