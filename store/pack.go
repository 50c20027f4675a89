package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Packing lets a Staged send the writes of many keys in one changelog
// record, a pack: one Kafka record of a few dozen bytes costs the producer,
// the broker and every reader far more than its bytes do, and a store
// written once a record (a stream join's buffer) would send as many
// changelog records as it takes input records.
//
// Keys are packed by group: the keys that share a prefix the Group says is
// one. A pack holds writes of one group, in the order they were made, and
// goes out at Flush (or when it reaches its Limit in bytes), after the records
// of the ranges dropped before it; a range drop that covers a whole group
// discards the group's pending writes, since it deletes them anyway, and
// one that cuts into a group first sends its pack.
//
// A pack's key is the group's prefix, then Mark, then the store's
// checkpoint and a count (big-endian): unique for the changelog's life,
// since a transaction that sends a pack moves the checkpoint past the
// offset of every pack sent before it, so compaction never takes one pack
// for another. No key of the store may begin with a group's prefix
// followed by Mark. Every reader of the changelog expands a pack into its
// writes (UnpackWrites): the restore, a standby, the savepoint's copy.
//
// Compaction keeps a pack as long as retention does, even when each of its
// keys was written again or deleted since: a replay applies it and then
// what came after it, as it would the records it holds. So packing suits
// a store whose keys go by range drops (a stream join's segments), not one
// whose keys are rewritten for ever.
type Packing struct {
	// Group returns the length of the prefix that groups key with the
	// keys packed with it, or 0 to send key's writes alone.
	Group func(key []byte) int
	// Mark follows a group's prefix in the key of its packs.
	Mark []byte
	// Limit is about the most bytes of writes a pack carries; 0 is
	// PackLimit.
	Limit int
}

// PackUniqueLen is the length of the tail of a pack's key that makes it
// unique: the checkpoint (8 bytes) and the count (4).
const PackUniqueLen = 12

// PackLimit is the default Limit of a pack's bytes: far below
// a Kafka record's default limit, and large enough that a pack's own cost
// is spread over hundreds of writes.
const PackLimit = 64 << 10

// WithPacking packs the changelog records of the keys p groups, with the
// cache on (at Flush) or over a Direct engine (as written). Default, and
// with WithoutCache over any other engine: every write is a record of its
// own, sent as it is made.
func WithPacking(p Packing) StagedOption {
	return stagedOptionFunc(func(s *Staged) {
		if p.Group != nil {
			if p.Limit <= 0 {
				p.Limit = PackLimit
			}
			s.pack = &packer{Packing: p}
		}
	})
}

// SetPackChangelog sets the function that receives the changelog record of
// a pack: the receiver marks the record as a pack (a replay expands it with
// UnpackWrites) and owns the slices.
func (s *Staged) SetPackChangelog(fn func(key, value []byte)) { s.packLog = fn }

// A pack's value: uvarint(len(group prefix)), then each write as
// uvarint(len(suffix)) suffix uvarint(len(value)+1) value, where the key
// is the prefix (the first bytes of the pack's key) and the suffix, and a
// length of 0 in place of len(value)+1 is a delete.

// UnpackWrites appends to dst the writes of the pack record (key, value),
// in the order they were made. The values are subslices of value; the keys
// share one new allocation.
func UnpackWrites(dst []Write, key, value []byte) ([]Write, error) {
	g, n := binary.Uvarint(value)
	if n <= 0 || g > uint64(len(key)) {
		return dst, fmt.Errorf("%w: pack record of %d bytes with key of %d bytes", ErrCorruptPack, len(value), len(key))
	}
	prefix, b := key[:g], value[n:]
	// One pass to size the keys' allocation, one to cut them.
	size, count := 0, 0
	for p := b; len(p) > 0; count++ {
		suffix, _, _, rest, err := nextPacked(p)
		if err != nil {
			return dst, err
		}
		p = rest
		size += len(prefix) + len(suffix)
	}
	keys := make([]byte, 0, size)
	dst = growWrites(dst, count)
	for len(b) > 0 {
		suffix, v, del, rest, _ := nextPacked(b)
		start := len(keys)
		keys = append(append(keys, prefix...), suffix...)
		w := Write{Key: keys[start:len(keys):len(keys)]}
		if !del {
			w.Value = v
		}
		dst = append(dst, w)
		b = rest
	}
	return dst, nil
}

