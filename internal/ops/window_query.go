package ops

import (
	"fmt"
	"math"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// WindowsOf calls fn with the data key and the value of each window of the
// key encoded as kb in the window store st, in either layout, oldest first:
// laid out by key, one prefix scan; laid out by start (Window), one lookup
// for each start the store holds, found by seeking past the one before, so
// a query costs the number of starts open, not the size of the store. The
// key passed to fn is valid only during the call.
func WindowsOf(st *store.Staged, kb []byte, fn func(key, val []byte) error) error {
	pre := layout.WindowKeyPrefix(kb)
	if err := st.Range(pre, layout.PrefixEnd(pre), fn); err != nil {
		return err
	}
	from, end := []byte{layout.WindowByStart}, []byte{layout.WindowByStart + 1}
	var key []byte
	for {
		k, _, ok, err := st.First(from, end)
		if err != nil || !ok {
			return err
		}
		if len(k) < 9 {
			return fmt.Errorf("%w: window store %s: key of %d bytes", window.ErrCorrupt, st.Name(), len(k))
		}
		start := layout.ReadTime(k[1:9])
		key = layout.StartKey(key[:0], kb, start)
		v, ok, err := st.Get(key)
		if err != nil {
			return err
		}
		if ok {
			if err := fn(key, v); err != nil {
				return err
			}
		}
		if start == math.MaxInt64 {
			return nil
		}
		from = layout.AppendTime(from[:1], start+1)
	}
}
