package ops

import (
	"bytes"
	"fmt"
	"math"
	"slices"

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
	keys, _, err := rangeEntries(st, indexFrom(prefix, from), layout.DueEnd(prefix, now), false, nil)
	return keys, err
}

// rangeScratch is what rangeEntries reuses from one call to the next: the
// buffer where it gathers the entries' bytes, where each ends in it, and
// the lists it returns (which hold the last call's copies).
type rangeScratch struct {
	buf        []byte
	ends       []int
	keys, vals [][]byte
}

// maxScratchEntries bounds what a rangeScratch keeps: a larger scan, rare
// (a backlog's first watermark), leaves nothing behind for the next.
const maxScratchEntries = 1 << 14

// rangeEntries returns copies of the keys in [from, to) of st, in order,
// and, if values, copies of their values. With sc, the lists are sc's,
// valid until the next call with it; the copies are always the caller's,
// as a decoded key or aggregate may alias them (serde.Bytes).
func rangeEntries(st *store.Staged, from, to []byte, values bool, sc *rangeScratch) (keys, vals [][]byte, err error) {
	// The keys and values are copied into one buffer, not one allocation
	// each: a window store's expiry closes about a window a record. With
	// sc they are gathered in its buffer, then copied into one allocation
	// of their size, instead of into a buffer grown as they come.
	var scratch rangeScratch
	if sc != nil {
		scratch = *sc
	}
	buf, ends := scratch.buf[:0], scratch.ends[:0]
	err = st.Range(from, to, func(k, v []byte) error {
		buf = append(buf, k...)
		ends = append(ends, len(buf))
		if values {
			buf = append(buf, v...)
			ends = append(ends, len(buf))
		}
		return nil
	})
	n, nv := len(ends), 0
	if values {
		n /= 2
		nv = n
	}
	// What the lists hold past n are the last call's copies: let go.
	keys, vals = reuse(scratch.keys, n), reuse(scratch.vals, nv)
	if sc != nil {
		*sc = rangeScratch{buf: buf, ends: ends, keys: keys, vals: vals}
		if n > maxScratchEntries {
			*sc = rangeScratch{}
		}
		buf = bytes.Clone(buf)
	}
	if err != nil || n == 0 {
		return nil, nil, err
	}
	if !values {
		vals = nil
	}
	start := 0
	for i := range n {
		end := ends[0]
		keys[i], start, ends = buf[start:end:end], end, ends[1:]
		if values {
			end = ends[0]
			vals[i], start, ends = buf[start:end:end], end, ends[1:]
		}
	}
	return keys, vals, nil
}

// reuse returns list, cleared past n, grown to n entries if it has fewer.
func reuse(list [][]byte, n int) [][]byte {
	clear(list[min(n, len(list)):])
	return slices.Grow(list[:0], n)[:n]
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
