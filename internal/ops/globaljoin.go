package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
)

// GlobalJoinConfig configures a stream–global-table join (NewGlobalJoin).
type GlobalJoinConfig[K, V, GK, GV, VR any] struct {
	// Table names the global table; Key and Value are its serdes.
	Table string
	Key   serde.Serde[GK]
	Value serde.Serde[GV]
	// KeyOf extracts a record's row key. Join gets ok=false when the table
	// has no row; it drops the record by returning keep=false.
	KeyOf func(K, V) GK
	Join  func(k K, v V, gv GV, ok bool) (out VR, keep bool)
}

// GlobalJoin is the runtime of a stream–global-table join: it looks each
// record's row up in the global table as it is when the record is
// processed (not part of the transaction) and forwards the joined value.
type GlobalJoin[K, V, GK, GV, VR any] struct {
	cfg GlobalJoinConfig[K, V, GK, GV, VR]
	ctx exec.Context
	eng store.Engine
}

// NewGlobalJoin returns the runtime of the join cfg.
func NewGlobalJoin[K, V, GK, GV, VR any](cfg GlobalJoinConfig[K, V, GK, GV, VR]) *GlobalJoin[K, V, GK, GV, VR] {
	return &GlobalJoin[K, V, GK, GV, VR]{cfg: cfg}
}

func (p *GlobalJoin[K, V, GK, GV, VR]) Init(ctx exec.Context) error {
	p.ctx, p.eng = ctx, ctx.Global(p.cfg.Table)
	if p.eng == nil {
		// The prefix is topology's: the message is what users have seen.
		return fmt.Errorf("topology: global table %q is not available", p.cfg.Table)
	}
	return nil
}

func (p *GlobalJoin[K, V, GK, GV, VR]) Process(r exec.Record) error {
	if r.Value == exec.Tombstone {
		p.ctx.CountIgnoredDelete() // a delete joins nothing
		return nil
	}
	k, v := r.Key.(K), r.Value.(V)
	kb, err := p.cfg.Key.Encode(p.cfg.KeyOf(k, v))
	if err != nil {
		return fmt.Errorf("global table %s: key: %w", p.cfg.Table, err)
	}
	b, ok, err := p.eng.Get(kb)
	if err != nil {
		return err
	}
	var gv GV
	if ok {
		if gv, err = p.cfg.Value.Decode(b); err != nil {
			return fmt.Errorf("global table %s: value: %w", p.cfg.Table, err)
		}
	}
	out, keep := p.cfg.Join(k, v, gv, ok)
	if !keep {
		return nil
	}
	r.Value = out
	return p.ctx.Forward(r)
}

func (p *GlobalJoin[K, V, GK, GV, VR]) Close() error { return nil }
