package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/window"
)

// session places a record among its key's sessions, merging those it
// bridges (Kafka Streams' session semantics, window.Sessions.Merge).
func (p *Window[K, V, A]) session(k K, v V, ts int64, hs []exec.Header, kb []byte, wm int64) error {
	var existing []window.Bounds
	all := map[window.Bounds]WindowState[A]{}
	pre := layout.WindowKeyPrefix(kb)
	err := p.s.st.Range(pre, layout.PrefixEnd(pre), func(key, val []byte) error {
		w, err := p.s.Decode(layout.ReadTime(key[len(key)-8:]), val)
		if err != nil {
			return err
		}
		if p.closeAt(w.Bounds) <= wm {
			// Closed for this record, if not yet removed: whether it
			// still is depends on how far the task's own watermark
			// got, which depends on commits and on how writers
			// interleave; the record's watermark does not (invariant 5).
			return nil
		}
		existing = append(existing, w.Bounds)
		all[w.Bounds] = w
		return nil
	})
	if err != nil {
		return err
	}
	merged, absorbed := p.sessions.Merge(existing, ts)
	if p.closeAt(merged) <= wm {
		// Only a new session can be closed already: one that absorbs a
		// stored (so still open) session closes no earlier than it.
		return p.s.Late(exec.Record{Key: k, Value: v, Timestamp: ts, Headers: hs})
	}
	key := layout.WindowKey(nil, kb, merged.Start)
	w, isOld := all[merged]
	if !isOld {
		w = NewWindowState[A](merged)
		for _, b := range absorbed {
			a := all[b]
			// The absorbed session starting where the merged one does
			// has its key: its elements stay where they are.
			same := a.Bounds.Start == merged.Start
			if p.elements != nil {
				if same {
					w.Seq, w.HasAgg = max(w.Seq, a.Seq), w.HasAgg || a.HasAgg
				} else if err := p.moveElements(layout.WindowKey(nil, kb, a.Bounds.Start), key, &w); err != nil {
					return err
				}
			} else {
				switch {
				case !a.HasAgg:
				case w.HasAgg:
					w.Agg = p.merge(k, w.Agg, a.Agg)
				default:
					w.Agg, w.HasAgg = a.Agg, true
				}
			}
			w.Count += a.Count
			w.SinceFire += a.SinceFire
			if err := p.remove(kb, a, same, false); err != nil {
				return err
			}
			if err := p.retract(k, a); err != nil {
				return err
			}
		}
	}
	if err := p.add(k, v, ts, key, &w); err != nil {
		return err
	}
	return p.element(k, key, w, !isOld, false, ts, wm)
}

// retract tells downstream that session a, merged into another, is gone,
// if a result of it went out: what its stored flags say, for every
// trigger, whatever watermark the merging record carries. (Its elements'
// results, with ProcessWindows, are a stream, which has nothing to
// retract.)
func (p *Window[K, V, A]) retract(k K, a WindowState[A]) error {
	if p.elements != nil {
		return nil
	}
	if !a.Emitted {
		return nil
	}
	old := any(a.Agg)
	if a.shown != nil {
		v, err := p.s.vs.Decode(a.shown)
		if err != nil {
			return fmt.Errorf("store %s: value: %w", p.s.name, err)
		}
		old = v
	}
	return p.s.ForwardValue(k, a.Bounds, exec.Change{Old: old})
}
