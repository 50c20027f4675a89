package ops

import (
	"fmt"
	"math"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
)

// Scans of a time index: keys that are an index prefix byte, a time
// (layout.AppendTime), then anything. Timers, window firings and expiry,
// sliding windows and stream-join buffers all keep such indexes.

// DueIndex lists, in order, the keys of the time index prefix whose time is
// at or before now, and at or after from: a caller that knows no key lies
// below a time (it removed them) starts there, so that the scan does not
// pass again over the keys it deleted in the open transaction, which the
// engine still holds (math.MinInt64: the whole index).
func DueIndex(st *store.Staged, prefix byte, from, now int64) ([][]byte, error) {
	keys, _, err := rangeEntries(st, indexFrom(prefix, from), layout.DueEnd(prefix, now), false)
	return keys, err
}

// rangeEntries returns copies of the keys in [from, to) of st, in order,
// and, if values, copies of their values.
func rangeEntries(st *store.Staged, from, to []byte, values bool) (keys, vals [][]byte, err error) {
	// The keys and values are copied into one buffer, not one allocation
	// each: a window store's expiry closes about a window a record.
	var buf []byte
	var ends []int // where each key ends in buf and, with values, each value after it
	err = st.Range(from, to, func(k, v []byte) error {
		buf = append(buf, k...)
		ends = append(ends, len(buf))
		if values {
			buf = append(buf, v...)
			ends = append(ends, len(buf))
		}
		return nil
	})
	if err != nil || len(ends) == 0 {
		return nil, nil, err
	}
	n := len(ends)
	if values {
		n /= 2
		vals = make([][]byte, n)
	}
	keys = make([][]byte, n)
	start := 0
	next := func() []byte {
		end := ends[0]
		b := buf[start:end:end]
		start, ends = end, ends[1:]
		return b
	}
	for i := range n {
		keys[i] = next()
		if values {
			vals[i] = next()
		}
	}
	return keys, vals, nil
}

// FirstIndex is the earliest time in the time index prefix at or after
// from (see DueIndex), math.MaxInt64 if there is none.
func FirstIndex(st *store.Staged, prefix byte, from int64) (int64, error) {
	k, _, ok, err := st.First(indexFrom(prefix, from), []byte{prefix + 1})
	if err != nil || !ok {
		return math.MaxInt64, err
	}
	if len(k) < 9 {
		return 0, fmt.Errorf("ops: index key of %d bytes in store %s", len(k), st.Name())
	}
	return layout.ReadTime(k[1:9]), nil
}

// indexFrom is the first key of the time index prefix at time from.
func indexFrom(prefix byte, from int64) []byte {
	if from == math.MinInt64 {
		return []byte{prefix}
	}
	return layout.AppendTime([]byte{prefix}, from)
}
