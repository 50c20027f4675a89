package txn

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// zombieScenario makes a member that does not know it is a zombie: it
// commits one input record, then its heartbeats stop reaching the
// coordinator (the test answers them as if all were well: a frozen
// process hears nothing either), so the coordinator expires it and gives
// the partition to a second member in the next generation. end ends the zombie's
// next transaction, which holds one record produced without polling
// anything (a punctuation); the test returns whether it committed and
// what a read_committed reader sees of the output.
func zombieScenario(t *testing.T, end func(*eos) (bool, error)) (committed bool, visible int) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	s, err := NewSession(ExactlyOnce, "zombie", kgo.SeedBrokers(addrs...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"),
		kgo.HeartbeatInterval(100*time.Millisecond), kgo.SessionTimeout(time.Second), kgo.RebalanceTimeout(time.Second),
		kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	z := s.(*eos)
	if err := z.Begin(); err != nil {
		t.Fatal(err)
	}
	for polled := 0; polled == 0; {
		fs := z.PollRecords(ctx, 0)
		if ctx.Err() != nil {
			t.Fatal("no input polled")
		}
		polled = fs.NumRecords()
	}
	if ok, err := z.End(ctx, true); !ok || err != nil {
		t.Fatalf("first commit: %v %v", ok, err)
	}
	zmember, zgen := z.Client().GroupMetadata()
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		hb := req.(*kmsg.HeartbeatRequest)
		if hb.MemberID != zmember {
			return nil, nil, false
		}
		resp := hb.ResponseKind().(*kmsg.HeartbeatResponse)
		return resp, nil, true
	})

	assigned := make(chan struct{}, 1)
	other, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			if len(m["in"]) > 0 {
				assigned <- struct{}{}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	go func() {
		for ctx.Err() == nil && !other.PollFetches(ctx).IsClientClosed() {
		}
	}()
	select {
	case <-assigned:
	case <-ctx.Done():
		t.Fatal("the other member was not assigned the partition")
	}
	if _, gen := other.GroupMetadata(); gen <= zgen {
		t.Fatalf("the other member has generation %d, the zombie %d", gen, zgen)
	}

	// The zombie punctuates: a record, nothing polled.
	if err := z.Begin(); err != nil {
		t.Fatal(err)
	}
	z.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("zombie")}, nil)
	committed, err = end(z)
	if err != nil {
		t.Logf("End: %v", err)
	}

	reader, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	// The transaction was decided by End: the last stable offset is the
	// end, and a read_committed reader sees everything there is.
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	for {
		fs := reader.PollFetches(rctx)
		if rctx.Err() != nil {
			break
		}
		visible += fs.NumRecords()
	}
	return committed, visible
}

// TestEndFencesCommitsWithoutInput: a zombie's transaction with records but
// nothing polled aborts, because End's TxnOffsetCommit carries the
// committed offsets and so the coordinator checks the generation.
func TestEndFencesCommitsWithoutInput(t *testing.T) {
	committed, visible := zombieScenario(t, func(z *eos) (bool, error) {
		return z.End(context.Background(), true)
	})
	if committed || visible != 0 {
		t.Fatalf("the zombie committed: committed %v, %d records visible", committed, visible)
	}
}

// TestEndFencesCommitsWithoutInputNegative is the negative control: ended
// as franz-go alone ends it, the zombie's transaction commits.
func TestEndFencesCommitsWithoutInputNegative(t *testing.T) {
	committed, visible := zombieScenario(t, func(z *eos) (bool, error) {
		return z.s.End(context.Background(), kgo.TryCommit)
	})
	if !committed || visible != 1 {
		t.Fatalf("without the fence the zombie should commit (the scenario is a zombie's): committed %v, %d visible", committed, visible)
	}
	t.Logf("without the fence a zombie commits: committed %v, %d record visible", committed, visible)
}
