package topology

import (
	"encoding/json"
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// kvQuery is the erased read side of a key-value store (exec.StoreQuery),
// nil without serdes (register reports that).
func kvQuery[K, V any](ks serde.Serde[K], vs serde.Serde[V]) *exec.StoreQuery {
	if ks == nil || vs == nil {
		return nil
	}
	return &exec.StoreQuery{
		KeyFromText: keyFromText(ks),
		Key:         func(b []byte) (any, error) { return ks.Decode(b) },
		Value:       func(b []byte) (any, error) { return vs.Decode(b) },
	}
}

// windowQuery is the erased read side of a window or session store, read
// through internal/layout (WindowView).
func windowQuery[K, A any](m Materialization[K, A]) *exec.StoreQuery {
	q := kvQuery(m.ks, m.vs)
	if q == nil {
		return nil
	}
	q.Value = nil // values are window states, read by Windows
	q.Windows = func(s *store.Staged, kb []byte, fn func(start, end int64, value any) error) error {
		w := m.WindowView(s)
		pre := layout.WindowKeyPrefix(kb)
		return s.Range(pre, layout.PrefixEnd(pre), func(key, val []byte) error {
			return w.each(key, val, func(_ Windowed[K], b window.Bounds, a A) error { return fn(b.Start, b.End, a) })
		})
	}
	return q
}

// keyFromText parses the text form of a key: the text itself for string and
// []byte keys, JSON otherwise (a number for int64 keys, an object for
// struct keys).
func keyFromText[K any](ks serde.Serde[K]) func(string) ([]byte, error) {
	return func(text string) ([]byte, error) {
		var k K
		switch p := any(&k).(type) {
		case *string:
			*p = text
		case *[]byte:
			*p = []byte(text)
		default:
			if err := json.Unmarshal([]byte(text), &k); err != nil {
				return nil, fmt.Errorf("topology: key %q is not the JSON of a %T: %w", text, k, err)
			}
		}
		return ks.Encode(k)
	}
}
