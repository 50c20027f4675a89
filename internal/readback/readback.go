package readback

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadCommitted returns the committed records of topic, per partition in
// offset order (partitions in turn), up to the end offsets listed when it
// starts. It stops with an error when ctx ends first. opts are added to its
// clients' options, e.g. kgo.SASL or kgo.DialTLSConfig for a secured broker.
func ReadCommitted(ctx context.Context, addrs []string, topic string, opts ...kgo.Opt) ([]*kgo.Record, error) {
	base := append([]kgo.Opt{kgo.SeedBrokers(addrs...)}, opts...)
	adm, err := kgo.NewClient(base...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("readback: list end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("readback: list end offsets of %s: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	return readTo(ctx, base, topic, left)
}

// readTo reads topic's committed records from the start of each partition
// in left up to its end there.
func readTo(ctx context.Context, base []kgo.Opt, topic string, left map[int32]int64) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(append(base[:len(base):len(base)],
		kgo.ConsumePartitions(startOf(topic, left)),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Markers end most transactional partitions: keeping them tells
		// us that a partition has been read to its end.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	byPart := map[int32][]*kgo.Record{}
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("readback: %s not read to its end (%d partitions left): %w", topic, len(left), err)
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) { ferr = fmt.Errorf("readback: %s/%d: %w", topic, p, err) })
		if ferr != nil {
			return nil, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok {
				return
			}
			if r.Offset < end && !r.Attrs.IsControl() {
				byPart[r.Partition] = append(byPart[r.Partition], r)
			}
			// A record at or past the end says the partition was read to
			// it. It may lie past it: when the end was listed inside a
			// transaction that then aborted, its records up to the end
			// never come (read_committed drops them), and its abort
			// marker comes after the end.
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	var out []*kgo.Record
	for p := int32(0); len(byPart) > 0; p++ {
		out = append(out, byPart[p]...)
		delete(byPart, p)
	}
	return out, nil
}

func startOf(topic string, parts map[int32]int64) map[string]map[int32]kgo.Offset {
	m := map[int32]kgo.Offset{}
	for p := range parts {
		m[p] = kgo.NewOffset().AtStart()
	}
	return map[string]map[int32]kgo.Offset{topic: m}
}

// Last folds records into the last value per key.
func Last(rs []*kgo.Record) map[string][]byte {
	m := make(map[string][]byte, len(rs))
	for _, r := range rs {
		m[string(r.Key)] = r.Value
	}
	return m
}
