package ops

import "github.com/sluice-streams/sluice/internal/exec"

// StreamTableJoin joins each stream record with the table's current value
// for its key (JoinTable, LeftJoinTable): the join node is a child of the
// stream and of the table, so both share its task, and it reads the
// table's store. Table updates trigger nothing; a stream delete joins
// nothing.
type StreamTableJoin[K, V, VT, VR any] struct {
	table KVStore[K, VT]
	kv    *KV[K, VT]
	ctx   exec.Context
	join  func(K, V, VT, bool) (VR, bool)
}

// NewStreamTableJoin returns the Processor of a join with the table kept
// in table: join gets the table's value (ok=false: the key is not in the
// table) and says whether to forward its result.
func NewStreamTableJoin[K, V, VT, VR any](table KVStore[K, VT], join func(k K, v V, vt VT, ok bool) (VR, bool)) *StreamTableJoin[K, V, VT, VR] {
	return &StreamTableJoin[K, V, VT, VR]{table: table, join: join}
}

func (p *StreamTableJoin[K, V, VT, VR]) Init(ctx exec.Context) error {
	p.ctx, p.kv = ctx, p.table.Open(ctx)
	return nil
}

func (p *StreamTableJoin[K, V, VT, VR]) Process(r exec.Record) error {
	if _, fromTable := r.Value.(exec.Change); fromTable {
		return nil // table updates trigger nothing
	}
	if r.Value == exec.Tombstone {
		p.ctx.CountIgnoredDelete() // a stream's delete joins nothing
		return nil
	}
	out, keep, err := p.joinOne(r.Key.(K), r.Value.(V))
	if !keep || err != nil {
		return err
	}
	r.Value = out
	return p.ctx.Forward(r)
}

// joinOne joins a stream record with the table's row of its key, and says
// whether its result goes on.
func (p *StreamTableJoin[K, V, VT, VR]) joinOne(k K, v V) (VR, bool, error) {
	vt, ok, err := p.kv.Get(k)
	if err != nil {
		var zero VR
		return zero, false, err
	}
	out, keep := p.join(k, v, vt, ok)
	return out, keep, nil
}

func (p *StreamTableJoin[K, V, VT, VR]) Close() error { return nil }

// StreamTableJoinTyped is the exec.Typed of n, a node whose Processor is a
// *StreamTableJoin[K, V, VT, VR]: a stream record comes in typed and its
// joined value goes on typed. The table's changes, which join nothing,
// take the erased path, whose types the entry's do not match.
func StreamTableJoinTyped[K, V, VT, VR any](n *exec.Node) *exec.Typed {
	return &exec.Typed{
		Link: func(f *exec.Frame, p exec.Processor, next any) any {
			emit, ok := next.(func(K, VR) error)
			if !ok {
				return nil
			}
			j := p.(*StreamTableJoin[K, V, VT, VR])
			return func(k K, v V) error {
				f.At(n, exec.Processing)
				out, keep, err := j.joinOne(k, v)
				if !keep || err != nil {
					return err
				}
				return emit(k, out)
			}
		},
		Out: exec.ChainOut[K, VR],
		Fan: exec.ChainFan[K, VR],
	}
}

// TableJoinSide is one side of a table–table join (JoinTables and its left
// and outer forms): it joins the changes of its own table, of values Own,
// with the other table's store, of values Other, and forwards the joined
// change.
type TableJoinSide[K, Own, Other, V any] struct {
	other KVStore[K, Other]
	kv    *KV[K, Other]
	ctx   exec.Context
	join  func(k K, own Own, ownOK bool, other Other, otherOK bool) (V, bool)
}

// NewTableJoinSide returns the Processor of one side of a table–table
// join whose other side is kept in other: join gets each side's value
// and whether it is there, and says whether the joined row exists.
func NewTableJoinSide[K, Own, Other, V any](other KVStore[K, Other], join func(k K, own Own, ownOK bool, other Other, otherOK bool) (V, bool)) *TableJoinSide[K, Own, Other, V] {
	return &TableJoinSide[K, Own, Other, V]{other: other, join: join}
}

func (p *TableJoinSide[K, Own, Other, V]) Init(ctx exec.Context) error {
	p.ctx, p.kv = ctx, p.other.Open(ctx)
	return nil
}

func (p *TableJoinSide[K, Own, Other, V]) Process(r exec.Record) error {
	ch := r.Value.(exec.Change)
	k := r.Key.(K)
	other, ok, err := p.kv.Forwarded(k)
	if err != nil {
		return err
	}
	// The other side did not change: join this side's old and new value
	// (nil: absent) with the value the other side last forwarded. The
	// joined old value is then exactly what the join last emitted for the
	// key, since every change of either side is joined with the value the
	// other last forwarded. The other side's newest value would not do:
	// with folding (fold.updates) its store is ahead of what it forwarded
	// until its held update goes out at the flush, and a retraction made of
	// it would retract a row never emitted (issue 15).
	joined := func(own any) (V, bool) {
		if own == nil {
			var zero Own
			return p.join(k, zero, false, other, ok)
		}
		return p.join(k, own.(Own), true, other, ok)
	}
	var out exec.Change
	if v, keep := joined(ch.Old); keep {
		out.Old = v
	}
	if v, keep := joined(ch.New); keep {
		out.New = v
	}
	if out.Old == nil && out.New == nil {
		return nil
	}
	r.Value = out
	return p.ctx.Forward(r)
}

func (p *TableJoinSide[K, Own, Other, V]) Close() error { return nil }
