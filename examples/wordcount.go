package examples

import (
	"strings"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// wordCountParams are the parameters of wordcount and wordcount-v2.
var wordCountParams = []Param{
	{"input", "text-lines", "input topic of UTF-8 lines"},
	{"output", "word-counts", "output topic: key = word, value = count in decimal"},
	{"dlq", "text-lines-dlq", "dead-letter topic for lines that are not UTF-8"},
}

func init() {
	register(Example{
		Name:    "wordcount",
		Summary: "count words of UTF-8 lines, re-keyed by word through a repartition topic",
		Params:  wordCountParams,
		Inputs:  []string{"input"},
		Build: func(p map[string]string) *topology.Topology {
			return WordCount(p["input"], p["output"], p["dlq"])
		},
	})
}

// Words splits a line the way wordcount counts it.
func Words(line string) []string { return strings.Fields(strings.ToLower(line)) }

// WordCount reads lines from input, counts words in the store "counts" and
// writes every updated count to output.
func WordCount(input, output, dlq string) *topology.Topology {
	return wordCount(input, output, dlq, serde.Int64)
}

// wordCount is WordCount with the store's counts in the serde counts.
func wordCount(input, output, dlq string, counts serde.Serde[int64]) *topology.Topology {
	t := topology.New()
	lines := topology.From(t, input, serde.Bytes, serde.String, topology.DeadLetter(dlq))
	words := topology.FlatMapValues(lines, Words)
	table := topology.Count(
		topology.GroupBy(words, func(_ []byte, w string) string { return w }, topology.Grouped("counts", serde.String, serde.String)),
		topology.Materialized("counts", serde.String, counts),
	)
	topology.To(topology.ToStream(table), output, serde.String, serde.Int64Text)
	return t
}

func init() {
	register(Example{
		Name:    "wordcount-v2",
		Summary: "wordcount whose store keeps counts as decimal text: the upgrade of wordcount that migrates its savepoint's store",
		Params:  wordCountParams,
		Inputs:  []string{"input"},
		Build: func(p map[string]string) *topology.Topology {
			return WordCountV2(p["input"], p["output"], p["dlq"])
		},
	})
}

// WordCountV2 is WordCount with the store "counts" holding each count as
// decimal text (serde.Int64Text) instead of 8 bytes: a change of a store's
// format, which a start from a savepoint of WordCount accepts only because
// it registers the migration of the store's values.
func WordCountV2(input, output, dlq string) *topology.Topology {
	t := wordCount(input, output, dlq, serde.Int64Text)
	topology.MigrateKeyValues(t, "counts", serde.String, serde.Int64, serde.String, serde.Int64Text,
		func(word string, n int64) (string, int64, error) { return word, n, nil })
	return t
}
