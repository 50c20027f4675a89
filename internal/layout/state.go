package layout

import (
	"encoding/binary"
	"fmt"
)

// Keyed state layout (the Processor API's value, list, map, reducing and
// aggregating state). Each state is a store of its own; the first byte of
// every key names the kind of key:
//
//	c                                → 1, clock (8 bytes)         the state's clock (TTL only)
//	v key                            → entry                       value, reducing and aggregating state
//	l key                            → 1, (uvarint len, entry)...  list state: the whole list in one value
//	m uvarint(len(key)) key userkey  → entry                       map state: one store entry per map entry
//
// where an entry is a format byte, the write time when timed, then the
// value's bytes:
//
//	1 value                          EntryPlain: written without a TTL
//	2 at (8 bytes) value             EntryTimed: at is the write time, big-endian
//
// The format byte lets the layout evolve (a state may gain or lose a TTL
// between deployments); the kind byte keeps a state whose kind was changed
// under the same name from misreading its old entries, which it simply no
// longer sees. Value, reducing and aggregating state share the 'v' layout,
// so one may become another under the same name and keep its values.
//
// Map entries are length-prefixed by the key so that one key's entries are
// one contiguous range (MapPrefix), which no other key's entries can fall
// in even when one key's bytes begin with another's. A list is one value,
// as in Flink's RocksDB backend: reading it is one point lookup, whereas
// one entry per element would need a range scan, which in a Staged store
// costs a pass over every write staged since the commit; the price is that
// an Add rewrites the list.
//
// The clock and the write times are plain big-endian (not AppendTime's
// flipped sign): they are never negative and never part of a key.
const (
	StateClock = 'c'
	StateValue = 'v'
	StateList  = 'l'
	StateMap   = 'm'
)

// Value formats of keyed state.
const (
	EntryPlain  byte = 1 // the value's bytes follow
	EntryTimed  byte = 2 // the write time (8 bytes, big-endian), then the value's bytes
	ListFormat  byte = 1 // (uvarint len, entry) per element follows
	ClockFormat byte = 1 // the clock (8 bytes, big-endian) follows
)

// StateClockKey is the key of a state's clock. It must not be modified.
var StateClockKey = []byte{StateClock}

// StateCorruption is the error of a keyed state decoder given bytes this
// layout cannot have produced: it says what is wrong with them. The
// runtime reading them wraps it with its own sentinel (for keyed state,
// topology.ErrCorruptState), which comes first in the message.
type StateCorruption string

func (e StateCorruption) Error() string { return string(e) }

func corrupt(format string, args ...any) error {
	return StateCorruption(fmt.Sprintf(format, args...))
}

// ValueKey is the key of the value (reducing, aggregating) state of the key
// whose encoding is kb.
func ValueKey(kb []byte) []byte { return append([]byte{StateValue}, kb...) }

// ListKey is the key of the list of the key whose encoding is kb.
func ListKey(kb []byte) []byte { return append([]byte{StateList}, kb...) }

// MapPrefix is the prefix of all map entries of the key whose encoding is
// kb; the result has room to append a map key to.
func MapPrefix(kb []byte) []byte {
	return append(binary.AppendUvarint([]byte{StateMap}, uint64(len(kb))), kb...)
}

// AppendClock appends the value of a state's clock at ts.
func AppendClock(dst []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, ClockFormat), uint64(ts))
}

// ParseClock reads a state's clock; ok is false if b is not one.
func ParseClock(b []byte) (ts int64, ok bool) {
	if len(b) != 9 || b[0] != ClockFormat {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[1:])), true
}

// AppendEntry appends an entry holding the value bytes vb: timed with the
// write time at, or plain.
func AppendEntry(dst []byte, timed bool, at int64, vb []byte) []byte {
	if !timed {
		return append(append(dst, EntryPlain), vb...)
	}
	dst = binary.BigEndian.AppendUint64(append(dst, EntryTimed), uint64(at))
	return append(dst, vb...)
}

// Entry is a decoded entry: its value's bytes (the entry's own, not a
// copy), and its write time if timed.
type Entry struct {
	Payload []byte
	At      int64
	Timed   bool
}

// ParseEntry decodes an entry; the error is a StateCorruption.
func ParseEntry(b []byte) (Entry, error) {
	if len(b) == 0 {
		return Entry{}, corrupt("empty entry")
	}
	switch b[0] {
	case EntryPlain:
		return Entry{Payload: b[1:]}, nil
	case EntryTimed:
		if len(b) < 9 {
			return Entry{}, corrupt("timed entry of %d bytes", len(b))
		}
		at := int64(binary.BigEndian.Uint64(b[1:9]))
		if at < 0 {
			return Entry{}, corrupt("write time %d", at)
		}
		return Entry{Payload: b[9:], At: at, Timed: true}, nil
	}
	return Entry{}, corrupt("entry format %d", b[0])
}

// AppendListElement appends one element, the entry raw, to a list value
// (which begins with ListFormat).
func AppendListElement(dst, raw []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(raw))), raw...)
}

// ListElements calls fn with the raw entry of each element of the list
// value b, in order. An error from fn stops it and is returned as is; a
// list b that this layout cannot have produced is a StateCorruption.
func ListElements(b []byte, fn func(raw []byte) error) error {
	if len(b) == 0 || b[0] != ListFormat {
		return corrupt("list of %d bytes", len(b))
	}
	for rest := b[1:]; len(rest) > 0; {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return corrupt("list element length")
		}
		raw := rest[w : w+int(n)]
		rest = rest[w+int(n):]
		if err := fn(raw); err != nil {
			return err
		}
	}
	return nil
}
