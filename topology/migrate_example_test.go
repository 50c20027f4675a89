package topology_test

import (
	"fmt"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// A store's counts were 8-byte integers (serde.Int64) and are now decimal
// text (serde.Int64Text): a start from a savepoint (processor.FromSavepoint)
// refuses the changed serde unless the topology migrates the store. The
// migration here also drops the counts of empty keys.
func ExampleMigrateKeyValues() {
	t := topology.New()
	words := topology.From(t, "words", serde.String, serde.String)
	topology.Count(topology.GroupByKey(words), topology.Materialized("counts", serde.String, serde.Int64Text))
	topology.MigrateKeyValues(t, "counts", serde.String, serde.Int64, serde.String, serde.Int64Text,
		func(word string, n int64) (string, int64, error) {
			if word == "" {
				return "", 0, topology.DropEntry
			}
			return word, n, nil
		})
	_, err := t.Build()
	fmt.Println(err)
	// Output: <nil>
}
