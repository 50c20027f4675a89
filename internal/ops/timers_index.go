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
// at or before now.
func DueIndex(st *store.Staged, prefix byte, now int64) ([][]byte, error) {
	var keys [][]byte
	err := st.Range([]byte{prefix}, layout.DueEnd(prefix, now), func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	return keys, err
}

// FirstIndex is the earliest time in the time index prefix, math.MaxInt64
// if it is empty.
func FirstIndex(st *store.Staged, prefix byte) (int64, error) {
	k, _, ok, err := st.First([]byte{prefix}, []byte{prefix + 1})
	if err != nil || !ok {
		return math.MaxInt64, err
	}
	if len(k) < 9 {
		return 0, fmt.Errorf("ops: index key of %d bytes in store %s", len(k), st.Name())
	}
	return layout.ReadTime(k[1:9]), nil
}
