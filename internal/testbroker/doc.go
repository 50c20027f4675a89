// Package testbroker gives every package's tests the cluster they run
// against: sluice's embedded broker (kfake) started in-process, or the real
// cluster SLUICE_TEST_BROKERS names, so that one variable points every
// broker test of the repository (processor, integration, the sluice
// command) at a real Kafka.
package testbroker
