// Package txn is the commit protocol of an instance: one Session per
// instance, whose End is the checkpoint.
//
// Under ExactlyOnce a Session is a franz-go GroupTransactSession: everything
// produced between Begin and End (outputs, repartition and changelog records)
// and the input offsets polled meanwhile commit in one Kafka transaction,
// whose TxnOffsetCommit is fenced by the group generation and whose producer
// is fenced by its epoch (invariants 1 and 3). A rebalance during the
// transaction makes End abort, and the consumer rewinds to the committed
// offsets. After an error from End the caller must Close the session and
// start a new one (a new producer epoch) rather than retry.
//
// AtLeastOnce flushes, then commits the polled offsets; AtMostOnce commits
// the polled offsets before returning the records.
//
//	s, _ := txn.NewSession(txn.ExactlyOnce, "app-inst-0", kgoOpts...)
//	s.Begin()
//	fs := s.PollRecords(ctx, 0) // 0: everything buffered
//	// process fs, s.Produce(...)
//	committed, err := s.End(ctx, true)
package txn
