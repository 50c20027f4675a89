package topology_test

import (
	"fmt"
	"strings"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

func Example() {
	t := topology.New()
	lines := topology.From(t, "text-lines", serde.Bytes, serde.String, topology.SourceName("lines"))
	words := topology.FlatMapValues(lines, func(l string) []string { return strings.Fields(strings.ToLower(l)) })
	counts := topology.Count(
		topology.GroupBy(words, func(_ []byte, w string) string { return w }, topology.Grouped("words", serde.String, serde.String)),
		topology.Materialized("counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), "word-counts", serde.String, serde.Int64Text)

	built, err := t.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, sub := range built.Description().SubTopologies {
		var topics []string
		for _, n := range sub.Nodes {
			if n.Kind == "source" {
				topics = append(topics, n.Topics...)
			}
		}
		fmt.Printf("sub-topology %d reads %v, stores %v\n", sub.ID, topics, sub.Stores)
	}
	// Output:
	// sub-topology 0 reads [text-lines], stores []
	// sub-topology 1 reads [words-repartition], stores [counts]
}

func ExampleTopology_Build() {
	t := topology.New()
	s := topology.From[string, string](t, "in", nil, serde.String)
	topology.Count(topology.GroupByKey(s), topology.Materialized[string, int64]("", serde.String, serde.Int64))
	_, err := t.Build()
	fmt.Println(err)
	// Output:
	// topology: missing serde: source "in" needs a key and a value serde
	// topology: missing name: a store must be named
}
