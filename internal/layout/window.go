package layout

import (
	"encoding/binary"
	"fmt"

	"github.com/sluice-streams/sluice/window"
)

// Window store layout, shared by tumbling, hopping, session and sliding
// windows and by the stream-join buffers. Every key starts with a
// lower-case letter, so the task's time state (TimeStateKey) cannot
// collide:
//
//	d uvarint(len(key)) key start → the window's state (WindowValue)
//	f at <d-suffix>               → 1   the window's event timer
//	p at <d-suffix>               → 1   the window's processing-time timer
//	x at <d-suffix>               → 1   remove the window when the watermark reaches at
//	e <d-suffix> seq              → one record kept in the window (elements.go)
//
// or, in a store laid out by start:
//
//	w start uvarint(len(key)) key → the window's state (WindowValue)
//	g at <w-suffix>               → 1   the window's event timer
//	q at <w-suffix>               → 1   the window's processing-time timer
//
// An index key is its prefix, the time it is due, and the data key without
// its prefix byte, so that it turns back into the data key
// (WindowKeyFromIndex, DataKeyFromIndex).
//
// A store of fixed-size windows that keep an aggregate (tumbling and
// hopping) is laid out by start (w) unless it already holds windows laid
// out by key (d); see ops.Window. Its windows close in the order of their
// keys, so the windows due are one range, read and deleted as one: no
// expiry entries (x). Its timers have prefixes of their own, since an
// index key's suffix reads differently in each layout.
const (
	WindowData        = 'd'
	WindowByStart     = 'w'
	WindowFire        = 'f'
	WindowProc        = 'p'
	WindowExpire      = 'x'
	WindowFireByStart = 'g'
	WindowProcByStart = 'q'
)

// IndexValue is the value of every index entry: the key says everything.
var IndexValue = []byte{1}

// WindowKey appends to dst the key of the window starting at start of the
// key whose encoding is kb.
func WindowKey(dst, kb []byte, start int64) []byte {
	dst = append(dst, WindowData)
	dst = binary.AppendUvarint(dst, uint64(len(kb)))
	dst = append(dst, kb...)
	return AppendTime(dst, start)
}

// StartKey appends to dst the key, laid out by start (WindowByStart), of
// the window starting at start of the key whose encoding is kb.
func StartKey(dst, kb []byte, start int64) []byte {
	dst = AppendTime(append(dst, WindowByStart), start)
	dst = binary.AppendUvarint(dst, uint64(len(kb)))
	return append(dst, kb...)
}

// WindowStart is the start of the window whose data key, laid out by key
// or by start, is k.
func WindowStart(k []byte) int64 {
	if k[0] == WindowByStart {
		return ReadTime(k[1:9])
	}
	return ReadTime(k[len(k)-8:])
}

// WindowKeyPrefix is the prefix of all of kb's windows.
func WindowKeyPrefix(kb []byte) []byte {
	return append(binary.AppendUvarint([]byte{WindowData}, uint64(len(kb))), kb...)
}

// IndexKey is the key of the entry in the index prefix (WindowFire,
// WindowProc, WindowExpire; by start WindowFireByStart, WindowProcByStart)
// that makes the window with data key data due at at.
func IndexKey(prefix byte, at int64, data []byte) []byte {
	return AppendIndexKey(make([]byte, 0, 9+len(data)), prefix, at, data)
}

// AppendIndexKey appends IndexKey(prefix, at, data) to dst.
func AppendIndexKey(dst []byte, prefix byte, at int64, data []byte) []byte {
	return append(AppendTime(append(dst, prefix), at), data[1:]...)
}

// ParseWindowKey splits a window key, laid out by key or by start, into the
// key's encoding and the window start.
func ParseWindowKey(k []byte) (kb []byte, start int64, err error) {
	if len(k) > 0 && k[0] == WindowByStart {
		if len(k) >= 10 {
			n, w := binary.Uvarint(k[9:])
			if w > 0 && uint64(len(k)) == 9+uint64(w)+n {
				return k[9+w:], ReadTime(k[1:9]), nil
			}
		}
		return nil, 0, fmt.Errorf("%w: window store key of %d bytes", window.ErrCorrupt, len(k))
	}
	if len(k) < 2 {
		return nil, 0, fmt.Errorf("%w: window store key of %d bytes", window.ErrCorrupt, len(k))
	}
	n, w := binary.Uvarint(k[1:])
	if w <= 0 || uint64(len(k)) != 1+uint64(w)+n+8 {
		return nil, 0, fmt.Errorf("%w: window store key of %d bytes", window.ErrCorrupt, len(k))
	}
	kb = k[1+w : 1+w+int(n)]
	return kb, ReadTime(k[len(k)-8:]), nil
}

// WindowKeyFromIndex turns an index key back into its window key, laid
// out by key.
func WindowKeyFromIndex(ik []byte) []byte {
	return DataKeyFromIndex(WindowData, ik)
}

// DataKeyFromIndex turns an index key back into its window key, whose
// prefix is data (WindowData or WindowByStart).
func DataKeyFromIndex(data byte, ik []byte) []byte {
	return append([]byte{data}, ik[9:]...)
}

