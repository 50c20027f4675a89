package integration

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// unconsumed finds the committed records that group has not consumed yet in
// topics: for each partition where one waits, the offset of the first.
//
// A group that read a transactional topic to its end has committed the
// offset after its last record, which may still be short of the last
// stable offset by the markers of the transactions that wrote the tail
// (groupview's doc says the same of lag). So the offsets alone cannot tell
// a topic that is consumed from one that is not; this reads what lies
// between the committed offset and the last stable offset, as a
// read_committed consumer sees it, and reports the first record that is
// neither a marker nor aborted. A partition the group has no offset for
// is read from its start.
func unconsumed(ctx context.Context, addrs []string, adm *kadm.Client, group string, topics ...string) (map[string]map[int32]int64, error) {
	stable, err := listOffsets(ctx, adm.ListCommittedOffsets, topics)
	if err != nil {
		return nil, err
	}
	starts, err := listOffsets(ctx, adm.ListStartOffsets, topics)
	if err != nil {
		return nil, err
	}
	committed, err := groupOffsets(ctx, adm, group)
	if err != nil {
		return nil, err
	}

	type tp struct {
		topic string
		p     int32
	}
	from := make(map[string]map[int32]kgo.Offset)
	reading := make(map[tp]int64) // the partitions still read, and their ends
	for topic, ps := range stable {
		for p, end := range ps {
			at := starts[topic][p]
			if o, ok := committed.Lookup(topic, p); ok && o.Err == nil {
				at = max(at, o.At)
			}
			if at >= end {
				continue
			}
			if from[topic] == nil {
				from[topic] = make(map[int32]kgo.Offset)
			}
			from[topic][p] = kgo.NewOffset().At(at)
			reading[tp{topic, p}] = end
		}
	}
	waiting := make(map[string]map[int32]int64)
	if len(reading) == 0 {
		return waiting, nil
	}

	rd, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumePartitions(from),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for len(reading) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading what group %s has not consumed: %d partitions not read to their end: %w", group, len(reading), err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("reading %s/%d: %w", t, p, err))
		})
		if ferr != nil {
			return nil, ferr
		}
		for _, r := range fs.Records() {
			at := tp{r.Topic, r.Partition}
			end, ok := reading[at]
			switch {
			case !ok:
			case r.Offset < end && !r.Attrs.IsControl():
				if waiting[r.Topic] == nil {
					waiting[r.Topic] = make(map[int32]int64)
				}
				waiting[r.Topic][r.Partition] = r.Offset
				delete(reading, at)
			case r.Offset >= end-1: // a marker at the end, or past it
				delete(reading, at)
			}
		}
	}
	return waiting, nil
}

// groupOffsets returns group's committed offsets: none for a group that
// never committed, which may not exist at all.
func groupOffsets(ctx context.Context, adm *kadm.Client, group string) (kadm.OffsetResponses, error) {
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetching committed offsets of group %s: %w", group, err)
	}
	return committed, nil
}
