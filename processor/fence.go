package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/txn"
)

// fence returns ctx for the session's End when the open transaction
// carries records but the session has no input offset to fence it with
// (invariant 3, txn/fence.go): the client knows no committed offset and
// has polled no record. That is so when the tasks' inputs never had a
// record and only punctuations, timers or idle watermarks produced, and
// also right after an assignment, before the client's own fetch of the
// group's offsets has answered (the broker holds it back while another
// transaction's offsets are pending) — a restored task announcing its
// watermark to a repartition topic produces then. It commits what the
// group has committed for its tasks' input partitions, fetched here, and
// where the group has nothing, their start offsets (where its consumer
// starts, and a new owner would too), so that the coordinator checks the
// generation all the same and no offset moves. (Committing start offsets
// for partitions the group had committed, as this did before, moved them
// back: the consumer then read its input again on top of the state that
// already counted it.)
func (m *member) fence(ctx context.Context) (context.Context, error) {
	if !m.sent.Load() || txn.Fenceable(m.sess) {
		return ctx, nil
	}
	owned := map[string]map[int32]bool{}
	var topics []string
	for topic, sub := range m.a.subOf {
		for id := range m.tasks {
			if id.Sub != sub || m.own.isClosing(id) {
				continue
			}
			if owned[topic] == nil {
				owned[topic] = map[int32]bool{}
				topics = append(topics, topic)
			}
			owned[topic][id.Partition] = true
		}
	}
	if len(topics) == 0 {
		return ctx, fmt.Errorf("processor: records to commit without a task to fence them with")
	}
	committed, err := stableOffsets(ctx, m.adm, m.a.cfg.appID, time.Now().Add(m.a.cfg.txnTimeout/2))
	if err != nil {
		return ctx, fmt.Errorf("processor: committed offsets to fence the transaction with: %w", err)
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	add := func(topic string, p int32, o kgo.EpochOffset) {
		if offsets[topic] == nil {
			offsets[topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[topic][p] = o
	}
	var bare []string // topics with an owned partition the group has no offset for
	for _, topic := range topics {
		for p := range owned[topic] {
			if o, ok := committed.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
				add(topic, p, kgo.EpochOffset{Epoch: o.LeaderEpoch, Offset: o.At})
			} else if !slices.Contains(bare, topic) {
				bare = append(bare, topic)
			}
		}
	}
	if len(bare) > 0 {
		starts, err := m.adm.ListStartOffsets(ctx, bare...)
		if err == nil {
			err = starts.Error()
		}
		if err != nil {
			return ctx, fmt.Errorf("processor: start offsets to fence the transaction with: %w", err)
		}
		starts.Each(func(o kadm.ListedOffset) {
			if _, done := offsets[o.Topic][o.Partition]; owned[o.Topic][o.Partition] && !done {
				add(o.Topic, o.Partition, kgo.EpochOffset{Epoch: o.LeaderEpoch, Offset: o.Offset})
			}
		})
	}
	m.a.log.Debug("fencing a transaction without input offsets of the client's own with the group's", "offsets", fmt.Sprint(offsets))
	return txn.WithFence(ctx, offsets), nil
}

// stableOffsets returns the offsets group committed, with RequireStable
// (KIP-447): while a transaction's offset commit is pending the broker
// answers UNSTABLE_OFFSET_COMMIT, and the fetch is tried again until
// deadline rather than read as the older offsets before it. A group the
// coordinator does not know has committed nothing.
func stableOffsets(ctx context.Context, adm *kadm.Client, group string, deadline time.Time) (kadm.OffsetResponses, error) {
	for {
		rs, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err == nil {
			rs.EachError(func(o kadm.OffsetResponse) {
				if err == nil {
					err = o.Err
				}
			})
		}
		switch {
		case err == nil:
			return rs, nil
		case errors.Is(err, kerr.GroupIDNotFound):
			return nil, nil
		case !errors.Is(err, kerr.UnstableOffsetCommit):
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, errRetryable{fmt.Errorf("the group's offset commit stayed pending: %w", err)}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
