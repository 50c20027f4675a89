// Package sinkfile is a reference implementation of package sink's
// contracts on a local directory, with no database: users can copy it for
// their own stores, and sluice's tests use it as a real store (fsynced
// files, atomic renames, a lock across processes).
//
// Participant keeps each prepared transaction as a file under prepared/,
// written and fsynced before Prepare returns; CommitPrepared renames it
// into committed/ (the visible records), RollbackPrepared removes it, and
// Prepared lists prepared/ by prefix. A rename is atomic, so a commit and a
// rollback of the same id racing in two processes resolve it once.
//
// Store (the offsets mode) keeps, per sink and topic, segment files of
// records per partition and one offsets file; a Write adds its segments and
// then replaces the offsets file (the commit point) under a lock, skipping
// records below the stored offsets, so a replay or a second writer cannot
// store a record twice.
//
//	p, err := sinkfile.NewParticipant("/var/lib/app/bills", serde.String(), serde.JSON[Bill]())
//	topology.ToParticipant(bills, "bills-db", p)
//	recs, err := p.Committed() // what a reader sees
package sinkfile
