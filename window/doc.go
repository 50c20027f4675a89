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
//
// # Event time, lateness and triggers, on a timeline
//
// One-minute tumbling windows, BoundedOutOfOrderness(10s), 30 s of allowed
// lateness (topology.AllowedLateness), the default trigger OnWatermark.
// Times are mm:ss; each line is a record arriving, in arrival order:
//
//	record  watermark after   what happens
//	00:05   -                 window [00:00,01:00) opens: count 1
//	00:50   00:39.999         count 2
//	01:02   00:51.999         window [01:00,02:00) opens
//	00:45   00:51.999         out of order but on time: [00:00,01:00) count 3
//	01:15   01:04.999         the watermark passed 00:59.999: [00:00,01:00) fires (3)
//	00:58   01:04.999         late, within the lateness: count 4, fires again (4)
//	01:45   01:34.999         [00:00,01:00) closes (00:59.999 + 30s): its state is removed
//	00:30   01:34.999         too late: to LateRecords, counted, never silently dropped
//
// With EmitFinal (the AtClose trigger) the window fires once, with 4, when the
// watermark passes its close time 01:29.999; with EmitEveryUpdate it fires on every record it
// takes. Other triggers: CountTrigger(n), ProcessingTime (for windows over
// processing time), EarlyEvery(n) and EarlyEveryInterval(d) (early results
// before the watermark completes the window), Purging(t) (each firing covers
// only the records since the last), or a Trigger of one's own, which sees a
// window's count and timers and returns what to fire and when to call back.
//
// Global windows (one per key, never complete) need such a trigger; count
// windows are global windows fired every slide records, holding the last
// size of them (Flink's countWindow).
//
// Where event time comes from is the source's choice in package topology:
// the record's timestamp (its create time, or its log-append time, which is
// ingestion time), a field of the payload (TimestampFrom), or the wall clock
// (ProcessingTime).
package window
