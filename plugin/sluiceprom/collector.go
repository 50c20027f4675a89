package sluiceprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-streams/sluice/processor"
)

// Collector reads an App's counters when scraped.
type Collector struct {
	app                                         *processor.App
	processed, commits, aborts, restored, tasks *prometheus.Desc
	failed, late                                *prometheus.Desc
}

// NewCollector returns a collector for app. Register it on your own
// registry.
func NewCollector(app *processor.App) *Collector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc("sluice_"+name, help, nil, nil) }
	return &Collector{
		app:       app,
		processed: d("records_processed_total", "Input records whose transaction (or offset commit) succeeded."),
		commits:   d("commits_total", "Commits (transactions committed, or offset commits)."),
		aborts:    d("aborts_total", "Transactions aborted (rebalances, failed produces, shutdown errors)."),
		restored:  d("restored_records_total", "Changelog records replayed into local stores."),
		tasks:     d("tasks", "Tasks owned by this instance."),
		late:      d("late_records_total", "Records that arrived after every window they belong to had closed (routed to LateRecords, or dropped)."),
		failed: prometheus.NewDesc("sluice_records_failed_total",
			"Records that failed, by error class (deserialization, processing, production) and the action taken (fail, continue, dead-letter).",
			[]string{"class", "action"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.processed, c.commits, c.aborts, c.restored, c.tasks, c.failed, c.late} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.app.Stats()
	ch <- prometheus.MustNewConstMetric(c.processed, prometheus.CounterValue, float64(s.Processed.Load()))
	ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(s.Commits.Load()))
	ch <- prometheus.MustNewConstMetric(c.aborts, prometheus.CounterValue, float64(s.Aborts.Load()))
	ch <- prometheus.MustNewConstMetric(c.restored, prometheus.CounterValue, float64(s.Restored.Load()))
	ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(s.Tasks.Load()))
	ch <- prometheus.MustNewConstMetric(c.late, prometheus.CounterValue, float64(s.Late.Load()))
	for k, n := range s.Failures() {
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(n), string(k.Class), k.Action.String())
	}
}
