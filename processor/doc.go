// Package processor runs a topology: App is one instance of an application,
// and instances with the same application.id share the work as one consumer
// group.
//
//	app, err := processor.New(t,
//		processor.ApplicationID("billing"),
//		processor.Brokers("127.0.0.1:9092"),
//		processor.StateDir("/var/lib/billing"))
//	if err != nil { ... }
//	err = app.Run(ctx) // until ctx ends: commit, close tasks, leave
//
// An instance owns tasks — (sub-topology, partition) pairs handed out by
// sluice's assignor, co-partitioned inputs together — and runs each against
// local stores restored from their changelog topics. Every commit.interval it
// ends one transaction holding all outputs, changelog records and input
// offsets (see the txn package and DESIGN.md for the commit sequence and the
// invariants it keeps). Tasks are deterministic state machines; this package's
// loop owns the client, the polling and the transaction around them, and runs
// up to num.stream.threads tasks at once while it polls for more
// (StreamThreads). Global
// tables live outside the tasks: each instance reads them in full before it
// processes anything, then follows them (global.go).
//
// Secure clusters: ClientOptions adds franz-go options to every client the
// App makes, e.g.
//
//	processor.ClientOptions(
//		kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
//		kgo.SASL(scram.Auth{User: u, Pass: p}.AsSha512Mechanism()))
//
// A login or TLS handshake the brokers refuse stops Run at start with
// ErrAuthentication (auth.go).
//
// Interactive queries read a store's committed state with its own types,
// from any instance: a key whose task runs elsewhere is asked of its owner
// at the endpoint it advertises (AdvertisedEndpoint), where package
// processor/serve answers.
//
//	n, ok, err := processor.Query(app, counts).Get(ctx, "word")
//
// Savepoints: TakeSavepoint asks the running instances of an application,
// through its savepoint control topic, to pause at a consistent cut, and
// writes their stores and input offsets to a directory (savepoint.go,
// savepoint_member.go); FromSavepoint starts an application from one,
// checking the topology against it and rescaling or migrating its stores
// (fromsavepoint.go).
//
//	m, err := processor.TakeSavepoint(ctx, "billing", "/backups/billing-1", processor.Brokers(b))
//	app, err := processor.New(t, processor.ApplicationID("billing-exp"),
//		processor.FromSavepoint("/backups/billing-1"), processor.AllowOtherApp())
package processor
