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

func Example_windowed() {
	d, err := topologytest.New(examples.PageViews("pageviews", "per-minute", "late", "sessions", "dlq"))
	if err != nil {
		panic(err)
	}
	defer d.Close()
	views := topologytest.NewInputTopic(d, "pageviews", serde.Bytes, serde.String)
	perMinute := topologytest.NewOutputTopic(d, "per-minute", serde.String, serde.String)
	view := func(ts int64) string { return fmt.Sprintf(`{"user":"ann","page":"/home","ts":%d}`, ts) }
	views.Pipe([]byte("ann"), view(5_000), 0)   // minute [0s, 60s)
	views.Pipe([]byte("ann"), view(50_000), 0)  // same minute
	views.Pipe([]byte("ann"), view(100_000), 0) // watermark 89.999s: closed at 59.999+30s
	rs, _ := perMinute.ReadRecords()
	fmt.Println(rs[0].Key, rs[0].Value)
	// Output: /home {"window_start":0,"window_end":60000,"count":2}
}
