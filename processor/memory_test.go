package processor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testbroker"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/topology"
)

// memKeys are the keys of the budget test: lengths 0 to 399 bytes (with
// characters of every UTF-8 encoding length), each length with many
// seeds, so that the stages hold a few MiB of distinct keys.
func memKeys(n int) []string {
	keys := make([]string, 0, n)
	seen := map[string]bool{}
	for i := 0; len(keys) < n; i++ {
		// Short keys repeat across seeds (26 of one byte): once each.
		if k := testkeys.Len(i%400, uint64(i/400)); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// TestMemoryBudgetCommitsEarly runs a count per key with the smallest
// memory budget (8 MiB: a 2 MiB share for the stages) and a commit
// interval of an hour, as a bounded run, over 12,000 distinct keys of up
// to 399 bytes, each twice: about 4 MiB of stage in one transaction. The
// stages must fill their share and commit early, several times, staying
// within it (an eighth over at most, and slack), and the output must be
// exact: every key counted 1 then 2, once each. The input holds aborted
// transactions (never counted), and the broker fences the first commit,
// so that an early commit aborts and is replayed by a new session.
//
// Negative control: with the early commit turned off, the same run holds
// every write in one transaction, and the stages' peak is caught above
// the bound. Its output is exact too: the budget changes when commits
// happen, never what they hold.
func TestMemoryBudgetCommitsEarly(t *testing.T) {
	if len(testbroker.External()) > 0 {
		t.Skip("answers the embedded broker's EndTxn")
	}
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("early=%v", early), func(t *testing.T) { testMemoryBudget(t, early) })
	}
}

func testMemoryBudget(t *testing.T, early bool) {
	b := processor.HookedBroker(t)
	addrs := b.Addrs()
	in, out := uniq(t, "mem-in"), uniq(t, "mem-out")
	cl := setup(t, addrs, 2, in, out)
	keys := memKeys(12000)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produceAll := func(vals ...string) {
		t.Helper()
		var rs []*kgo.Record
		for _, k := range keys {
			for _, v := range vals {
				rs = append(rs, &kgo.Record{Key: []byte(k), Value: []byte(v)})
			}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceAll("1")
	// Aborted input between the passes: a read_committed consumer skips
	// it, so none of its keys may be counted.
	tcl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(in), kgo.TransactionalID(uniq(t, "mem-aborter")))
	if err != nil {
		t.Fatal(err)
	}
	defer tcl.Close()
	for range 3 {
		if err := tcl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			tcl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "aborted-%d", i), Value: []byte("x")}, nil)
		}
		if err := tcl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := tcl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
	}
	produceAll("2")

	top := topology.New()
	counts := topology.Count(topology.GroupByKey(topology.From(top, in, serde.String, serde.String)),
		topology.Materialized("mem-counts", serde.String, serde.Int64))
	topology.To(topology.ToStream(counts), out, serde.String, serde.Int64)
	app, err := processor.New(top, processor.ApplicationID(uniq(t, "mem")), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.CommitInterval(time.Hour), processor.Bounded(),
		processor.MemoryBudget(processor.MinMemoryBudget), processor.Logger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if !early {
		processor.DisableEarlyCommit(app)
	}
	fenced := endTxnFails(b, kerr.ProducerFenced.Code)
	if err := app.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the bounded run did not end within a minute")
	}
	if !fenced.Load() {
		t.Fatal("no commit was fenced")
	}
	if s := app.Bounded(); !s.Finished {
		t.Fatalf("bounded run not finished: %+v", s)
	}

	// Exactly once: every key counted 1, then 2, each once, in order.
	rs, err := readback.ReadCommitted(ctx, addrs, out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for _, r := range rs {
		if len(r.Value) != 8 {
			t.Fatalf("output value of %d bytes", len(r.Value))
		}
		got[string(r.Key)] = append(got[string(r.Key)], int64(binary.BigEndian.Uint64(r.Value)))
	}
	if len(got) != len(keys) {
		t.Errorf("%d keys counted, want %d (aborted input counted, or keys lost)", len(got), len(keys))
	}
	bad := 0
	for _, k := range keys {
		if c := got[k]; !slices.Equal(c, []int64{1, 2}) && bad < 5 {
			bad++
			t.Errorf("key of %d bytes: counts %v, want [1 2]", len(k), c)
		}
	}

	share, peak, commits := processor.MemoryOf(app)
	t.Logf("stage share %d bytes, peak %d, early commits %d, commits %d, aborts %v",
		share, peak, commits, app.Stats().Commits.Load(), app.Stats().AbortsByCause())
	// The checker: the stages stayed within their share, an eighth over
	// at most as a poll overruns it, plus a poll's slack.
	within := peak <= share*3/2
	if early {
		if commits < 2 {
			t.Errorf("%d early commits, want several: ~4 MiB of stage against a share of %d", commits, share)
		}
		if !within {
			t.Errorf("the stages held %d bytes, over their share of %d", peak, share)
		}
	} else if within {
		t.Errorf("negative control: without the early commit the stages peaked at %d bytes, within the share of %d: the check cannot catch it", peak, share)
	}
}
