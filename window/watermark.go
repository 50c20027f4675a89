package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// NoWatermark is the watermark before anything is known: no record is
// late yet.
const NoWatermark int64 = math.MinInt64

// ErrCorrupt is wrapped by errors about persisted state that cannot be read.
var ErrCorrupt = errors.New("window: corrupt state")

// Strategy turns the records of one input into that input's watermark. A
// watermark W means no more records with a timestamp <= W are expected
// (Flink's convention); timestamps and watermarks are milliseconds since
// the epoch.
//
// Strategy is sealed: PerRecord is the way to plug in a generator of one's
// own. The seal keeps a promise the Tracker's persisted state relies on: a
// strategy's only state is the input watermark it is handed back, so
// restoring the Tracker restores everything the next decision depends on.
type Strategy interface {
	// Next returns the input's watermark after a record at ts, given the
	// input's watermark before it (NoWatermark if none). The Tracker
	// never lets the result move an input's watermark backwards.
	Next(ts, prev int64) int64
	// Validate reports a definition that cannot work, wrapping ErrInvalid.
	Validate() error
	String() string
	sealed()
}

// BoundedOutOfOrderness expects records at most d older than the newest one
// seen on the same input: after records up to maxTs the input's watermark
// is maxTs - d - 1 (Flink's forBoundedOutOfOrderness), so a record exactly
// d behind the newest is still on time. d is truncated to whole
// milliseconds and must not be negative.
func BoundedOutOfOrderness(d time.Duration) Strategy {
	return bounded{bound: d.Milliseconds()}
}

// Monotonous expects timestamps that never decrease on an input: the
// watermark is maxTs - 1, BoundedOutOfOrderness(0) (Flink's
// forMonotonousTimestamps).
func Monotonous() Strategy { return bounded{} }

type bounded struct{ bound int64 }

func (b bounded) Next(ts, prev int64) int64 {
	// ts - bound - 1, saturating at NoWatermark instead of wrapping.
	if ts < math.MinInt64+b.bound+1 {
		return max(prev, NoWatermark)
	}
	return max(prev, ts-b.bound-1)
}

func (b bounded) Validate() error {
	if b.bound < 0 {
		return fmt.Errorf("%w: out-of-orderness bound %dms must not be negative", ErrInvalid, b.bound)
	}
	return nil
}

func (b bounded) String() string {
	if b.bound == 0 {
		return "Monotonous"
	}
	return fmt.Sprintf("BoundedOutOfOrderness(%v)", time.Duration(b.bound)*time.Millisecond)
}

func (bounded) sealed() {}

// PerRecord is a user-defined generator: fn is called with each record's
// timestamp and the input's watermark before it (NoWatermark if none), and
// returns the input's new watermark. fn may return prev to emit nothing.
// Its result is clamped so the input's watermark never goes backwards.
//
// fn must be a pure function of its arguments, with no state of its own:
// the Tracker persists only the watermark fn is handed back, so any other
// state would be lost on restart and replay would decide differently
// (invariant 5).
func PerRecord(fn func(ts int64, prev int64) int64) Strategy { return perRecord{fn} }

type perRecord struct {
	fn func(ts, prev int64) int64
}

func (p perRecord) Next(ts, prev int64) int64 { return max(prev, p.fn(ts, prev)) }

func (p perRecord) Validate() error {
	if p.fn == nil {
		return fmt.Errorf("%w: PerRecord needs a function", ErrInvalid)
	}
	return nil
}

func (perRecord) String() string { return "PerRecord" }
func (perRecord) sealed()        {}

// TrackerOpt configures a Tracker.
type TrackerOpt func(*trackerConfig)

type trackerConfig struct {
	idleTimeout time.Duration
}

// IdleTimeout lets Tick mark an input idle after it has had no record and
// no watermark for longer than d, so that an input with no traffic does not
// hold every window open (Flink's withIdleness). The default, 0, turns it
// off; d is truncated to whole milliseconds and must be 0 or at least 1ms.
//
// This is the one wall-clock input of the Tracker and the one thing that
// breaks replay determinism (invariant 5): whether an input timed out
// depends on when Tick ran, not on the records. Leave it off where the
// results must be reproducible; SetIdle, driven by data, is deterministic.
func IdleTimeout(d time.Duration) TrackerOpt {
	return func(c *trackerConfig) { c.idleTimeout = d }
}

func (c trackerConfig) validate() error {
	if c.idleTimeout < 0 || (c.idleTimeout > 0 && c.idleTimeout < time.Millisecond) {
		return fmt.Errorf("%w: idle timeout %v must be 0 (off) or at least 1ms", ErrInvalid, c.idleTimeout)
	}
	return nil
}

