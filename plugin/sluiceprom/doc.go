// Package sluiceprom exports an App's counters to Prometheus. It is the only
// package of sluice that imports the Prometheus client, so programs that do
// not want it do not link it.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(sluiceprom.NewCollector(app))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Metrics (all prefixed sluice_): records_processed_total (input records
// whose transaction committed), commits_total, aborts_total,
// restored_records_total (changelog records replayed into stores), tasks
// (tasks owned now), records_failed_total{class,action} (records that failed
// to decode, process or produce, by the action their error handler chose),
// late_records_total (records that arrived after all their windows closed).
package sluiceprom
