package processor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/statedir"
	"github.com/sluice-streams/sluice/store"
)

// globals keeps the application's global tables: one Pebble store per table
// under <state.dir>/<application.id>/global/, filled from every partition of
// its topic with read_committed (invariant 4). Run bootstraps them to the
// end the topics had when it started, before any task processes a record,
// then one goroutine keeps them current until stop.
//
// A global table is rebuilt from its topic on every start: it is not part
// of any transaction, so a local copy has no committed state to resume from
// (Kafka Streams keeps a checkpoint file; sluice trades that for a simpler
// start).
type globals struct {
	engines map[string]store.Engine
	cl      *kgo.Client
	byTopic map[string][]store.Engine

	stop func()
	done chan struct{}
}

// startGlobals opens and bootstraps the global tables; with none it returns
// an empty set and starts nothing.
func (a *App) startGlobals(ctx context.Context) (*globals, error) {
	g := &globals{engines: map[string]store.Engine{}, byTopic: map[string][]store.Engine{}, done: make(chan struct{})}
	if len(a.plan.Globals) == 0 {
		close(g.done)
		g.stop = func() {}
		return g, nil
	}
	for _, gt := range a.plan.Globals {
		dir := statedir.Global(a.dir, gt.Name)
		if err := os.RemoveAll(dir); err != nil {
			g.close()
			return nil, fmt.Errorf("processor: global table %s: %w", gt.Name, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			g.close()
			return nil, fmt.Errorf("processor: global table %s: %w", gt.Name, err)
		}
		eng, err := openEngine(dir, a.mem.pebble)
		if err != nil {
			g.close()
			return nil, fmt.Errorf("processor: global table %s: %w", gt.Name, err)
		}
		g.engines[gt.Name] = eng
		g.byTopic[gt.Topic] = append(g.byTopic[gt.Topic], eng)
	}
	topics := make([]string, 0, len(g.byTopic))
	for t := range g.byTopic {
		topics = append(topics, t)
	}
	admCl, err := kgo.NewClient(a.cfg.kgoOpts()...)
	if err != nil {
		g.close()
		return nil, err
	}
	adm := kadm.NewClient(admCl)
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	var starts kadm.ListedOffsets
	if err == nil {
		starts, err = adm.ListStartOffsets(ctx, topics...)
	}
	admCl.Close()
	if err != nil {
		g.close()
		return nil, fmt.Errorf("processor: global tables: list offsets: %w", err)
	}
	offsets := map[string]map[int32]kgo.Offset{}
	// pending: the partitions whose consumer has not reached their end.
	// A partition is done when the consumer's position is at its end,
	// not when a record at end-1 arrived: the records below the end may
	// be gone (deleted by retention or DeleteRecords, so that log start =
	// end; compacted away), and then none ever does.
	pending := map[string]map[int32]int64{}
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			lerr = errors.Join(lerr, fmt.Errorf("processor: global table topic %s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		if offsets[o.Topic] == nil {
			offsets[o.Topic], pending[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		offsets[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
		start, ok := starts.Lookup(o.Topic, o.Partition)
		if ok && start.Err == nil && start.Offset >= o.Offset {
			return // nothing below the end is left to read
		}
		if o.Offset > 0 {
			pending[o.Topic][o.Partition] = o.Offset
		}
	})
	for _, t := range topics {
		if offsets[t] == nil {
			lerr = errors.Join(lerr, fatalError{fmt.Errorf("processor: global table topic %q does not exist; create it first (sluice topic create %s --compact)", t, t)})
		}
	}
	if lerr != nil {
		g.close()
		return nil, lerr
	}
	g.cl, err = kgo.NewClient(a.cfg.kgoOpts(
		kgo.ConsumePartitions(offsets),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // a partition's last offset is often a commit marker
	)...)
	if err != nil {
		g.close()
		return nil, err
	}
	// Bootstrap: apply until every partition reached its end.
	left := 0
	for _, ps := range pending {
		left += len(ps)
	}
	for left > 0 {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := g.cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			g.close()
			return nil, ctx.Err()
		}
		if err := g.apply(fs); err != nil {
			g.close()
			return nil, err
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			end, ok := pending[p.Topic][p.Partition]
			if !ok {
				return
			}
			pos := p.LogStartOffset
			if n := len(p.Records); n > 0 {
				pos = max(pos, p.Records[n-1].Offset+1)
			}
			if pos >= end {
				delete(pending[p.Topic], p.Partition)
				left--
			}
		})
	}
	fctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	go g.follow(fctx, a)
	return g, nil
}

// apply writes a fetch's records into the global stores, unless the
// fetch failed.
func (g *globals) apply(fs kgo.Fetches) error {
	if err := fetchErr(fs); err != nil {
		return err
	}
	return g.write(fs)
}

// fetchErr joins a fetch's errors, but for the end of a poll.
func fetchErr(fs kgo.Fetches) error {
	var ferr error
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			ferr = errors.Join(ferr, fmt.Errorf("processor: global table topic %s/%d: %w", t, p, err))
		}
	})
	return ferr
}

// write writes a fetch's records into the global stores.
func (g *globals) write(fs kgo.Fetches) error {
	writes := map[string][]store.Write{}
	fs.EachRecord(func(r *kgo.Record) {
		if !r.Attrs.IsControl() {
			writes[r.Topic] = append(writes[r.Topic], store.Write{Key: r.Key, Value: r.Value})
		}
	})
	for topic, ws := range writes {
		for _, e := range g.byTopic[topic] {
			if err := e.Apply(ws, store.NoCheckpoint); err != nil {
				return err
			}
		}
	}
	return nil
}

// follow keeps the global stores current until ctx ends. A fetch whose
// records could not all be applied is applied again, whole, until it is
// (a global table has no checkpoint to rewind to, and writing a record
// twice leaves the same table): polling on would skip its records, and the
// table would miss them until their keys were written again.
func (g *globals) follow(ctx context.Context, a *App) {
	defer close(g.done)
	for ctx.Err() == nil {
		fs := g.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		if err := fetchErr(fs); err != nil && ctx.Err() == nil {
			// The client retries what can be retried; the records
			// that did arrive are written below.
			a.log.Warn("global tables", "err", err)
		}
		for err := g.write(fs); err != nil && ctx.Err() == nil; err = g.write(fs) {
			a.log.Error("global tables: applying a fetch failed; retrying it", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// close stops the follower and closes the client and the stores.
func (g *globals) close() {
	if g.stop != nil {
		g.stop()
		<-g.done
	}
	if g.cl != nil {
		g.cl.Close()
	}
	for _, e := range g.engines {
		e.Close()
	}
}
