// Package task is the deterministic core of sluice's runtime: a Task runs one
// sub-topology on one partition. It owns no goroutine, reads no clock and
// does no I/O but through its Config.Send and its store engines, so the same
// code runs under the Kafka driver (package processor) and under the
// broker-free test driver (package topologytest); internal/lint keeps it
// (and internal/ops, whose operator runtimes it runs) free of wall-clock
// reads and go statements.
//
//	t, _ := task.New(id, sub, plan, task.Config{AppID: app, StateDir: dir, Send: send})
//	t.Transition(task.Restoring) // restore t.Engine(name) for each of t.Stores()
//	t.Init()
//	t.Transition(task.Running)
//	t.Process(record) ...          // each record a unit: rolled back if it fails
//	t.Tick(now)                    // the wall clock the driver read, for processing time
//	t.Flush()                      // before the transaction ends
//	t.Commit()                     // after it committed (or t.Abort())
//	t.Close()
//
// A task's lifecycle (State, Transition) is Kafka Streams' Task.State with
// the states sluice has: created, restoring, running, suspended, closed.
// The files: task.go (opening, processing a record as a unit, flush,
// commit, abort), time.go (event time: watermark inputs, the committed time
// state), fold.go (table updates held until the flush), combine.go (a
// count's repartition records combined by key until the flush), state.go
// (the lifecycle).
package task
