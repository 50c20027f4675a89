package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/txn"
)

// TestRoundRobinFetchReachesEveryJob: with Config.RoundRobinFetch the pipe
// and a sluice job fetch without fetch sessions (KIP-227: session epoch
// -1 in every request), which makes the embedded broker serve the
// partitions in turn; without it they open sessions. The broker sees the
// requests.
func TestRoundRobinFetchReachesEveryJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs jobs on an embedded broker")
	}
	stateless := runTopology(func() *topology.Topology {
		t := topology.New()
		topology.To(topology.From(t, "in", serde.Bytes, serde.Bytes), "out", serde.Bytes, serde.Bytes)
		return t
	})
	for _, rr := range []bool{true, false} {
		for _, sc := range []struct {
			name string
			run  func(context.Context, jobEnv, func(error)) (job, error)
		}{{"pipe", runPipe}, {"stateless", stateless}} {
			t.Run(fmt.Sprintf("%s/round-robin=%v", sc.name, rr), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				cfg := Config{Partitions: 2, CommitInterval: 50 * time.Millisecond, RoundRobinFetch: rr}
				b, err := freshBroker(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				var sessionless, sessions atomic.Int64
				b.Cluster().ControlKey(kmsg.Fetch.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
					b.Cluster().KeepControl()
					if r.(*kmsg.FetchRequest).SessionEpoch == -1 {
						sessionless.Add(1)
					} else {
						sessions.Add(1)
					}
					return nil, nil, false
				})
				recs := make([]*kgo.Record, 1000)
				for i := range recs {
					recs[i] = &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}
				}
				if err := preload(ctx, b.Addrs(), recs); err != nil {
					t.Fatal(err)
				}
				j, err := sc.run(ctx, cfg.env(b.Addrs(), txn.ExactlyOnce, t.TempDir()), func(err error) { t.Errorf("the job stopped: %v", err) })
				if err != nil {
					t.Fatal(err)
				}
				_, werr := waitCommitted(ctx, j.committed, int64(len(recs)))
				if err := j.stop(); werr == nil {
					werr = err
				}
				if werr != nil {
					t.Fatal(werr)
				}
				t.Logf("fetches: %d without a session, %d in one", sessionless.Load(), sessions.Load())
				if rr && (sessions.Load() > 0 || sessionless.Load() == 0) {
					t.Errorf("%d fetches in a session, %d without: want none in one", sessions.Load(), sessionless.Load())
				}
				if !rr && sessions.Load() == 0 {
					t.Errorf("no fetch in a session (%d without): want the client's default", sessionless.Load())
				}
			})
		}
	}
}