// WindowValue is the value of a window's data key, without its aggregate:
//
//	end int64, count int64, event timer int64, processing timer int64,
//	next element seq int64, flags uint8,
//	[uvarint since-fire]           (flags bit 2)
//	[uvarint len, emitted result]  (flags bit 3)
//	aggregate                      (flags bit 0; empty when the records are kept as elements)
//
// The int64s are 8 bytes big-endian (two's complement, unlike the times in
// keys). Flags: bit 0 the window holds records; bit 1 a result of the
// window (its bounds) went downstream and was not retracted since; bit 2
// the entry has the since-fire count and bit 1 is meaningful (every entry
// written now); bit 3 the emitted result differs from the aggregate, and
// is stored before it (with bit 1 set and bit 3 clear, what went out is
// the aggregate; only sessions keep a differing one, for their
// retraction). An entry without bit 2 was written before these facts were
// kept (Legacy): its since-fire count is its count, and whether it was
// emitted is for its reader to infer; only bit 0 may be set.
type WindowValue struct {
	End                   int64
	Count                 int64
	EventTimer, ProcTimer int64
	// Seq numbers the window's next element (elements.go).
	Seq       int64
	SinceFire int64
	// Records: the window holds records (flags bit 0), an aggregate or
	// elements.
	Records bool
	// Emitted is flags bit 1.
	Emitted bool
	// Shown is the emitted result when it is stored (flags bit 3), nil
	// otherwise. Parsed, it shares the value's bytes.
	Shown []byte
	// Legacy: written without bit 2; Emitted is false, SinceFire is Count.
	// AppendWindowValue ignores it: every entry written has bit 2.
	Legacy bool
}

// The flag bits of a WindowValue.
const (
	windowFlagRecords = 1 << 0
	windowFlagEmitted = 1 << 1
	windowFlagKept    = 1 << 2
	windowFlagShown   = 1 << 3
	windowFlagsAll    = windowFlagRecords | windowFlagEmitted | windowFlagKept | windowFlagShown
)

// WindowValueHeader is the length of a WindowValue's fixed part, up to and
// including its flags.
const WindowValueHeader = 8 + 8 + 8 + 8 + 8 + 1

// AppendWindowValue appends the encoding of v followed by agg, the encoded
// aggregate (nil when the window holds none, or keeps elements), to dst.
// v.Shown is written when it is not nil: whether it differs from the
// aggregate is for the caller to decide.
func AppendWindowValue(dst []byte, v WindowValue, agg []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.End))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.Count))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.EventTimer))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.ProcTimer))
	dst = binary.BigEndian.AppendUint64(dst, uint64(v.Seq))
	flags := byte(windowFlagKept)
	if v.Records {
		flags |= windowFlagRecords
	}
	if v.Emitted {
		flags |= windowFlagEmitted
	}
	if v.Shown != nil {
		flags |= windowFlagShown
	}
	dst = append(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(v.SinceFire))
	if v.Shown != nil {
		dst = binary.AppendUvarint(dst, uint64(len(v.Shown)))
		dst = append(dst, v.Shown...)
	}
	return append(dst, agg...)
}

// ParseWindowValue reads a window's value; agg is the encoded aggregate,
// the rest of val (empty in element mode). Undefined flags, a legacy entry
// with new flags and truncated fields are window.ErrCorrupt.
func ParseWindowValue(val []byte) (v WindowValue, agg []byte, err error) {
	corrupt := func() (WindowValue, []byte, error) {
		return WindowValue{}, nil, fmt.Errorf("%w: window value of %d bytes", window.ErrCorrupt, len(val))
	}
	if len(val) < WindowValueHeader {
		return corrupt()
	}
	flags := val[40]
	if flags&^windowFlagsAll != 0 || flags&windowFlagKept == 0 && flags&^windowFlagRecords != 0 {
		return corrupt()
	}
	v = WindowValue{
		End:        int64(binary.BigEndian.Uint64(val)),
		Count:      int64(binary.BigEndian.Uint64(val[8:])),
		EventTimer: int64(binary.BigEndian.Uint64(val[16:])),
		ProcTimer:  int64(binary.BigEndian.Uint64(val[24:])),
		Seq:        int64(binary.BigEndian.Uint64(val[32:])),
		Records:    flags&windowFlagRecords != 0,
		Emitted:    flags&windowFlagEmitted != 0,
	}
	rest := val[WindowValueHeader:]
	if flags&windowFlagKept == 0 {
		v.SinceFire, v.Legacy = v.Count, true
		return v, rest, nil
	}
	since, n := binary.Uvarint(rest)
	if n <= 0 {
		return corrupt()
	}
	v.SinceFire, rest = int64(since), rest[n:]
	if flags&windowFlagShown != 0 {
		l, n := binary.Uvarint(rest)
		if n <= 0 || uint64(len(rest)-n) < l {
			return corrupt()
		}
		v.Shown, rest = rest[n:n+int(l)], rest[n+int(l):]
	}
	return v, rest, nil
}
