// Package examples holds the built-in example jobs that `sluice run`,
// `sluice topology`, `sluice gen`, `sluice bench` and the integration tests
// know by name (registry.go), each a plain function from its parameters to
// a topology, written as a user would write it:
//
//   - wordcount: words of UTF-8 lines counted through a repartition topic;
//   - billing: bills deduplicated by id and summed per account, bad
//     records sent to a dead-letter topic (BillDraws draws its input);
//   - pageviews: per-minute page view counts and user sessions in event
//     time, with out-of-order and late views;
//   - enrich: orders joined with a customers table and, within a window,
//     with their payments; paid revenue by the customers' current tier;
//   - nexmark-q0 ... nexmark-q20: the Nexmark benchmark's queries
//     (nexmark.go) over the persons, auctions and bids that
//     `sluice gen nexmark` writes (examples/nexmark).
//
// The examples are checked where they run: enrich against an oracle in
// enrich_test.go (topologytest), billing and pageviews by the integration
// tests' checkers on real processes, the Nexmark queries against
// examples/nexmark's oracle (nexmark_test.go, nexmark_driver_test.go).
package examples
