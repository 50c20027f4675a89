package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/task"
	"github.com/sluice-streams/sluice/store"
)

// restoreBatch is how many changelog records go into one engine batch.
const restoreBatch = 4096

// restore brings eng up to the committed end of its changelog partition,
// replaying only the tail past the engine's checkpoint (invariant 2 makes the
// checkpoint trustworthy). It reads with read_committed (invariant 4) and
// first waits until no transaction is open on the partition, so that a
// transaction of the previous owner that is still being decided cannot be
// missed.
//
// With src set, the topic is a source topic that is the store's changelog:
// it is replayed up to the offset the application's group committed (what
// processing reached), read with RequireStable so that a previous owner's
// transaction still committing that offset is waited for, keeping only the
// records src accepts.
//
// clientOpts completes the options of restore's consumer with the seed
// brokers and the application's ClientOptions (config.kgoOpts).
//
// Where it resumes is resumeFrom's rule (checkpoint.go), shared with the
// standby follower: a checkpoint outside the log (Kafka Streams' corrupted
// task) is logged as a warning naming the store, and the store is wiped and
// restored in full.
// prog hears how far it got after every batch.
func restore(ctx context.Context, adm *kadm.Client, clientOpts func(...kgo.Opt) []kgo.Opt, topic string, p int32, eng store.Engine, maxWait time.Duration, src *sourceChangelog, prog *restoreProgress) (restored int64, err error) {
	deadline := time.Now().Add(maxWait)
	var end int64
	if src != nil {
		if end, err = stableCommitted(ctx, adm, src.group, topic, p, deadline); err != nil {
			return 0, err
		}
	}
	for src == nil {
		hw, err := listOffset(ctx, adm.ListEndOffsets, topic, p)
		if err != nil {
			return 0, err
		}
		lso, err := listOffset(ctx, adm.ListCommittedOffsets, topic, p)
		if err != nil {
			return 0, err
		}
		if lso == hw {
			end = hw
			break
		}
		if time.Now().After(deadline) {
			// Another producer's transaction, which its coordinator
			// aborts after its timeout: a later session may find
			// the partition settled.
			return 0, errRetryable{fmt.Errorf("processor: restore %s/%d: a transaction stayed open for %v (last stable offset %d < high watermark %d)", topic, p, maxWait, lso, hw)}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return restoreTo(ctx, adm, clientOpts, topic, p, eng, end, deadline, src, prog)
}

// restoreTo is restore with the end known: it brings eng up to end (the
// records below it), resuming past the engine's checkpoint. Savepoints
// (savepoint.go) replay a changelog up to the end offset of their cut.
func restoreTo(ctx context.Context, adm *kadm.Client, clientOpts func(...kgo.Opt) []kgo.Opt, topic string, p int32, eng store.Engine, end int64, deadline time.Time, src *sourceChangelog, prog *restoreProgress) (restored int64, err error) {
	log, storeName := prog.log, prog.store
	start, err := listOffset(ctx, adm.ListStartOffsets, topic, p)
	if err != nil {
		return 0, err
	}
	cp, err := eng.Checkpoint()
	if err != nil {
		return 0, err
	}
	rp := resumeFrom(cp, start, end)
	if rp.wipe {
		// The local copy is not what the log says, so it must not be
		// served (Kafka Streams' corrupted task): wipe it and restore
		// everything.
		log.Warn("local store is inconsistent with its changelog (was the application reset without wiping its state?): wiping it and restoring in full",
			"store", storeName, "changelog", topic, "partition", p, "why", rp.why,
			"local_checkpoint", cp, "log_start", start, "log_end", end)
		if err := eng.Wipe(); err != nil {
			return 0, fmt.Errorf("processor: restore %s/%d: wipe inconsistent store %s: %w", topic, p, storeName, err)
		}
	}
	from := rp.from
	if from >= end {
		return 0, nil
	}
	cl, err := kgo.NewClient(clientOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // the last offset below the end is often a commit marker
	)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	batch := make([]store.Write, 0, restoreBatch)
	// The replay ends when the consumer's position reaches end, not when
	// a record at end-1 arrives: the records just below end may be gone
	// (compacted away, aborted and so never shown to a read_committed
	// reader, deleted), and then none ever does. The position is past
	// every record delivered, past a record at or beyond end (the log
	// goes on after a gap), and at least the log start the fetch reports
	// (a partition emptied by retention or DeleteRecords).
	pos := from
	last := from - 1 // the last offset applied, for the checkpoint
	prog.update(0, end-from)
	for pos < end {
		pctx, cancel := context.WithDeadline(ctx, deadline.Add(time.Minute))
		fs := cl.PollFetches(pctx)
		cancel()
		var ferr error
		fs.EachError(func(t string, part int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("processor: restore %s/%d: %w", t, part, err))
		})
		if ferr != nil {
			return restored, ferr
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			pos = max(pos, fp.LogStartOffset)
		})
		for _, r := range fs.Records() {
			pos = max(pos, r.Offset+1)
			if r.Offset >= end {
				break
			}
			last = r.Offset
			if r.Attrs.IsControl() || src != nil && !src.accepts(r.Key, r.Value) {
				continue
			}
			if src == nil {
				// A changelog's: it may drop a range or hold a pack.
				var err error
				if batch, err = task.AppendChangelogWrites(batch, r); err != nil {
					return restored, err
				}
			} else {
				batch = append(batch, store.Write{Key: r.Key, Value: r.Value})
			}
			restored++
			if len(batch) >= restoreBatch {
				if err := eng.Apply(batch, last); err != nil {
					return restored, err
				}
				batch = batch[:0]
				prog.update(restored, end-last-1)
			}
		}
	}
	// The copy now reflects everything below end, gaps included: the next
	// restore resumes at end.
	if err := eng.Apply(batch, end-1); err != nil {
		return restored, err
	}
	prog.update(restored, 0)
	return restored, nil
}

