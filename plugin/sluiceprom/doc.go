// Package sluiceprom exports an App's counters to Prometheus. It is the only
// package of sluice that imports the Prometheus client, so programs that do
// not want it do not link it.
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(sluiceprom.NewCollector(app))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The metrics, all prefixed sluice_. Per instance:
//
//	records_processed_total                input records whose transaction (or offset commit) succeeded
//	records_produced_total                 records produced: outputs, repartition, changelog, dead-letter
//	records_failed_total{class,action}     records that failed to decode, process or produce, by the action taken
//	late_records_total                     records that arrived after all their windows closed
//	ignored_deletes_total                  deletes an aggregation, a window, a join or a rekeying operator ignored
//	commits_total                          transactions (or offset commits) that succeeded
//	aborts_total{cause}                    transactions aborted: rebalance, produce, flush, commit, processing, shutdown
//	rebalances_total                       partition assignments received
//	loop_seconds_total{phase}              the instance loop's wall time by phase: poll, process, flush, end, apply
//	restored_records_total                 changelog records replayed into stores
//	tasks                                  tasks owned now
//	process_latency_seconds                histogram: one input record through its task (batch average)
//	commit_latency_seconds                 histogram: flush, end the transaction, apply the stores
//	end_to_end_latency_seconds             histogram: record timestamp to its outputs produced
//
// Per task (label task, e.g. "0_3"):
//
//	task_state{state}                      1 for the state the task is in: restoring, running, standby
//	task_records_processed_total           input records processed since it opened here
//	task_records_produced_total            records its sinks produced since it opened here
//	task_restored_records                  changelog records restored when it opened, or so far
//	task_restore_remaining_records         while it restores: changelog offsets left to read
//	consumer_lag_records{topic}            records of its input partition past the last fetched
//	store_bytes{store}                     approximate size on disk of each store
//	store_memory_bytes{store}              memory each store holds in its stage, as state.memory.budget counts it
//	store_gets_total{store}                reads of each store
//	store_cache_hits_total{store}          reads answered by the store's cache, not Pebble
//
// The cache hit rate of a store is store_cache_hits_total over
// store_gets_total.
//
// The rates of loop_seconds_total are the shares of the loop's time, as
// Kafka Streams' poll-ratio, process-ratio and commit-ratio are: a loop
// that spends most of its time in poll waits for input; in flush, end and
// apply, it commits, and processes nothing meanwhile.
package sluiceprom
