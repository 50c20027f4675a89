package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/savepoint"
	"github.com/sluice-streams/sluice/store"
)

// Taking a savepoint from the instances' Pebble checkpoints (DESIGN.md
// "Taking a savepoint", "Checkpoints"): once the cut is read, the
// coordinator asks every paused instance that said it can (paused's
// checkpoints) to checkpoint its active tasks' stores into the staging
// directory; it takes a checkpoint only if its changelog offset c is at
// the cut — c < end and nothing but transaction markers and aborted
// records in [c+1, end) — and copies every other store from its
// changelog as before. A checkpoint is a Pebble checkpoint: sstables hard
// linked when the savepoint is on the state directory's filesystem.

// spCheckpointWait bounds how long the coordinator waits for the
// instances' checkpoints before it copies the missing stores from their
// changelogs (within the savepoint's deadline). An instance answers as soon
// as its checkpoints are written (milliseconds for hard links).
var spCheckpointWait = 30 * time.Second

// spNoCheckpoints makes the coordinator copy every store from its
// changelog, as with instances that predate checkpoints: for the test that
// both paths write the same savepoint.
var spNoCheckpoints = false

// spTrustCheckpoints skips the check of a checkpoint's offset against the
// cut: only for the negative control of the test that shows the check
// refuses a checkpoint taken before the cut.
var spTrustCheckpoints = false

// spTaken and spRefused count the store copies taken from checkpoints and
// the checkpoints refused as not at the cut, for tests.
var spTaken, spRefused atomic.Int64

type spKey struct {
	store     string
	partition int32
}

// checkpoints asks the instances for checkpoints of their stores, takes
// those at the cut into their place in the savepoint and returns them,
// counted and checksummed (ChangelogEnd set). What it does not take, the
// caller copies from the changelog; nothing here fails the savepoint.
func (c *coordinator) checkpoints(ctx context.Context, top *spTopology, cut *cut, replies map[string]spMessage) map[spKey]savepoint.Part {
	asked := map[string]int32{} // member → the generation it paused in
	for mem, r := range replies {
		if r.Checkpoints {
			asked[mem] = r.Generation
		}
	}
	if len(asked) == 0 {
		return nil
	}
	staging := c.w.Staging()
	token := filepath.Join(staging, spTokenFile)
	if err := os.WriteFile(token, []byte(c.id), 0o644); err != nil {
		c.log.Warn("savepoint: cannot write the staging token; copying every store from its changelog", "err", err)
		return nil
	}
	start := time.Now()
	if err := c.send(ctx, spMessage{Type: spCheckpoint, ID: c.id, Staging: staging}); err != nil {
		_ = os.Remove(token)
		c.log.Warn("savepoint: cannot ask for checkpoints; copying every store from its changelog", "err", err)
		return nil
	}
	got := c.awaitCheckpoints(ctx, asked)
	// Late instances stop at their next store (checkpointStores), and
	// nothing under spCheckpointsDir is kept.
	_ = os.Remove(token)
	defer func() { _ = os.RemoveAll(filepath.Join(staging, spCheckpointsDir)) }()

	stores := map[string]spStore{}
	for _, s := range top.Stores {
		if !s.SourceBacked {
			stores[s.Name] = s
		}
	}
	type take struct {
		key spKey
		rel string
		end int64
	}
	var takes []take
	seen := map[spKey]bool{}
	for mem, r := range got {
		for _, p := range r.Parts {
			s, ok := stores[p.Store]
			key := spKey{p.Store, p.Partition}
			if seen[key] {
				continue // two owners in one generation cannot be; keep the first
			}
			from := filepath.FromSlash(p.Dir)
			if !ok || !filepath.IsLocal(from) || !strings.HasPrefix(p.Dir, spCheckpointsDir+"/") {
				c.log.Warn("savepoint: ignoring a checkpoint of no store of the topology", "member", mem, "store", p.Store, "dir", p.Dir)
				continue
			}
			end, ok := cut.ends.Lookup(s.Changelog, p.Partition)
			if !ok {
				continue
			}
			if why := c.atCut(ctx, s.Changelog, p.Partition, p.Offset, end.Offset); why != "" {
				spRefused.Add(1)
				c.log.Warn("savepoint: a checkpoint is not at the cut; copying the store from its changelog",
					"store", p.Store, "partition", p.Partition, "member", mem, "checkpoint", p.Offset, "changelog_end", end.Offset, "why", why)
				continue
			}
			rel := savepoint.PartDir(c.cfg.appID, savepoint.TaskID(s.SubTopology, p.Partition), p.Store)
			dst := filepath.Join(staging, filepath.FromSlash(rel))
			err := os.MkdirAll(filepath.Dir(dst), 0o755)
			if err == nil {
				err = os.Rename(filepath.Join(staging, from), dst)
			}
			if err != nil {
				c.log.Warn("savepoint: cannot take a checkpoint; copying the store from its changelog", "store", p.Store, "partition", p.Partition, "err", err)
				continue
			}
			seen[key] = true
			takes = append(takes, take{key: key, rel: rel, end: end.Offset})
		}
	}
	// Count and checksum in parallel: each is a read of one store.
	out := map[spKey]savepoint.Part{}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))
	)
	for _, tk := range takes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			part, err := c.w.Adopt(tk.rel, tk.key.partition)
			if err != nil {
				c.log.Warn("savepoint: cannot read a checkpoint; copying the store from its changelog", "store", tk.key.store, "partition", tk.key.partition, "err", err)
				_ = c.w.Discard(tk.rel)
				return
			}
			part.ChangelogEnd = tk.end
			spTaken.Add(1)
			mu.Lock()
			out[tk.key] = part
			mu.Unlock()
		}()
	}
	wg.Wait()
	c.log.Info("savepoint: stores taken from the instances' checkpoints", "savepoint", c.id, "taken", len(out), "took", time.Since(start).Round(time.Millisecond))
	return out
}