// restoreProgress follows the restore of one store of a task: it reports
// every step to the task's status and, every few seconds, logs a line with
// the rate and the time left.
type restoreProgress struct {
	task, store string
	log         *slog.Logger
	report      func(restored, remaining int64) // records of this store
	start, last time.Time
}

// restoreLogEvery is how often a restore logs its progress.
const restoreLogEvery = 5 * time.Second

func (p *restoreProgress) update(restored, remaining int64) {
	now := time.Now()
	if p.start.IsZero() {
		p.start, p.last = now, now
	}
	if p.report != nil {
		p.report(restored, remaining)
	}
	if now.Sub(p.last) < restoreLogEvery || remaining == 0 {
		return
	}
	p.last = now
	rate := float64(restored) / now.Sub(p.start).Seconds()
	eta := "unknown"
	if rate > 0 {
		eta = (time.Duration(float64(remaining)/rate) * time.Second).Round(time.Second).String()
	}
	p.log.Info("restoring", "task", p.task, "store", p.store, "restored", restored, "remaining", remaining,
		"records_per_second", int64(rate), "eta", eta)
}

// sourceChangelog says how to restore a store from the source topic it
// mirrors.
type sourceChangelog struct {
	group   string
	accepts func(key, value []byte) bool
}

func listOffset(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string, p int32) (int64, error) {
	lo, err := list(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("processor: list offsets of %s: %w", topic, err)
	}
	o, ok := lo.Lookup(topic, p)
	if !ok {
		return 0, fmt.Errorf("processor: list offsets of %s: partition %d missing", topic, p)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("processor: list offsets of %s/%d: %w", topic, p, o.Err)
	}
	return o.Offset, nil
}

// stableCommitted returns the offset group committed on topic/p (0 if
// none), with RequireStable (KIP-447): an offset commit of a transaction
// still open (the previous owner's, right after a hand-off) is waited for
// until deadline rather than read as the older offset before it. Without
// that, the records between the two offsets would be in neither the
// restored table (it stops at the old offset) nor the new owner's input (it
// starts at the new one).
func stableCommitted(ctx context.Context, adm *kadm.Client, group, topic string, p int32, deadline time.Time) (int64, error) {
	committed, err := stableOffsets(ctx, adm, group, deadline)
	if err != nil {
		if r, ok := err.(errRetryable); ok {
			return 0, errRetryable{fmt.Errorf("processor: restore from %s/%d: %w", topic, p, r.err)}
		}
		return 0, fmt.Errorf("processor: restore from %s/%d: committed offsets: %w", topic, p, err)
	}
	if o, ok := committed.Lookup(topic, p); ok && o.At > 0 {
		return o.At, nil
	}
	return 0, nil
}
