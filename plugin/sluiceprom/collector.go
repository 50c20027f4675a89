package sluiceprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-streams/sluice/processor"
)

// Collector reads an App's counters, histograms and task status when
// scraped.
type Collector struct {
	app *processor.App

	processed, commits, aborts, restored, tasks, failed, late, ignored *prometheus.Desc
	produced, rebalances, loop                                         *prometheus.Desc
	processLatency, commitLatency, e2eLatency                          *prometheus.Desc

	taskState, taskIn, taskOut, taskRestored, taskRemaining, lag *prometheus.Desc
	storeBytes, storeMemory, storeGets, storeHits                *prometheus.Desc
}

// NewCollector returns a collector for app. Register it on your own
// registry.
func NewCollector(app *processor.App) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("sluice_"+name, help, labels, nil)
	}
	return &Collector{
		app:        app,
		processed:  d("records_processed_total", "Input records whose transaction (or offset commit) succeeded."),
		commits:    d("commits_total", "Commits (transactions committed, or offset commits)."),
		aborts:     d("aborts_total", "Transactions aborted, by cause: rebalance, produce, flush, commit, processing, shutdown.", "cause"),
		restored:   d("restored_records_total", "Changelog records replayed into local stores."),
		tasks:      d("tasks", "Tasks owned by this instance."),
		late:       d("late_records_total", "Records that arrived after every window they belong to had closed (routed to LateRecords, or dropped)."),
		ignored:    d("ignored_deletes_total", "Deletes (records without a value) that an aggregation, a window, a join or an operator that changes the key ignored, having no value to add, join or map: Kafka Streams' dropped records, late ones aside."),
		failed:     d("records_failed_total", "Records that failed, by error class (deserialization, processing, production) and the action taken (fail, continue, dead-letter).", "class", "action"),
		produced:   d("records_produced_total", "Records produced: outputs, repartition, changelog and dead-letter records, committed or not."),
		rebalances: d("rebalances_total", "Partition assignments received from the group."),
		loop:       d("loop_seconds_total", "Wall time the instance loop spent in each phase: poll (waiting for records while no task processes), process (while any does), and the commit's flush, end (the transaction's end at the broker) and apply (the stages into the stores). Their rates are the shares of its time.", "phase"),
		processLatency: d("process_latency_seconds",
			"Time one input record takes through its task: the average over each fetched batch of a task, observed once per record."),
		commitLatency: d("commit_latency_seconds", "Time to flush the tasks, end the transaction and apply the stores' stage."),
		e2eLatency: d("end_to_end_latency_seconds",
			"Per input record: wall clock when its outputs were produced minus the record's timestamp. A read_committed reader sees them up to a commit later."),
		taskState:    d("task_state", "1 for the state each task is in (restoring, running, standby).", "task", "state"),
		taskIn:       d("task_records_processed_total", "Input records a task processed, committed or not, since it opened here.", "task"),
		taskOut:      d("task_records_produced_total", "Records a task's sinks produced (outputs and repartition records) since it opened here.", "task"),
		taskRestored: d("task_restored_records", "Changelog records the task restored when it opened, or so far while it restores.", "task"),
		taskRemaining: d("task_restore_remaining_records",
			"While a task restores: offsets of the store being restored left to read (control records included); 0 once running.", "task"),
		lag:         d("consumer_lag_records", "Records of a task's input partition past the last one it fetched, as of that fetch.", "task", "topic"),
		storeBytes:  d("store_bytes", "Approximate size on disk of a task's store.", "task", "store"),
		storeMemory: d("store_memory_bytes", "Memory a task's store holds in its stage, as state.memory.budget counts it: the open transaction's writes, cached values, and what operators keep about the store (a stream join's index of its keys).", "task", "store"),
		storeGets:   d("store_gets_total", "Reads of a task's store.", "task", "store"),
		storeHits:   d("store_cache_hits_total", "Reads of a task's store answered by its write or read cache, without reading Pebble.", "task", "store"),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.processed, c.commits, c.aborts, c.restored, c.tasks, c.failed, c.late, c.ignored, c.produced, c.rebalances, c.loop,
		c.processLatency, c.commitLatency, c.e2eLatency,
		c.taskState, c.taskIn, c.taskOut, c.taskRestored, c.taskRemaining, c.lag, c.storeBytes, c.storeMemory, c.storeGets, c.storeHits,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.app.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter(c.processed, s.Processed.Load())
	counter(c.commits, s.Commits.Load())
	counter(c.restored, s.Restored.Load())
	gauge(c.tasks, s.Tasks.Load())
	counter(c.late, s.Late.Load())
	counter(c.ignored, s.IgnoredDeletes.Load())
	counter(c.produced, s.Produced.Load())
	counter(c.rebalances, s.Rebalances.Load())
	for phase, d := range s.LoopTime() {
		ch <- prometheus.MustNewConstMetric(c.loop, prometheus.CounterValue, d.Seconds(), phase)
	}
	for cause, n := range s.AbortsByCause() {
		counter(c.aborts, n, cause)
	}
	for k, n := range s.Failures() {
		counter(c.failed, n, string(k.Class), k.Action.String())
	}
	for d, h := range map[*prometheus.Desc]*processor.Histogram{c.processLatency: s.ProcessLatency, c.commitLatency: s.CommitLatency, c.e2eLatency: s.EndToEndLatency} {
		if h == nil {
			continue
		}
		snap := h.Snapshot()
		ch <- prometheus.MustNewConstHistogram(d, snap.Count, snap.Sum, snap.Buckets)
	}
	for _, t := range c.app.Status().Tasks {
		gauge(c.taskState, 1, t.ID, string(t.State))
		counter(c.taskIn, t.Processed, t.ID)
		counter(c.taskOut, t.Out, t.ID)
		gauge(c.taskRestored, t.Restored, t.ID)
		gauge(c.taskRemaining, t.RestoreRemaining, t.ID)
		for topic, n := range t.Lag {
			gauge(c.lag, n, t.ID, topic)
		}
		for _, st := range t.StoreStats {
			gauge(c.storeBytes, st.Bytes, t.ID, st.Name)
			gauge(c.storeMemory, st.MemoryBytes, t.ID, st.Name)
			counter(c.storeGets, st.Gets, t.ID, st.Name)
			counter(c.storeHits, st.CacheHits, t.ID, st.Name)
		}
	}
}