// awaitCheckpoints reads the instances' checkpointed answers until every
// member asked answered for its generation, or spCheckpointWait passed.
func (c *coordinator) awaitCheckpoints(ctx context.Context, asked map[string]int32) map[string]spMessage {
	got := map[string]spMessage{}
	wctx, cancel := context.WithTimeout(ctx, spCheckpointWait)
	defer cancel()
	for len(got) < len(asked) && wctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(wctx, 200*time.Millisecond)
		fs := c.cl.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			var msg spMessage
			if json.Unmarshal(r.Value, &msg) != nil || msg.Type != spCheckpointed || msg.ID != c.id {
				return
			}
			if gen, ok := asked[msg.Member]; ok && gen == msg.Generation {
				got[msg.Member] = msg
				if msg.Error != "" {
					c.log.Info("savepoint: an instance wrote no checkpoint", "member", msg.Member, "instance", msg.Instance, "why", msg.Error)
				}
			}
		})
	}
	if len(got) < len(asked) {
		c.log.Warn("savepoint: not every instance answered the checkpoint request; copying their stores from the changelogs", "answered", len(got), "asked", len(asked))
	}
	return got
}

// atCut returns why a store copy whose changelog checkpoint is cp does not
// hold exactly the changelog below end ("" if it does): cp past the cut,
// or a record read_committed returns in [cp+1, end).
func (c *coordinator) atCut(ctx context.Context, changelog string, p int32, cp, end int64) string {
	if spTrustCheckpoints {
		return ""
	}
	if cp >= end {
		return fmt.Sprintf("checkpoint %d is at or past the cut's end %d", cp, end)
	}
	from := cp + 1 // NoCheckpoint (-1): from 0, i.e. the log start
	if cp < store.NoCheckpoint {
		return fmt.Sprintf("invalid checkpoint %d", cp)
	}
	if from >= end {
		return ""
	}
	only, err := c.onlyMarkers(ctx, changelog, p, from, end)
	if err != nil {
		return err.Error()
	}
	if !only {
		return fmt.Sprintf("committed changelog records in [%d, %d) are not in it (a checkpoint before the cut)", from, end)
	}
	return ""
}
