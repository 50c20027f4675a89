package ops

import (
	"fmt"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
)

// Keyed state: the runtime of Flink's value, list, map, reducing and
// aggregating state (topology.ValueState and the others), laid out in its
// store as internal/layout's state.go draws. A state's handles judge
// expiry and stamp their writes by a clock of their own, kept in the
// state's store, so that expiry commits, rolls back and restores with the
// entries it judges.

// StateErrors are the sentinels a keyed state's errors wrap: the public
// package's own, so that a user's errors.Is finds them.
type StateErrors struct {
	// Corrupt is wrapped by a read that finds bytes the layout cannot
	// have produced.
	Corrupt error
	// NoTime is returned by a write under a TTL that has no time to stamp
	// it with.
	NoTime error
	// Undeclared is wrapped by any use of a state whose store the task
	// does not have: the processor did not declare it.
	Undeclared error
}

// StateConfig configures a keyed state's handles.
type StateConfig struct {
	Name   string // the state's store name
	TTL    int64  // milliseconds; 0: entries never expire
	Errors StateErrors
}

// StreamClock is the task's stream time as a state sees it
// (exec.Context.StreamTime).
type StreamClock interface {
	StreamTime() int64
}

// noTime is the clock of a state that has seen no time, like the task's
// stream time before its first record.
const noTime = -1

// Keyed is the untyped core of every keyed state handle in one task: the
// clock, the entry format, expiry and the guard against writes during a
// Range. Each handle has its own.
type Keyed struct {
	cfg StateConfig
	s   *store.Staged // nil: the processor did not declare the state
	// clock is the task's stream time when opened in a task; nil for a
	// view, which neither follows a stream time nor deletes on read,
	// since it may be reading a store that its task owns.
	clock StreamClock
	// ranging counts the Ranges in progress: the stage must not change
	// under one (store.Staged.Range).
	ranging int
}

// NewKeyed opens a handle's core on the state's store s. clock is nil for
// a view: a handle on a store reached from outside its task.
func NewKeyed(cfg StateConfig, s *store.Staged, clock StreamClock) *Keyed {
	return &Keyed{cfg: cfg, s: s, clock: clock}
}

func (c *Keyed) errorf(format string, args ...any) error {
	return fmt.Errorf("store %s: "+format, append([]any{c.cfg.Name}, args...)...)
}

// corrupt wraps a layout.StateCorruption with the corruption sentinel,
// which comes first in the message.
func (c *Keyed) corrupt(err error) error {
	return fmt.Errorf("%w: %w", c.cfg.Errors.Corrupt, err)
}

func (c *Keyed) ready() error {
	if c.s == nil {
		return c.errorf("%w: the processor did not pass the state to Process", c.cfg.Errors.Undeclared)
	}
	return nil
}

func (c *Keyed) read(key []byte) ([]byte, bool, error) {
	if err := c.ready(); err != nil {
		return nil, false, err
	}
	b, ok, err := c.s.Get(key)
	if err != nil {
		return nil, false, c.errorf("%w", err)
	}
	return b, ok, nil
}

func (c *Keyed) write(key, value []byte) error {
	if err := c.ready(); err != nil {
		return err
	}
	if c.ranging > 0 {
		return c.errorf("write during Range")
	}
	return c.s.Put(key, value)
}

func (c *Keyed) delete(key []byte) error {
	if err := c.ready(); err != nil {
		return err
	}
	if c.ranging > 0 {
		return c.errorf("write during Range")
	}
	return c.s.Delete(key)
}

// cleans says whether the handle removes the expired entries it reads:
// only inside a task, and not under a Range.
func (c *Keyed) cleans() bool { return c.clock != nil && c.ranging == 0 }

// drop deletes an entry found expired, if the handle cleans.
func (c *Keyed) drop(key []byte) error {
	if !c.cleans() {
		return nil
	}
	return c.s.Delete(key)
}

func (c *Keyed) storedClock() (int64, error) {
	b, ok, err := c.read(layout.StateClockKey)
	if err != nil || !ok {
		return noTime, err
	}
	ts, ok := layout.ParseClock(b)
	if !ok {
		return 0, c.errorf("clock of %d bytes: %w", len(b), c.cfg.Errors.Corrupt)
	}
	return ts, nil
}

// now is the clock that expiry is judged by and writes are stamped with:
// the later of the stored clock and the task's stream time (a view has
// only the stored clock); noTime without a TTL, or before any time. The
// clock is written to the store whenever it moves, so that after a restart
// it is never behind a time a committed decision was made at.
func (c *Keyed) now() (int64, error) {
	if c.cfg.TTL == 0 {
		return noTime, nil
	}
	cur, err := c.storedClock()
	if err != nil || c.clock == nil {
		return cur, err
	}
	ts := c.clock.StreamTime()
	if ts <= cur {
		return cur, nil
	}
	return ts, c.write(layout.StateClockKey, layout.AppendClock(nil, ts))
}

// stamp is the write time of an entry written now.
func (c *Keyed) stamp() (int64, error) {
	now, err := c.now()
	if err != nil || c.cfg.TTL == 0 {
		return now, err
	}
	if now < 0 {
		return 0, c.errorf("%w", c.cfg.Errors.NoTime)
	}
	return now, nil
}

func (c *Keyed) appendEntry(dst []byte, at int64, vb []byte) []byte {
	return layout.AppendEntry(dst, c.cfg.TTL != 0, at, vb)
}

// parse decodes an entry, its corruption wrapped with the sentinel.
func (c *Keyed) parse(b []byte) (layout.Entry, error) {
	e, err := layout.ParseEntry(b)
	if err != nil {
		return e, c.corrupt(err)
	}
	return e, nil
}

// expired says whether e is expired at now. Entries written without a TTL
// never are, and neither is anything once the TTL is removed.
func (c *Keyed) expired(e layout.Entry, now int64) bool {
	return c.cfg.TTL > 0 && e.Timed && now-e.At >= c.cfg.TTL
}

// get returns the value bytes of the entry under key; an expired entry is
// absent, and deleted. The bytes are the store's: the caller must not
// modify them.
func (c *Keyed) get(key []byte) ([]byte, bool, error) {
	b, ok, err := c.read(key)
	if err != nil || !ok {
		return nil, false, err
	}
	e, err := c.parse(b)
	if err != nil {
		return nil, false, c.errorf("%w", err)
	}
	if e.Timed && c.cfg.TTL > 0 {
		now, err := c.now()
		if err != nil {
			return nil, false, err
		}
		if c.expired(e, now) {
			return nil, false, c.drop(key)
		}
	}
	return e.Payload, true, nil
}

func (c *Keyed) put(key, vb []byte) error {
	at, err := c.stamp()
	if err != nil {
		return err
	}
	return c.write(key, c.appendEntry(nil, at, vb))
}