// Tracker combines the watermarks of the inputs of one task: its input
// partitions, or the upstream writers of a repartition topic. Inputs are
// numbered 0 to n-1 when the Tracker is made; an index out of range panics
// like a slice index.
//
// The Tracker is a deterministic state machine: it starts no goroutines and
// reads no clock (Tick is handed the time). It is not safe for concurrent
// use; one task owns it.
//
// Invariants:
//
//  1. Watermark never decreases, also across a rejoining idle input and
//     across MarshalBinary/UnmarshalBinary (invariant 5 of ARCHITECTURE.md).
//  2. Watermark is the largest value the minimum over the non-idle inputs
//     has had after any call; while every input is idle it stays put.
//  3. An input's own watermark never decreases either.
//  4. An input that has not reported holds the watermark at NoWatermark
//     until its first record or watermark, unless it is marked idle.
type Tracker struct {
	strategy    Strategy
	idleTimeout int64 // ms; 0 = off
	inputs      []input
	min         int64 // minimum over the non-idle inputs, valid when active > 0
	active      int   // number of non-idle inputs
	wm          int64 // emitted watermark; never decreases
}

type input struct {
	wm   int64
	idle bool
	// Idle timer, used only with an idle timeout and only while the input
	// is not idle. fresh: a record or watermark arrived since the last
	// Tick; timing: since is set. since is the time of the first Tick
	// after the input's latest data, so the input has been silent for at
	// least now - since. A rejoining input is fresh, which restarts it.
	fresh, timing bool
	since         int64
}

// NewTracker returns a Tracker of n inputs, each generating its watermark
// from its records with s.
func NewTracker(s Strategy, n int, opts ...TrackerOpt) (*Tracker, error) {
	var c trackerConfig
	for _, o := range opts {
		o(&c)
	}
	if s == nil {
		return nil, fmt.Errorf("%w: tracker needs a watermark strategy", ErrInvalid)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if n < 1 || int64(n) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: tracker needs 1 to %d inputs, not %d", ErrInvalid, uint32(math.MaxUint32), n)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	t := &Tracker{
		strategy:    s,
		idleTimeout: c.idleTimeout.Milliseconds(),
		inputs:      make([]input, n),
		wm:          NoWatermark,
	}
	for i := range t.inputs {
		t.inputs[i].wm = NoWatermark
	}
	t.recompute()
	return t, nil
}

// Inputs returns the number of inputs.
func (t *Tracker) Inputs() int { return len(t.inputs) }

// Watermark returns the task's watermark: the minimum over the non-idle
// inputs, never lower than any watermark returned before. It is NoWatermark
// until every non-idle input has reported.
func (t *Tracker) Watermark() int64 { return t.wm }

// InputWatermark returns input i's own watermark, NoWatermark until it
// reports.
func (t *Tracker) InputWatermark(i int) int64 { return t.inputs[i].wm }

// InputIdle reports whether input i is idle, excluded from the minimum.
func (t *Tracker) InputIdle(i int) bool { return t.inputs[i].idle }

// Idle reports whether every input is idle, so the task could announce
// itself idle to its downstream tasks (Flink's WatermarkStatus.IDLE).
func (t *Tracker) Idle() bool { return t.active == 0 }

// Observe records a record at ts on input i: it raises the input's
// watermark as the strategy says and, if the input was idle, makes it
// rejoin the minimum. Whether the record is late is the caller's question,
// asked before: ts <= Watermark().
func (t *Tracker) Observe(i int, ts int64) {
	in := &t.inputs[i]
	t.raise(in, t.strategy.Next(ts, in.wm))
}

// Advance raises input i's watermark to wm directly: for an upstream
// watermark arriving through a repartition topic, where the input is one
// upstream writer and the task takes the minimum over the writers. A wm
// at or below the input's watermark changes nothing but counts as activity
// (and makes an idle input rejoin). Observe and Advance may be mixed on
// one input; each only ever raises it.
func (t *Tracker) Advance(i int, wm int64) {
	t.raise(&t.inputs[i], wm)
}

func (t *Tracker) raise(in *input, wm int64) {
	old := in.wm
	if wm > old {
		in.wm = wm
	}
	in.fresh = true
	switch {
	case in.idle:
		// Rejoining: the minimum may drop below the emitted watermark,
		// which then waits for this input to catch up (invariant 1).
		in.idle = false
		t.recompute()
	case in.wm != old && old == t.min:
		// This input may have been the only one holding the minimum.
		t.recompute()
	}
}

// SetIdle marks input i idle until its next record or watermark: it stops
// holding the watermark back. Use it when the input is known to be quiet —
// an upstream task announced idleness, a bounded input reached its end —
// which keeps the decision tied to data and so deterministic. If every
// input is idle the watermark stays where it is.
func (t *Tracker) SetIdle(i int) {
	in := &t.inputs[i]
	if !in.idle {
		in.idle = true
		t.recompute()
	}
}

