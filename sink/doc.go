// Package sink is how sluice writes to systems outside Kafka exactly once
// (invariant 7 of DESIGN.md): a Participant takes part in the commit as
// Flink's TwoPhaseCommitSinkFunction does (its transaction prepared before
// the Kafka transaction commits, committed after it, resolved on recovery
// from the committed state), and an Idempotent store is written after the
// commit, from the committed output, together with the output's
// coordinates, so that a write already stored is skipped.
//
// The interfaces are what a store implements; adapters for PostgreSQL and
// MySQL/MariaDB live in packages of their own under plugin/, so that this
// package and the core import no database driver.
package sink
