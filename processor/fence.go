package processor

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/txn"
)

// fence returns ctx for the session's End when the open transaction
// carries records but the session has no input offset to fence it with
// (invariant 3, txn/fence.go): no partition of the instance has a
// committed offset or a polled record, as when its tasks' inputs never had
// one and only punctuations, timers or idle watermarks produced. It then
// commits the start offsets of its tasks' input partitions — where its
// consumer started, and where a new owner would start too — so that the
// coordinator checks the generation all the same.
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
	starts, err := m.adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return ctx, fmt.Errorf("processor: start offsets to fence the transaction with: %w", err)
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	starts.Each(func(o kadm.ListedOffset) {
		if !owned[o.Topic][o.Partition] {
			return
		}
		if offsets[o.Topic] == nil {
			offsets[o.Topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[o.Topic][o.Partition] = kgo.EpochOffset{Epoch: o.LeaderEpoch, Offset: o.Offset}
	})
	m.a.log.Debug("fencing a transaction without input offsets with its partitions' start offsets", "offsets", fmt.Sprint(offsets))
	return txn.WithFence(ctx, offsets), nil
}
