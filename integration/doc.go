// Package integration verifies sluice's exactly-once results the way Kafka's
// own system tests do: the application runs as real OS processes, it is
// killed with SIGKILL at random moments and restarted, and afterwards an
// independent read_committed consumer compares everything that was committed
// against an oracle computed from the input log alone.
//
// The application under test is the `billing` example. The package has three
// parts:
//
//   - GenerateBills and ProduceBills make a deterministic input log (valid
//     bills, upstream retries that re-send a record, and bad records of every
//     error class) and write it, returning where every record actually
//     landed. That log, not the generator's intent, is what the checker
//     trusts.
//   - CheckBilling reads bills-accepted, account-totals and bills-dlq with its
//     own consumer and reports every contract violation it finds, together
//     with the transactional state (no transaction left open), the group's
//     committed input offsets, and the records of the repartition topic the
//     group never consumed (a run checked before it was over).
//   - TestBillingExactlyOnceUnderSIGKILL builds the sluice binary, runs three
//     instances against an in-process broker and kills them while they work.
//
// Validity is decided from the bytes of each input record: a record counts
// as a bill when it is a JSON object whose bill_id and account are non-empty
// strings and whose amount_cents and ts are present integers. A record that
// is not a bill is due a deserialization dead letter; a bill for zero cents
// a processing one; a bill whose bill_id is over OversizedBillID bytes a
// production one, since the instances run with --max-record-bytes
// BillingMaxRecordBytes. Every bad record is due its own dead letter, copies
// included, and nothing else. The generator never produces borderline cases
// (null, fractional numbers, bill_ids near the size limit, a bad bill sharing
// its id with a good one), so these rules cannot disagree with a reasonable
// implementation of the billing contract.
//
// Every test can target a real cluster instead of the in-process broker
// (internal/broker, the one `sluice broker` runs) by setting
// SLUICE_TEST_BROKERS=host:port,...; the checker tests then use topic names
// unique to the run. The billing example's topic names are fixed, so the
// chaos test skips on a cluster that already has them.
//
// Running the chaos test (skipped under -short; it takes about a minute):
//
//	go test -run TestBillingExactlyOnceUnderSIGKILL -v ./integration/
//
// It builds ./cmd/sluice itself. Knobs, all optional:
//
//	SLUICE_CHAOS_BILLS=n      bills to produce (default 100000)
//	SLUICE_CHAOS_KILLS=n      SIGKILLs (default 10)
//	SLUICE_CHAOS_SEED=n       replay a run's input and kill sequence (logged)
//	SLUICE_SOAK=1             1000000 bills and 50 kills; pass -timeout 60m
//	SLUICE_CHAOS_BIN=path     test a prebuilt binary, e.g. one built with -race
//	SLUICE_CHAOS_LOG_DIR=dir  keep the instances' logs there
//	SLUICE_CHAOS_GUARANTEE=g  --guarantee for the instances; at_least_once
//	                          must make the test fail, which shows it can
//
// The database chaos tests (issue 17 item 7), TestBillingChaosPostgres and
// TestBillingChaosMariaDB, run the same three instances with `--db URL
// --db-mode two_phase|offsets` (one subtest per mode) against a private
// server (internal/testdb), the password from SLUICE_DB_PASSWORD, and add
// database faults: the application's sessions terminated every 0.2-0.8 s
// (pg_terminate_backend, KILL CONNECTION) and one server restart. An
// independent reader (plain SQL, its own connections) samples both tables
// during the run and checks each sample against committed Kafka output
// (checkDBSample: every row a committed bills-accepted record, committed
// when the sample was taken, and per partition a prefix of its committed
// records); at the end it checks the tables against the input log
// (checkDBFinal) and that nothing is left prepared. TestDBChecker* prove
// the checks can fail; TestBillingChaosNotTwoPhase (SLUICE_CHAOS_NEGATIVE=1)
// runs the chaos with stores that commit at Prepare (build tag
// sluice_chaos_nottwophase) and must find duplicates. By default they run
// 100000 bills and 12 kills per mode (about a minute each on a quiet
// 2-core machine); SLUICE_SOAK=1 runs 300000 bills and 30 kills;
// SLUICE_CHAOS_DB_MODE=m runs one mode.
package integration
