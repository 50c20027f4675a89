package readback

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/broker"
)

// TestReadsPastAnAbortedTail lists a partition's end while a transaction is
// open at its tail, then aborts the transaction: the read still ends, with
// the committed records alone. Before, it waited for a record below the
// listed end that read_committed never delivers, until its context ended.
func TestReadsPastAnAbortedTail(t *testing.T) {
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs, topic := b.Addrs(), "tail"
	if err := broker.CreateTopic(ctx, addrs, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.TransactionalID("tail-txn"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(values ...string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("a", "b")
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	produce("x", "y") // left open while the end is listed
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := ends[topic][0].Offset
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	recs, err := readTo(rctx, []kgo.Opt{kgo.SeedBrokers(addrs...)}, topic, map[int32]int64{0: end})
	if err != nil {
		t.Fatalf("reading to %d, listed with a transaction open: %v", end, err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("read %v, want the committed a and b", got)
	}
}
