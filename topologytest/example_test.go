package topologytest_test

import (
	"fmt"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topologytest"
)

func Example_wordcount() {
	d, err := topologytest.New(examples.WordCount("lines", "counts", "lines-dlq"))
	if err != nil {
		panic(err)
	}
	defer d.Close()
	lines := topologytest.NewInputTopic(d, "lines", serde.Bytes, serde.String)
	counts := topologytest.NewOutputTopic(d, "counts", serde.String, serde.Int64Text)
	lines.Pipe(nil, "the cat and the hat", 1)
	lines.Pipe(nil, "The end", 2)
	m, _ := topologytest.ToMap(counts)
	fmt.Println(m["the"], m["cat"], m["end"])
	// Output: 3 1 1
}
