package txn

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Invariant 3: every commit is fenced by the group generation, including
// one that carries records but no input offsets (wall-clock punctuation,
// processing-time timers, idle-timeout watermarks).
//
// franz-go's GroupTransactSession.End sends a TxnOffsetCommit only for the
// partitions whose polled position moved since the last commit, and
// heartbeats only if it sent one. A transaction with nothing polled is
// therefore checked by nobody: the transactional id is the instance's own,
// so the member that took its partitions over does not fence its producer
// either, and a zombie (an instance frozen past its session timeout, then
// resumed) commits what it produced from its stale state. End therefore
// adds the committed offset of every partition the member holds to the
// TxnOffsetCommit (committing an offset again changes nothing), so that
// the coordinator checks the generation and member of every commit and
// aborts the zombie's. The offsets also make the transaction pending on
// those partitions, so a new owner's stable offset fetch (KIP-447) waits
// until it is decided.

// fenceKey carries extra fencing offsets in End's context.
type fenceKey struct{}

// WithFence returns ctx carrying offsets for End to commit besides the
// session's own: for partitions the caller owns that have neither a
// committed offset nor a polled record, and so nothing End could fence a
// transaction with (a task whose input never had a record). Offsets the
// session knows for a partition win over these.
func WithFence(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) context.Context {
	return context.WithValue(ctx, fenceKey{}, offsets)
}

// Fenceable reports whether End can fence the open transaction with
// offsets of the session's own: some partition has a committed offset or
// a polled record. If not, a caller that produced must use WithFence.
func Fenceable(s Session) bool {
	if _, ok := s.(*eos); !ok {
		return true // nothing transactional to fence
	}
	cl := s.Client()
	return len(cl.CommittedOffsets()) > 0 || len(cl.UncommittedOffsets()) > 0
}

// fenceOffsets is what End adds to the TxnOffsetCommit: the committed
// offsets of every partition the member holds, and the caller's.
func fenceOffsets(ctx context.Context, cl *kgo.Client) map[string]map[int32]kgo.EpochOffset {
	fence := cl.CommittedOffsets()
	extra, _ := ctx.Value(fenceKey{}).(map[string]map[int32]kgo.EpochOffset)
	for t, ps := range extra {
		for p, o := range ps {
			if _, ok := fence[t][p]; ok {
				continue
			}
			if fence == nil {
				fence = map[string]map[int32]kgo.EpochOffset{}
			}
			if fence[t] == nil {
				fence[t] = map[int32]kgo.EpochOffset{}
			}
			fence[t][p] = o
		}
	}
	return fence
}

// addFence adds to req every offset of fence for a partition req does not
// commit already (those it does are the polled positions, newer).
func addFence(req *kmsg.TxnOffsetCommitRequest, fence map[string]map[int32]kgo.EpochOffset) {
	for topic, ps := range fence {
		i := -1
		for j := range req.Topics {
			if req.Topics[j].Topic == topic {
				i = j
				break
			}
		}
		if i < 0 {
			t := kmsg.NewTxnOffsetCommitRequestTopic()
			t.Topic = topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
		}
		rt := &req.Topics[i]
	next:
		for p, o := range ps {
			for _, have := range rt.Partitions {
				if have.Partition == p {
					continue next
				}
			}
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, o.Offset, o.Epoch
			// As franz-go's own: the member id is the metadata.
			rp.Metadata = &req.MemberID
			rt.Partitions = append(rt.Partitions, rp)
		}
	}
}
