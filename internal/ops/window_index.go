package ops

import (
	"math"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
)

// DueIndex lists, in order, the keys of the time index prefix (keys: the
// prefix, a time written by layout.AppendTime, anything) whose time is at
// or before now.
func DueIndex(st *store.Staged, prefix byte, now int64) ([][]byte, error) {
	var keys [][]byte
	end := []byte{prefix + 1}
	if now < math.MaxInt64 {
		end = layout.AppendTime([]byte{prefix}, now+1)
	}
	err := st.Range([]byte{prefix}, end, func(k, _ []byte) error {
		keys = append(keys, append([]byte(nil), k...))
		return nil
	})
	return keys, err
}

// FirstIndex is the earliest time in the time index prefix,
// math.MaxInt64 if it is empty.
func FirstIndex(st *store.Staged, prefix byte) (int64, error) {
	k, _, ok, err := st.First([]byte{prefix}, []byte{prefix + 1})
	if err != nil || !ok {
		return math.MaxInt64, err
	}
	return layout.ReadTime(k[1:9]), nil
}
