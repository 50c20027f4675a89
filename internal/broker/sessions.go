package broker

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionArmer closes a gap of kfake's classic consumer groups. kfake starts
// a member's session timer when it delivers the member's JoinGroup answer;
// when the answer cannot be delivered, because the member's process died
// while it waited in the join, the member still belongs to the new
// generation but has no timer. It never expires, and the partitions the
// group's leader assigned to it are consumed by nobody, for ever. Kafka
// schedules every member's session expiry when the join completes,
// answered or not, so there the dead member leaves after its session
// timeout and the group rebalances.
//
// The armer does what Kafka does: it watches SyncGroup requests (the
// generation's live members send one as soon as the join completes) and
// then sends one heartbeat, once per generation, for every member of the
// group. A heartbeat only starts or restarts a member's timer: a live
// member's own heartbeats follow, a dead one's session runs out.
//
// It needs a client of the broker, so it runs only on brokers without
// SASL or TLS, the development broker tests and `sluice demo` start.
type sessionArmer struct {
	cl     *kgo.Client
	adm    *kadm.Client
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	mu      sync.Mutex
	synced  map[string]int32 // group → the newest generation seen syncing
	armedAt map[string]int32 // group → the generation armed last
}

func startSessionArmer(c *kfake.Cluster) (*sessionArmer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &sessionArmer{cl: cl, adm: kadm.NewClient(cl), cancel: cancel, done: make(chan struct{}),
		wake: make(chan struct{}, 1), synced: map[string]int32{}, armedAt: map[string]int32{}}
	// An observer: not handling the request, it stays installed and the
	// broker (or a test's control function after it) answers as always.
	c.ControlKey(kmsg.SyncGroup.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		if req, ok := r.(*kmsg.SyncGroupRequest); ok {
			a.saw(req.Group, req.Generation)
		}
		return nil, nil, false
	})
	go a.run(ctx)
	return a, nil
}

func (a *sessionArmer) saw(group string, gen int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen < a.armedAt[group] {
		// The group was deleted (DeleteGroups, as an operator's
		// kafka-consumer-groups --delete or a test does) and made
		// again, and counts its generations from the start. (A late
		// sync of an older generation lands here too, and costs one
		// heartbeat it answers with ILLEGAL_GENERATION.)
		delete(a.armedAt, group)
	}
	if gen <= a.armedAt[group] || gen <= a.synced[group] {
		return
	}
	a.synced[group] = gen
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *sessionArmer) run(ctx context.Context) {
	defer close(a.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
		a.mu.Lock()
		todo := a.synced
		a.synced = map[string]int32{}
		for g, gen := range todo {
			a.armedAt[g] = gen
		}
		a.mu.Unlock()
		for group, gen := range todo {
			a.arm(ctx, group, gen)
		}
	}
}

// arm sends one heartbeat for each member of the group's generation gen.
// Errors are the group's news, not the armer's: a new generation
// (ILLEGAL_GENERATION) is armed when its members sync, a member already
// gone (UNKNOWN_MEMBER_ID) needs nothing.
func (a *sessionArmer) arm(ctx context.Context, group string, gen int32) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	described, err := a.adm.DescribeGroups(ctx, group)
	if err != nil {
		return
	}
	for _, m := range described[group].Members {
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID, req.InstanceID = group, gen, m.MemberID, m.InstanceID
		_, _ = req.RequestWith(ctx, a.cl)
	}
}

func (a *sessionArmer) close() {
	a.cancel()
	<-a.done
	a.cl.Close()
}
