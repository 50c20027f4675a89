package processor

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// mergeRec is a record of partition p at offset o with timestamp ts (ms).
func mergeRec(p int32, o, ts int64) *kgo.Record {
	return &kgo.Record{Partition: p, Offset: o, Timestamp: time.UnixMilli(ts)}
}

// mergeParts builds one fetched partition per slice of timestamps.
func mergeParts(tss ...[]int64) [][]*kgo.Record {
	parts := make([][]*kgo.Record, len(tss))
	for p, ts := range tss {
		for o, t := range ts {
			parts[p] = append(parts[p], mergeRec(int32(p), int64(o), t))
		}
	}
	return parts
}

// merged runs processMerged over parts and returns the records in the
// order it processed them, as "p/o".
func merged(t *testing.T, parts [][]*kgo.Record) []string {
	t.Helper()
	var got []string
	n, err := processMerged(func(r *kgo.Record) error {
		got = append(got, fmt.Sprintf("%d/%d", r.Partition, r.Offset))
		return nil
	}, parts)
	if err != nil || n != len(got) {
		t.Fatalf("processMerged = %d, %v after %d records", n, err, len(got))
	}
	return got
}

func TestProcessMergedOrder(t *testing.T) {
	cases := []struct {
		name string
		ts   [][]int64
		want []string
	}{
		{"interleaved", [][]int64{{1, 4, 5}, {2, 3, 6}}, []string{"0/0", "1/0", "1/1", "0/1", "0/2", "1/2"}},
		// Equal timestamps go to the earlier partition in the fetch,
		// whichever partition number it has.
		{"ties to the earlier partition", [][]int64{{7, 7}, {7}, {7}}, []string{"0/0", "0/1", "1/0", "2/0"}},
		// A partition's own order stands even where its timestamps go
		// back: its record at 1 waits behind its record at 5.
		{"a partition's order kept", [][]int64{{5, 1}, {3}}, []string{"1/0", "0/0", "0/1"}},
		{"empty partitions", [][]int64{{}, {2}, nil, {1}}, []string{"3/0", "1/0"}},
		{"one partition, timestamps back", [][]int64{{9, 2, 5}}, []string{"0/0", "0/1", "0/2"}},
		{"nothing", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := merged(t, mergeParts(c.ts...)); !slices.Equal(got, c.want) {
				t.Fatalf("order %v, want %v", got, c.want)
			}
		})
	}
}

// TestProcessMergedProperties merges random fetches (partitions of 0 to 40
// records, timestamps from a small range so that ties are common, going
// back within a partition as often as forward) and checks the order
// against its definition rather than against another merge: every record
// once; each partition in its own order; and each record taken was, among
// the partitions' next records at that point, the one of least timestamp,
// of the earliest partition among equals.
func TestProcessMergedProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 5))
	for round := range 500 {
		parts := make([][]*kgo.Record, rng.IntN(5)+1)
		total := 0
		for p := range parts {
			for o := range rng.IntN(41) {
				parts[p] = append(parts[p], mergeRec(int32(p), int64(o), rng.Int64N(10)))
				total++
			}
		}
		lens := make([]int, len(parts))
		for p := range parts {
			lens[p] = len(parts[p])
		}
		var got []*kgo.Record
		n, err := processMerged(func(r *kgo.Record) error { got = append(got, r); return nil }, parts)
		if err != nil || n != total || len(got) != total {
			t.Fatalf("round %d: %d records, processMerged = %d, %v, processed %d", round, total, n, err, len(got))
		}
		for p := range parts {
			if len(parts[p]) != lens[p] {
				t.Fatalf("round %d: the caller's partition %d changed from %d records to %d", round, p, lens[p], len(parts[p]))
			}
		}
		next := make([]int, len(parts)) // each partition's next record
		for i, r := range got {
			p := int(r.Partition)
			if next[p] >= len(parts[p]) || parts[p][next[p]] != r {
				t.Fatalf("round %d: record %d is %d/%d, not partition %d's next (offset %d)", round, i, r.Partition, r.Offset, p, next[p])
			}
			for q := range parts {
				if q == p || next[q] >= len(parts[q]) {
					continue
				}
				head := parts[q][next[q]].Timestamp
				if head.Before(r.Timestamp) || (head.Equal(r.Timestamp) && q < p) {
					t.Fatalf("round %d: record %d is %d/%d at %d, but partition %d's next is at %d",
						round, i, r.Partition, r.Offset, r.Timestamp.UnixMilli(), q, head.UnixMilli())
				}
			}
			next[p]++
		}
	}
}

// TestProcessMergedStopsAtTheFirstError: the count is of the records
// before the failing one, the error is the process's, and nothing runs
// after it, with one partition (which skips the merge) and with several.
func TestProcessMergedStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	for _, parts := range [][][]int64{{{1, 2, 3, 4}}, {{1, 3}, {2, 4}}} {
		calls := 0
		n, err := processMerged(func(r *kgo.Record) error {
			if calls++; calls == 3 {
				return boom
			}
			return nil
		}, mergeParts(parts...))
		if n != 2 || !errors.Is(err, boom) || calls != 3 {
			t.Fatalf("%v: processMerged = %d, %v after %d calls; want 2, boom after 3", parts, n, err, calls)
		}
	}
}
