// Package task is the deterministic core of sluice's runtime: a Task runs one
// sub-topology on one partition. It owns no goroutine, reads no clock and
// does no I/O but through its Sender and its store engines, so the same code
// runs under the Kafka driver (package processor) and under the broker-free
// test driver (package topologytest).
//
//	t, _ := task.New(id, sub, plan, appID, stateDir, send)
//	// restore t.Engine(name) for each of t.Stores(), then
//	t.Init()
//	t.Process(record) ...
//	t.Flush()          // before the transaction ends
//	t.Commit()         // after it committed (or t.Abort())
package task
