package processor_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/processor/serve"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// Query reads a store of a running App with the store's own types: here
// the count of a word, wherever it is counted. With more instances, each
// serves the query endpoints at its advertised endpoint, and a key counted
// by another instance is asked of it.
func ExampleQuery() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.SeedTopics(2, "lines"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	dir, _ := os.MkdirTemp("", "example-query")
	defer os.RemoveAll(dir)

	// The materialization both names the store in the topology and types
	// the query.
	counts := topology.Materialized("counts", serde.String, serde.Int64)
	t := topology.New()
	words := topology.FlatMapValues(topology.From(t, "lines", serde.Bytes, serde.String), strings.Fields)
	topology.Count(topology.GroupBy(words, func(_ []byte, w string) string { return w },
		topology.Grouped("words", serde.String, serde.String)), counts)

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	app, err := processor.New(t, processor.ApplicationID("example-query"), processor.Brokers(cluster.ListenAddrs()...),
		processor.StateDir(dir), processor.AdvertisedEndpoint(ln.Addr().String()),
		processor.CommitInterval(100*time.Millisecond), processor.Logger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	serve.Register(mux, app) // what other instances ask
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	defer func() { cancel(); <-done }()

	cl, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("lines"))
	defer cl.Close()
	cl.ProduceSync(ctx, &kgo.Record{Value: []byte("to be or not to be")})

	q := processor.Query(app, counts)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		// ErrNotReady until the instance has its tasks; absent, then
		// 1, until both words are counted and committed.
		if n, ok, err := q.Get(ctx, "be"); err == nil && ok && n == 2 {
			fmt.Println("be:", n)
			break
		}
	}
	// Output: be: 2
}