func growWrites(dst []Write, n int) []Write {
	if cap(dst)-len(dst) < n {
		dst = append(make([]Write, 0, len(dst)+n), dst...)
	}
	return dst
}

// ErrCorruptPack is returned for a pack record that cannot be read.
var ErrCorruptPack = errors.New("store: corrupt changelog pack")

func nextPacked(b []byte) (suffix, value []byte, del bool, rest []byte, err error) {
	kl, n := binary.Uvarint(b)
	if n <= 0 || kl > uint64(len(b)-n) {
		return nil, nil, false, nil, fmt.Errorf("%w: a key's length", ErrCorruptPack)
	}
	suffix, b = b[n:n+int(kl)], b[n+int(kl):]
	vl, n := binary.Uvarint(b)
	if n <= 0 || vl > uint64(len(b)-n)+1 {
		return nil, nil, false, nil, fmt.Errorf("%w: a value's length", ErrCorruptPack)
	}
	if vl == 0 {
		return suffix, nil, true, b[n:], nil
	}
	end := n + int(vl) - 1
	return suffix, b[n:end:end], false, b[end:], nil
}

// packer holds a Staged's pending packs.
type packer struct {
	Packing
	// packs are the groups written since the last Flush, in the order
	// first written; a pack emptied (sent or discarded) keeps its place
	// until the Flush, so that a unit's Rollback finds it.
	packs []*pending
	free  []*pending // emptied at Flush, for reuse
	// checkpoint is the engine's, read before the transaction's first
	// write (packReady); seq counts the packs the transaction sent.
	checkpoint int64
	known      bool
	seq        uint32
	bytes      int // pending writes' bytes, for Bytes
	marked     bool
	markPacks  int // len(packs) at Mark
}

// pending is one group's pack being written; an empty buf is an empty
// pack. At a Mark, buf is kept as markBuf, whose first markLen bytes a
// Rollback restores: appends after the Mark write past markLen or into a
// new array, and a pack sent or discarded inside the unit starts a new
// array, so those bytes stay as they were.
type pending struct {
	group   []byte
	buf     []byte
	markBuf []byte
	markLen int
	size    int // the bytes of its group's last pack sent, to size the next
}

// packReady reads the engine's checkpoint before the transaction's first
// write: the keys of its packs carry it.
func (s *Staged) packReady() error {
	if s.pack.known {
		return nil
	}
	cp, err := s.engine.Checkpoint()
	if err != nil {
		return fmt.Errorf("store: %s: %w", s.name, err)
	}
	s.pack.checkpoint, s.pack.known = cp, true
	return nil
}

// find returns key's group's pack, making one if needed; nil if key is not
// packed.
func (p *packer) find(key []byte) *pending {
	g := p.Group(key)
	if g <= 0 || g > len(key) {
		return nil
	}
	for i := len(p.packs) - 1; i >= 0; i-- {
		if q := p.packs[i]; bytes.Equal(q.group, key[:g]) {
			return q
		}
	}
	var q *pending
	if n := len(p.free); n > 0 {
		q, p.free = p.free[n-1], p.free[:n-1]
	} else {
		q = &pending{}
	}
	q.group = append(q.group[:0], key[:g]...)
	q.buf, q.markBuf, q.markLen = nil, nil, 0
	p.packs = append(p.packs, q)
	return q
}

