package sinkfile_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/sink/sinkfile"
)

// A participant's life as sluice drives it: prepared before the Kafka
// commit, committed after it; a transaction whose Kafka commit failed is
// rolled back and never seen.
func ExampleParticipant() {
	dir, _ := os.MkdirTemp("", "sinkfile")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	p, _ := sinkfile.NewParticipant(dir, serde.String, serde.Int64Text)
	p.Prepare(ctx, "app-0_0-n1-1", []sink.Record[string, int64]{{Key: "a", Value: 1, Topic: "in", Offset: 0}})
	p.Prepare(ctx, "app-0_0-n1-2", []sink.Record[string, int64]{{Key: "b", Value: 2, Topic: "in", Offset: 1}})
	p.CommitPrepared(ctx, "app-0_0-n1-1")
	p.RollbackPrepared(ctx, "app-0_0-n1-2")
	recs, _ := p.Committed()
	for _, r := range recs {
		fmt.Println(r.Key, r.Value, r.Offset)
	}
	left, _ := p.Prepared(ctx, "app-0_0-")
	fmt.Println("prepared:", len(left))
	// Output:
	// a 1 0
	// prepared: 0
}

// A store of the offsets mode skips what it already holds: a writer that
// replays after a crash writes nothing twice.
func ExampleStore() {
	dir, _ := os.MkdirTemp("", "sinkfile")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, _ := sinkfile.NewStore(dir, serde.String, serde.Int64Text)
	batch := []sink.Record[string, int64]{{Key: "a", Value: 1, Partition: 0, Offset: 7}}
	st.Write(ctx, "db", "app-db-sink", batch, map[int32]int64{0: 8})
	st.Write(ctx, "db", "app-db-sink", batch, map[int32]int64{0: 8}) // a replay
	recs, _ := st.Records("db", "app-db-sink")
	offsets, _ := st.Offsets(ctx, "db", "app-db-sink")
	fmt.Println(len(recs), offsets[0])
	// Output: 1 8
}
