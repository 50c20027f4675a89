package layout

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrUnknownKey is the error of RecordKey for a store key that no layout
// of its store's kind writes: an unknown kind, a prefix byte the kind's
// table (Prefixes) does not have, or a key too short or too long for its
// prefix's drawing.
var ErrUnknownKey = errors.New("layout: not a key of the store's layout")

// RecordKey returns the encoding of the record key that the entry with
// store key key, in a store of kind, belongs to: the key a keyed record
// carried on the topic its task read (its source or repartition topic), so
// that the entry belongs to the task of that key's partition. For a
// foreign-key join's subscriptions that is the foreign key, by which the
// subscriptions were repartitioned, not the left key.
//
// perTask reports an entry that belongs to its task and to no key (the
// time state, TimeStateKey; a keyed state's clock, StateClockKey); kb is
// then nil. kb shares key's bytes.
//
// Every (kind, byte) row of Prefixes and every layout of Unprefixed has a
// case here; a test holds the two together, so a new prefix without one
// fails it.
func RecordKey(kind StoreKind, key []byte) (kb []byte, perTask bool, err error) {
	switch kind {
	case KindKV:
		return key, false, nil
	case KindSubscriptions:
		return lenKey(kind, key, 0, -1)
	}
	if len(key) == 0 {
		return nil, false, fmt.Errorf("%w: %s store key of 0 bytes", ErrUnknownKey, kind)
	}
	if !HasPrefix(kind, key[0]) {
		return nil, false, fmt.Errorf("%w: %s store has no key with prefix byte %#02x (%q)", ErrUnknownKey, kind, key[0], key[0])
	}
	b := key[0]
	if b == TimeStateKey[0] {
		return exact(kind, key, TimeStateKey)
	}
	switch kind {
	case KindWindow, KindSliding:
		switch b {
		case WindowData:
			return lenKey(kind, key, 1, 8) // start
		case WindowFire, WindowProc, WindowExpire:
			return lenKey(kind, key, 9, 8) // at, then the data key's suffix
		case WindowByStart:
			return lenKey(kind, key, 9, 0) // start
		case WindowFireByStart, WindowProcByStart:
			return lenKey(kind, key, 17, 0) // at, then the data key's suffix
		case WindowElement:
			return lenKey(kind, key, 1, 16) // start, seq
		case SlidingRecord:
			return lenKey(kind, key, 1, 16) // ts, seq
		case SlidingRecordExpire:
			return lenKey(kind, key, 9, 16) // at, then the record key's suffix
		}
	case KindJoin:
		switch b {
		case JoinRecord, WindowExpire:
			return lenKey(kind, key, 9, 16) // segment or due time, then ts, seq
		case WindowData:
			return lenKey(kind, key, 1, 16) // ts, seq
		}
	case KindState:
		switch b {
		case StateClock:
			return exact(kind, key, StateClockKey)
		case StateValue, StateList:
			return key[1:], false, nil
		case StateMap:
			return lenKey(kind, key, 1, -1) // then the map's own key
		}
	case KindTimers:
		if len(key) < 9 {
			return nil, false, fmt.Errorf("%w: %s store key of %d bytes", ErrUnknownKey, kind, len(key))
		}
		return key[9:], false, nil // at, then the key to the end
	}
	// A row of Prefixes without a case above: TestRecordKeyCoversPrefixes
	// keeps this unreachable.
	return nil, false, fmt.Errorf("%w: %s store key with prefix byte %#02x (%q) has no record key", ErrUnknownKey, kind, b, b)
}

// HasPrefix reports whether a store of kind has keys that begin with b
// (Prefixes); false for the unprefixed layouts.
func HasPrefix(kind StoreKind, b byte) bool {
	for _, p := range Prefixes {
		if p.Kind == kind && p.Byte == b {
			return true
		}
	}
	return false
}

// lenKey reads uvarint(len(kb)) kb at key[skip:]; tail is how many bytes
// must follow kb exactly, -1 for any number.
func lenKey(kind StoreKind, key []byte, skip, tail int) ([]byte, bool, error) {
	bad := func() ([]byte, bool, error) {
		return nil, false, fmt.Errorf("%w: %s store key of %d bytes", ErrUnknownKey, kind, len(key))
	}
	if len(key) < skip {
		return bad()
	}
	rest := key[skip:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)-w) {
		return bad()
	}
	kb, after := rest[w:w+int(n)], rest[w+int(n):]
	if tail >= 0 && len(after) != tail {
		return bad()
	}
	return kb, false, nil
}

// exact accepts key if it is want, a per-task key.
func exact(kind StoreKind, key, want []byte) ([]byte, bool, error) {
	if string(key) != string(want) {
		return nil, false, fmt.Errorf("%w: %s store key %q is not %q", ErrUnknownKey, kind, key, want)
	}
	return nil, true, nil
}
