package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeadJoinerExpires: members whose processes die while they wait in a
// JoinGroup must leave the group after their session timeout, as on Kafka,
// so that the partitions assigned to them reach the live member. Without
// the session armer (the negative control) kfake keeps such a member
// whenever its join answer is not delivered, which happens about half the
// time for each (kfake's reply races the closed connection). It then
// leaves only when another member's expiry starts a rebalance that waits
// out the rebalance timeout for it (6s + 10s here), and never if every
// dead joiner was kept: that wedged a SIGKILL test for good.
func TestDeadJoinerExpires(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out session timeouts")
	}
	t.Run("armed", func(t *testing.T) {
		t.Parallel()
		if missing := deadJoiners(t, Config{}, 30*time.Second); missing != 0 {
			t.Errorf("the live member lacks %d of 16 partitions after 30s: dead members kept them", missing)
		}
	})
	t.Run("negative control: kfake alone", func(t *testing.T) {
		t.Parallel()
		// Each attempt leaves no dead member in the group with
		// probability 1/256; three attempts make a false failure
		// negligible.
		for range 3 {
			missing := deadJoiners(t, Config{withoutSessionArmer: true}, 12*time.Second)
			t.Logf("the live member lacks %d of 16 partitions after 12s", missing)
			if missing > 0 {
				return
			}
		}
		t.Error("every dead joiner expired without the armer: the test no longer shows kfake's gap (fixed upstream? then drop the armer)")
	})
}

// deadJoiners runs one live member A of a group on a 16-partition topic,
// lets eight more members join and die while A's rejoin is held back, and
// returns how many partitions A still lacks after waiting up to within
// (at least the dead members' 6s session timeout).
func deadJoiners(t *testing.T, cfg Config, within time.Duration) (missing int) {
	const parts, dead = 16, 8
	cfg.Topics = map[string]int32{"in": parts}
	b := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), within+30*time.Second)
	defer cancel()

	var mu sync.Mutex
	owned := map[int32]bool{}
	var gen int32 // of A's newest assignment
	update := func(ps map[string][]int32, own bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range ps["in"] {
			if own {
				owned[p] = true
			} else {
				delete(owned, p)
			}
		}
	}
	ownedN := func() int { mu.Lock(); defer mu.Unlock(); return len(owned) }
	genNow := func() int32 { mu.Lock(); defer mu.Unlock(); return gen }
	a, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"),
		kgo.SessionTimeout(6*time.Second), kgo.RebalanceTimeout(10*time.Second), kgo.HeartbeatInterval(500*time.Millisecond), kgo.Balancers(kgo.RangeBalancer()),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			update(ps, true)
			_, g := cl.GroupMetadata()
			mu.Lock()
			gen = g
			mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, ps map[string][]int32) { update(ps, false) }))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	go func() {
		for ctx.Err() == nil && !a.PollFetches(ctx).IsClientClosed() {
		}
	}()
	waitFor(t, ctx, "the live member to own every partition", func() bool { return ownedN() == parts })
	aID, _ := a.GroupMetadata()
	gen0 := genNow()

	// A's rejoin waits until every dead joiner's join is in and its
	// process gone, so that the join completes after they died.
	joined, release := make(chan struct{}), make(chan struct{})
	var joins int
	b.Cluster().ControlKey(kmsg.JoinGroup.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		req := r.(*kmsg.JoinGroupRequest)
		switch {
		case req.MemberID == aID:
			b.Cluster().SleepControl(func() { <-release })
		case req.MemberID != "":
			if joins++; joins == dead {
				close(joined)
			}
		}
		return nil, nil, false
	})
	var clients []*kgo.Client
	for i := range dead {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
		join := kmsg.NewPtrJoinGroupRequest()
		join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g", 6000, 10000, "consumer"
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Topics = []string{"in"}
		proto := kmsg.NewJoinGroupRequestProtocol()
		proto.Name, proto.Metadata = "range", meta.AppendTo(nil)
		join.Protocols = append(join.Protocols, proto)
		resp, err := join.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("dead joiner %d: first join: %v", i, err)
		}
		join.MemberID = resp.MemberID
		go join.RequestWith(ctx, cl) // waits in the join until the process dies
	}
	select {
	case <-joined:
	case <-ctx.Done():
		t.Fatal("the dead joiners' joins did not arrive")
	}
	for _, cl := range clients {
		cl.Close() // SIGKILL, as the group sees it: the connection ends
	}
	time.Sleep(200 * time.Millisecond) // the broker sees the connections end
	close(release)
	waitFor(t, ctx, "the generation with the dead joiners", func() bool { return genNow() > gen0 })
	if ownedN() == parts {
		t.Fatal("the live member owns every partition in the generation with the dead joiners: they did not join")
	}

	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ownedN() != parts {
		time.Sleep(200 * time.Millisecond)
	}
	return parts - ownedN()
}

// TestArmerFollowsARecreatedGroup: a group deleted and made again counts
// its generations from the start; the armer must arm them, not wait for
// them to pass the old group's last.
func TestArmerFollowsARecreatedGroup(t *testing.T) {
	a := &sessionArmer{wake: make(chan struct{}, 1), synced: map[string]int32{}, armedAt: map[string]int32{"g": 7, "h": 3}}
	a.saw("g", 1)
	a.saw("h", 3) // the generation armed last: nothing to do
	a.saw("h", 4)
	if want := map[string]int32{"g": 1, "h": 4}; fmt.Sprint(a.synced) != fmt.Sprint(want) {
		t.Errorf("to arm: %v, want %v", a.synced, want)
	}
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal(fmt.Sprintf("timed out waiting for %s", what))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
