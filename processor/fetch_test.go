package processor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// TestFetchSettings: every partition the instance fetches it asks for at
// most max.partition.fetch.bytes, 64 KiB by default and the option's value
// when given, not franz-go's 1 MiB; every fetch waits at the broker at
// most DefaultFetchMaxWait (500ms, not franz-go's 5s) or the wait a
// ClientOptions gives; and with fetches far smaller than the input's
// batches every record is still copied exactly once.
func TestFetchSettings(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []processor.Opt
		want int32 // bytes a partition
		wait int32 // ms
	}{
		{"default", nil, processor.DefaultMaxPartitionFetchBytes, int32(processor.DefaultFetchMaxWait / time.Millisecond)},
		{"16KiB", []processor.Opt{processor.MaxPartitionFetchBytes(16 << 10)}, 16 << 10, int32(processor.DefaultFetchMaxWait / time.Millisecond)},
		{"wait200ms", []processor.Opt{processor.ClientOptions(kgo.FetchMaxWait(200 * time.Millisecond))}, processor.DefaultMaxPartitionFetchBytes, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := processor.HookedBroker(t)
			in, out := uniq(t, "fetch-in"), uniq(t, "fetch-out")
			cl := setup(t, b.Addrs(), 2, in, out)
			var (
				counting atomic.Bool
				mu       sync.Mutex
				seen     = map[int32]int{} // partitions' bounds in the fetches → how many
				waits    = map[int32]int{} // the fetches' waits → how many
			)
			counting.Store(true)
			cluster := b.Cluster()
			cluster.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				cluster.KeepControl()
				if !counting.Load() {
					return nil, nil, false
				}
				mu.Lock()
				defer mu.Unlock()
				fr := req.(*kmsg.FetchRequest)
				if fr.SessionEpoch != -1 || len(fr.Topics) > 0 {
					// Not the fetch that closes a fetch session as
					// its client closes, which franz-go sends with
					// a wait of 1ms.
					waits[fr.MaxWaitMillis]++
				}
				for _, ft := range fr.Topics {
					for _, fp := range ft.Partitions {
						seen[fp.PartitionMaxBytes]++
					}
				}
				return nil, nil, false
			})
			const n = 3000
			r := rand.New(rand.NewPCG(3, 4))
			recs := make([]*kgo.Record, n)
			for i := range recs {
				v := make([]byte, 1000)
				for j := range v {
					v[j] = byte('a' + r.IntN(26))
				}
				recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			top := topology.New()
			topology.To(topology.From(top, in, serde.String, serde.Bytes), out, serde.String, serde.Bytes)
			appID := uniq(t, "fetch")
			stop := startApp(t, b.Addrs(), top, appID, t.TempDir(), c.opts...)
			// Waited for through the group's offsets, not by reading the
			// output, so that every fetch counted is the instance's.
			adm := admin(t, b.Addrs())
			caughtUp := false
			for deadline := time.Now().Add(60 * time.Second); !caughtUp && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				committed, err := adm.FetchOffsets(context.Background(), appID)
				if err != nil {
					continue
				}
				done := 0
				for p := range int32(2) {
					if o, ok := committed.Lookup(in, p); ok {
						done += int(o.At)
					}
				}
				caughtUp = done == n
			}
			err := stop()
			counting.Store(false)
			if err != nil || !caughtUp {
				t.Fatalf("the instance did not copy the input within a minute (stopped: %v)", err)
			}
			perKey, total := copiesPerKey(t, b.Addrs(), out)
			if total != n || len(perKey) != n {
				t.Fatalf("%d records of %d keys copied, want %d of %d", total, len(perKey), n, n)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || seen[c.want] == 0 {
				t.Errorf("partitions fetched by their bound: %v, want all %d", seen, c.want)
			}
			if len(waits) != 1 || waits[c.wait] == 0 {
				t.Errorf("fetches by their wait (ms): %v, want all %d", waits, c.wait)
			}
		})
	}
}

// TestMaxPartitionFetchBytesRange: New refuses a max.partition.fetch.bytes
// below 1 byte or above MaxPartitionFetchBytesLimit, naming the key, and
// takes the bounds themselves.
func TestMaxPartitionFetchBytesRange(t *testing.T) {
	top := topology.New()
	topology.To(topology.From(top, "in", serde.String, serde.Bytes), "out", serde.String, serde.Bytes)
	for _, n := range []int{0, -1, processor.MaxPartitionFetchBytesLimit + 1} {
		_, err := processor.New(top, processor.ApplicationID("fetch"), processor.MaxPartitionFetchBytes(n))
		if err == nil || !strings.Contains(err.Error(), "max.partition.fetch.bytes") {
			t.Errorf("MaxPartitionFetchBytes(%d): %v, want an error naming max.partition.fetch.bytes", n, err)
		}
	}
	for _, n := range []int{1, processor.MaxPartitionFetchBytesLimit} {
		if _, err := processor.New(top, processor.ApplicationID("fetch"), processor.MaxPartitionFetchBytes(n)); err != nil {
			t.Errorf("MaxPartitionFetchBytes(%d): %v", n, err)
		}
	}
}
