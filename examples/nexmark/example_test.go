package nexmark_test

import (
	"fmt"

	"github.com/sluice-streams/sluice/examples/nexmark"
)

// The first 50 events of seed 1: Nexmark's 1 person, 3 auctions and 46
// bids, 10 a millisecond of event time at the default rate; then q2's
// answer over 20,000 of them.
func ExampleGenerate() {
	evs, err := nexmark.Generate(nexmark.Config{Seed: 1, Events: 50})
	if err != nil {
		panic(err)
	}
	var kinds [3]int
	for _, e := range evs {
		kinds[e.Kind()]++
	}
	fmt.Println("persons, auctions, bids:", kinds)
	fmt.Println("first person:", evs[0].Person.ID, "at", evs[0].DateTime()-nexmark.DefaultBaseTime, "ms")
	fmt.Println("last bid at:", evs[49].DateTime()-nexmark.DefaultBaseTime, "ms")

	evs, _ = nexmark.Generate(nexmark.Config{Seed: 1, Events: 20_000})
	q2, _ := nexmark.Oracle("q2", evs)
	fmt.Println("q2 results:", len(q2.Records) > 0, "mode append:", q2.Mode == nexmark.Append)
	// Output:
	// persons, auctions, bids: [1 3 46]
	// first person: 1000 at 0 ms
	// last bid at: 4 ms
	// q2 results: true mode append: true
}
