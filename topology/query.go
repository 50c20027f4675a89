package topology

import (
	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/ops"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// windowQuery is the erased read side of a window or session store, read
// through internal/layout (WindowView).
func windowQuery[K, A any](m Materialization[K, A]) *exec.StoreQuery {
	q := ops.KVQuery(m.ks, m.vs)
	if q == nil {
		return nil
	}
	q.Value = nil // values are window states, read by Windows
	q.Windows = func(s *store.Staged, kb []byte, fn func(start, end int64, value any) error) error {
		w := m.WindowView(s)
		return ops.WindowsOf(s, kb, func(key, val []byte) error {
			return w.each(key, val, func(_ Windowed[K], b window.Bounds, a A) error { return fn(b.Start, b.End, a) })
		})
	}
	return q
}