// Tick runs the idle timers at wall-clock time now (milliseconds); it does
// nothing without an IdleTimeout. An input is marked idle when it has had
// no record or watermark since a Tick more than the timeout before now. A
// Tick is what notices activity, so an input is never marked idle sooner
// than the timeout after its last record, and at most one Tick interval
// later; an input that has never reported starts its timer at the first
// Tick, and after UnmarshalBinary every timer restarts at the next Tick
// (time spent down is not inactivity of the input). now should not go
// backwards; if it does, no input times out until it passes the old time.
func (t *Tracker) Tick(now int64) {
	if t.idleTimeout == 0 {
		return
	}
	changed := false
	for i := range t.inputs {
		in := &t.inputs[i]
		switch {
		case in.idle:
		case in.fresh || !in.timing:
			in.fresh, in.timing, in.since = false, true, now
		case now > in.since && uint64(now)-uint64(in.since) > uint64(t.idleTimeout):
			in.idle, changed = true, true
		}
	}
	if changed {
		t.recompute()
	}
}

// recompute finds the minimum over the non-idle inputs and raises the
// emitted watermark to it.
func (t *Tracker) recompute() {
	t.min, t.active = math.MaxInt64, 0
	for i := range t.inputs {
		if in := &t.inputs[i]; !in.idle {
			t.active++
			t.min = min(t.min, in.wm)
		}
	}
	if t.active > 0 && t.min > t.wm {
		t.wm = t.min
	}
}

// Persisted state, version 1, big-endian:
//
//	version  uint8  = 1
//	wm       int64  emitted watermark
//	n        uint32 number of inputs
//	n times: wm int64, flags uint8 (bit 0: idle)
//
// The idle timers are left out on purpose (see Tick).
const (
	stateVersion = 1
	stateHeader  = 1 + 8 + 4
	stateInput   = 8 + 1
	flagIdle     = 1 << 0
	flagsKnown   = flagIdle
)

// CopyFrom makes t an exact copy of src, its idle timers included, which
// MarshalBinary leaves out (wall-clock time means nothing after a
// restart): what a task keeps of its last commit, to return to on abort,
// so that an aborted transaction's replay finds inputs as idle, and as
// close to idle, as they were.
func (t *Tracker) CopyFrom(src *Tracker) {
	inputs := append(t.inputs[:0], src.inputs...)
	*t = *src
	t.inputs = inputs
}

// MarshalBinary encodes the Tracker's state, to be committed together with
// the input offsets it reflects so a restarted task makes the same
// decisions (invariant 5). The strategy and idle timeout are configuration,
// not state, and are not included.
func (t *Tracker) MarshalBinary() ([]byte, error) {
	return t.AppendBinary(make([]byte, 0, stateHeader+stateInput*len(t.inputs)))
}

// AppendBinary appends the encoding of MarshalBinary to b.
func (t *Tracker) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, stateVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.wm))
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.inputs)))
	for i := range t.inputs {
		in := &t.inputs[i]
		b = binary.BigEndian.AppendUint64(b, uint64(in.wm))
		var flags byte
		if in.idle {
			flags |= flagIdle
		}
		b = append(b, flags)
	}
	return b, nil
}

// UnmarshalBinary restores state written by MarshalBinary into a Tracker
// made by NewTracker with the same strategy and idle timeout. The number
// of inputs must match (an error wrapping ErrInvalid otherwise); data that
// is malformed or describes an impossible state is rejected with an error
// wrapping ErrCorrupt. On error t is unchanged.
func (t *Tracker) UnmarshalBinary(data []byte) error {
	if t.strategy == nil {
		return fmt.Errorf("%w: UnmarshalBinary needs a Tracker made by NewTracker", ErrInvalid)
	}
	if len(data) < stateHeader {
		return fmt.Errorf("%w: tracker state of %d bytes is too short", ErrCorrupt, len(data))
	}
	if data[0] != stateVersion {
		return fmt.Errorf("%w: tracker state version %d, want %d", ErrCorrupt, data[0], stateVersion)
	}
	wm := int64(binary.BigEndian.Uint64(data[1:]))
	n := uint64(binary.BigEndian.Uint32(data[9:]))
	if uint64(len(data)-stateHeader) != n*stateInput {
		return fmt.Errorf("%w: tracker state of %d bytes does not hold %d inputs", ErrCorrupt, len(data), n)
	}
	if n != uint64(len(t.inputs)) {
		return fmt.Errorf("%w: tracker state has %d inputs, the tracker %d", ErrInvalid, n, len(t.inputs))
	}
	lo, active := int64(math.MaxInt64), 0
	for p := data[stateHeader:]; len(p) > 0; p = p[stateInput:] {
		flags := p[8]
		if flags&^flagsKnown != 0 {
			return fmt.Errorf("%w: unknown input flags %#x", ErrCorrupt, flags)
		}
		if flags&flagIdle == 0 {
			active++
			lo = min(lo, int64(binary.BigEndian.Uint64(p)))
		}
	}
	if active > 0 && lo > wm {
		return fmt.Errorf("%w: watermark %d is below the minimum %d of the active inputs", ErrCorrupt, wm, lo)
	}
	t.wm = wm
	for i, p := 0, data[stateHeader:]; i < len(t.inputs); i, p = i+1, p[stateInput:] {
		t.inputs[i] = input{wm: int64(binary.BigEndian.Uint64(p)), idle: p[8]&flagIdle != 0}
	}
	t.recompute()
	return nil
}