// packWrite appends a write of key (nil value: a delete) to its group's
// pack and reports whether key is packed: not if nothing receives packs
// (SetPackChangelog), so that a changelog hears of every write. A full
// pack goes out first.
func (s *Staged) packWrite(key, value []byte) bool {
	if s.packLog == nil {
		return false
	}
	q := s.pack.find(key)
	if q == nil {
		return false
	}
	if len(q.buf) >= s.pack.Limit {
		s.sendPack(q)
	}
	if len(q.buf) == 0 {
		if q.buf == nil {
			q.buf = make([]byte, 0, min(max(q.size, 256), s.pack.Limit+s.pack.Limit/4))
		}
		q.buf = binary.AppendUvarint(q.buf, uint64(len(q.group)))
		s.pack.bytes += len(q.buf)
	}
	n := len(q.buf)
	suffix := key[len(q.group):]
	q.buf = binary.AppendUvarint(q.buf, uint64(len(suffix)))
	q.buf = append(q.buf, suffix...)
	if value == nil {
		q.buf = append(q.buf, 0)
	} else {
		q.buf = binary.AppendUvarint(q.buf, uint64(len(value))+1)
		q.buf = append(q.buf, value...)
	}
	s.pack.bytes += len(q.buf) - n
	return true
}

// sendPack sends q's writes in one record and empties it.
func (s *Staged) sendPack(q *pending) {
	if len(q.buf) == 0 {
		return
	}
	p := s.pack
	key := make([]byte, 0, len(q.group)+len(p.Mark)+PackUniqueLen)
	key = append(append(key, q.group...), p.Mark...)
	key = binary.BigEndian.AppendUint64(key, uint64(p.checkpoint))
	key = binary.BigEndian.AppendUint32(key, p.seq)
	p.seq++
	p.bytes -= len(q.buf)
	q.size = len(q.buf)
	s.stats.ChangelogRecords++
	s.packLog(key, q.buf)
	// The record's now. A unit's Rollback may take it back (markBuf):
	// the receiver drops the records sent inside a unit rolled back.
	q.buf = nil
}

// packsBeforeDrop empties the packs of the groups [start, end) covers
// whole, whose writes the drop deletes, and sends those of the groups it
// cuts into, whose writes must reach a replay before the drop. A group's
// keys are those that begin with its prefix: [start, end) covers them if
// the prefix is in it and end follows them (end is past the prefix and
// does not begin with it), and cuts into them if the prefix is below end
// and start is not past them.
func (s *Staged) packsBeforeDrop(start, end []byte) {
	for _, q := range s.pack.packs {
		if len(q.buf) == 0 {
			continue
		}
		g := q.group
		switch {
		case bytes.Compare(g, start) >= 0 && bytes.Compare(end, g) > 0 && !bytes.HasPrefix(end, g):
			s.pack.bytes -= len(q.buf)
			q.buf = nil
		case bytes.Compare(g, end) < 0 && (bytes.Compare(start, g) < 0 || bytes.HasPrefix(start, g)):
			s.sendPack(q)
		}
	}
}

// flushPacks sends every pending pack.
func (s *Staged) flushPacks() {
	for _, q := range s.pack.packs {
		s.sendPack(q)
	}
	s.pack.recycle(0)
}

// recycle puts the packs from the nth on in the free list.
func (p *packer) recycle(n int) {
	p.free = append(p.free, p.packs[n:]...)
	clear(p.packs[n:])
	p.packs = p.packs[:n]
}

// unflushed reports whether a pack holds writes.
func (p *packer) unflushed() bool {
	for _, q := range p.packs {
		if len(q.buf) > 0 {
			return true
		}
	}
	return false
}

func (p *packer) mark() {
	p.marked, p.markPacks = true, len(p.packs)
	for _, q := range p.packs {
		q.markBuf, q.markLen = q.buf, len(q.buf)
	}
}

func (p *packer) release() { p.marked = false }

// rollback restores the packs as they were at the mark: what was sent
// since, the caller drops with the unit's other records.
func (p *packer) rollback() {
	if !p.marked {
		return
	}
	for _, q := range p.packs[p.markPacks:] {
		p.bytes -= len(q.buf)
	}
	p.recycle(p.markPacks)
	for _, q := range p.packs {
		p.bytes += q.markLen - len(q.buf)
		q.buf = q.markBuf[:q.markLen]
	}
	p.marked = false
}

// reset forgets every pending pack and the checkpoint, which a commit
// moves (Commit, Abort).
func (p *packer) reset() {
	p.recycle(0)
	p.bytes, p.marked, p.known, p.seq = 0, false, false, 0
}
