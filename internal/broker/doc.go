// Package broker runs franz-go's kfake, an in-process Kafka-protocol broker,
// as sluice's embedded development broker. Tests, `sluice demo` and
// `sluice broker` all start it through this package so that they agree on
// its defaults: loopback only, auto topic creation on, silent unless given a
// logger, and optionally persisted to a directory.
//
// Usage:
//
//	b, err := broker.Start(broker.Config{Partitions: 3})
//	if err != nil {
//		return err
//	}
//	defer b.Close()
//	err = broker.CreateTopic(ctx, b.Addrs(), "words", 3, nil)
//	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
//
// A plain (not secured) broker arms every group member's session timer
// once per generation (sessions.go), closing a gap of kfake: a member
// killed while it waited in a join never expired.
//
// Faults are injected through the underlying cluster, e.g.
// b.Cluster().ControlKey(int16(kmsg.EndTxn), ...).
//
// Secured brokers, for tests of SASL and TLS clients:
//
//	certs, err := broker.WriteCerts(t.TempDir()) // throwaway CA, server and client certs
//	srv, err := certs.ServerTLS(true)            // require client certificates
//	b, err := broker.Start(broker.Config{TLS: srv,
//		Users: []broker.User{{Mechanism: broker.ScramSHA256, Name: "alice", Password: "pw"}}})
package broker
