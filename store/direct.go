package store

import (
	"bytes"
	"fmt"
)

// Direct is an Engine that keeps the open transaction's writes itself and
// can undo them: a Staged over it stages nothing. Each write goes straight
// to the engine and its changelog record straight out (as WithoutCache),
// or into its group's pack (WithPacking), and Commit, Abort, Mark and
// Rollback are the engine's. It is for an engine in memory whose layout
// lets it serve its operator's reads faster than a stage merged over it
// would (a stream join's buffer, ops.JoinMemory): an engine on disk must
// not be one, since a crash would leave it holding writes of a
// transaction that never committed.
//
// Invariant 2 (ARCHITECTURE.md) holds as it does for a stage: a Direct
// engine lives only as long as its process, so after a crash it is
// rebuilt from the changelog, which holds only committed transactions
// (read_committed); while the process lives, Abort takes back every write
// since the last Commit, so the engine returns to exactly the committed
// state, and a unit's Rollback takes back the unit's.
//
// Apply, used by a restore before any transaction opens, writes committed
// state and takes no undo.
type Direct interface {
	Engine
	// Put writes a copy of value under key and returns copies of key
	// and value for the changelog record, which the engine never
	// modifies: the value may be the one it keeps.
	Put(key, value []byte) (k, v []byte, err error)
	// Delete deletes key and reports whether the engine held it.
	Delete(key []byte) (bool, error)
	// DeleteRange deletes every key in [start, end) and reports whether
	// there was any.
	DeleteRange(start, end []byte) (bool, error)
	// First returns the smallest key in [start, end) and its value, valid
	// until the next write.
	First(start, end []byte) (key, value []byte, ok bool, err error)
	// Mark begins a unit, Release ends it keeping its writes, Rollback
	// ends it undoing them (Staged.Mark).
	Mark()
	Release()
	Rollback()
	// Commit ends the transaction, keeping its writes, and records
	// checkpoint as Apply does. Abort undoes every write since the last
	// Commit.
	Commit(checkpoint int64) error
	Abort()
	// Undoing estimates the memory of what the open transaction could
	// undo: what the stage's share of the memory budget counts.
	Undoing() int
}

// The methods of a Staged over a Direct engine. Each public method of a
// Staged turns to one of these first when s.direct is set.

func (s *Staged) directPut(key, value []byte) error {
	s.stats.Puts++
	if s.pack != nil {
		if err := s.packReady(); err != nil {
			return err
		}
	}
	k, v, err := s.direct.Put(key, value)
	if err != nil {
		return fmt.Errorf("store: %s: %w", s.name, err)
	}
	if s.pack != nil && s.changelog != nil && s.packWrite(k, v) {
		return nil
	}
	if s.changelog != nil {
		s.stats.ChangelogRecords++
		s.changelog(k, v)
	}
	return nil
}

func (s *Staged) directDelete(key []byte) error {
	s.stats.Deletes++
	if s.pack != nil {
		if err := s.packReady(); err != nil {
			return err
		}
	}
	held, err := s.direct.Delete(key)
	if err != nil {
		return fmt.Errorf("store: %s: %w", s.name, err)
	}
	// A key the engine lacked: the changelog's replay lacks it too (it
	// heard of every write), so the tombstone would stand for nothing.
	if held && s.pack != nil && s.changelog != nil && s.packWrite(key, nil) {
		return nil
	}
	if held && s.changelog != nil {
		s.stats.ChangelogRecords++
		s.changelog(bytes.Clone(key), nil)
	}
	return nil
}

func (s *Staged) directDropRange(start, end []byte) error {
	if _, ok, err := s.direct.Get(start); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("store: %s: a range dropped from %q, a key of the store", s.name, start)
		}
		return err
	}
	if s.pack != nil {
		if err := s.packReady(); err != nil {
			return err
		}
	}
	dropped, err := s.direct.DeleteRange(start, end)
	if err != nil {
		return fmt.Errorf("store: %s: %w", s.name, err)
	}
	// An empty range is no drop, as with a stage (DropRange). A pack's
	// writes in a range the engine had nothing left of are undone by
	// later writes in the same pack.
	if dropped && s.pack != nil {
		s.packsBeforeDrop(start, end)
	}
	if dropped && s.rangeLog != nil {
		s.stats.ChangelogRecords++
		s.rangeLog(bytes.Clone(start), bytes.Clone(end))
	}
	return nil
}

func (s *Staged) directFirst(start, end []byte) (key, value []byte, ok bool, err error) {
	key, value, ok, err = s.direct.First(start, end)
	return bytes.Clone(key), bytes.Clone(value), ok, err
}

func (s *Staged) directCommit(checkpoint int64) error {
	if s.pack != nil {
		if s.changelog != nil && s.pack.unflushed() {
			return fmt.Errorf("%w: packed writes in store %s", ErrUnflushed, s.name)
		}
		s.pack.reset()
	}
	if err := s.direct.Commit(checkpoint); err != nil {
		return fmt.Errorf("store: %s: %w", s.name, err)
	}
	return nil
}
