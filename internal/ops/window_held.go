package ops

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"math"
	"reflect"
	"slices"
	"unsafe"

	"github.com/sluice-streams/sluice/serde"
)

// HoldWindows says whether the runtime of tumbling and hopping windows
// holds the windows it opens in a transaction in memory (heldWindows),
// where it may (holds), the default. Tests turn it off to compare the
// results with those of the store alone.
var HoldWindows = true

// holds says whether a runtime of c may hold windows in memory, if they
// are time windows: with an aggregate whose serde is exact (serde.Exact),
// so that keeping it decoded changes no result and defers no encoding
// error to the flush, and whose type holds no reference, so that an adder
// that changes its aggregate in place cannot change the state a unit's
// Rollback returns to.
func holds[K, V, A any](c WindowConfig[K, V, A]) bool {
	_, exact := c.Values.(serde.Exact)
	return HoldWindows && exact && c.Elements == nil && plain(reflect.TypeFor[A]())
}

// plain says whether values of type t hold no reference: no pointer,
// slice, map, channel, function or interface.
func plain(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return plain(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !plain(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}

// heldWindows are the windows a window runtime opened in the open
// transaction and holds in memory, decoded, instead of in its store: a
// window opened and closed within one transaction, most of them when a
// key has a record or two a window, never costs a store write, an expiry
// entry, a range over the expiry index, or an encoding of its aggregate.
//
// A held window is one the committed state lacks. The store gets it, as
// the store path (Window.process) would have kept it, with its expiry
// entry:
//
//   - when the transaction is about to end (Spill, exec.Holder);
//   - when its trigger sets a timer that needs an index entry (an event
//     timer before the close, any processing-time timer): then it stays in
//     the store from that record on.
//
// A held window closes in the same order as those in the store (see
// Window.OnWatermark), so holding changes no result nor its place. Holding
// is undone with the task's units (Mark, Rollback) and dropped at an abort.
type heldWindows[A any] struct {
	// byKey maps a held window's data key to it; the key strings share
	// the windows' key bytes, which are never written after.
	byKey map[string]*heldWindow[A]
	// order lists the windows in the order they were opened, some gone:
	// Spill writes them in it, so that what reaches the store and the
	// changelog does not depend on a map's order.
	order []*heldWindow[A]
	// due lists the windows by close time, some gone; times holds due's
	// keys in ascending order.
	due   map[int64][]*heldWindow[A]
	times []int64
	// undo holds how to undo the changes since Mark, while marked.
	marked bool
	undo   []heldUndo[A]
	bytes  int
	// slab and keys are where open makes the next windows and copies
	// their keys: chunks the collector frees once no window of theirs is
	// held, as every held window is gone by the transaction's end.
	slab []heldWindow[A]
	keys []byte
	// sortBuf and sortTmp are appendSorted's, kept from call to call.
	sortBuf, sortTmp []byPrefix
	// closed counts the windows closed while held since the last flush;
	// outlived, the flushes in a row at which nearly all held windows
	// outlived their transaction; rest is how many more transactions hold
	// none (pace).
	closed, outlived, rest int
}

// heldWindow is a window held in memory.
type heldWindow[A any] struct {
	key   []byte // its data key (Window.windowKey)
	close int64  // when it closes (Window.closeAt)
	w     WindowState[A]
	// gone: closed, moved to the store, or its opening undone.
	gone bool
}

// heldOverhead estimates the memory of a held window beyond its key and
// its aggregate's own allocations: the window, its map entry and its two
// list slots.
const heldOverhead = 256

type heldUndo[A any] struct {
	h    *heldWindow[A]
	op   heldOp
	prev WindowState[A] // heldChanged's
}

type heldOp uint8

const (
	heldOpened  heldOp = iota // undone: forgotten
	heldChanged               // undone: its state before (prev)
	heldLeft                  // moved to the store; undone: held again
)

func newHeldWindows[A any]() *heldWindows[A] {
	return &heldWindows[A]{byKey: map[string]*heldWindow[A]{}, due: map[int64][]*heldWindow[A]{}}
}

// keyString is h's key as a string sharing its bytes.
func (h *heldWindow[A]) keyString() string {
	return unsafe.String(unsafe.SliceData(h.key), len(h.key))
}

// get returns the window held under data key, or nil.
func (hw *heldWindows[A]) get(key []byte) *heldWindow[A] { return hw.byKey[string(key)] }

// heldChunk is how many windows, and heldKeyChunk how many bytes of keys,
// open takes from the allocator at once.
const (
	heldChunk    = 128
	heldKeyChunk = 8 << 10
)

// open holds the new window w under key (copied), closing at close.
func (hw *heldWindows[A]) open(key []byte, close int64, w WindowState[A]) {
	if len(hw.slab) == 0 {
		hw.slab = make([]heldWindow[A], heldChunk)
	}
	h := &hw.slab[0]
	hw.slab = hw.slab[1:]
	*h = heldWindow[A]{key: hw.copyKey(key), close: close, w: w}
	hw.byKey[h.keyString()] = h
	hw.order = append(hw.order, h)
	if _, ok := hw.due[close]; !ok {
		i, _ := slices.BinarySearch(hw.times, close)
		hw.times = slices.Insert(hw.times, i, close)
	}
	hw.due[close] = append(hw.due[close], h)
	hw.bytes += len(h.key) + heldOverhead
	hw.log(heldUndo[A]{h: h, op: heldOpened})
}

// copyKey returns a copy of key, its capacity its length, from the chunk
// of keys.
func (hw *heldWindows[A]) copyKey(key []byte) []byte {
	if len(key) > heldKeyChunk/8 {
		return bytes.Clone(key)
	}
	if cap(hw.keys)-len(hw.keys) < len(key) {
		hw.keys = make([]byte, 0, heldKeyChunk)
	}
	n := len(hw.keys)
	hw.keys = append(hw.keys, key...)
	return hw.keys[n:len(hw.keys):len(hw.keys)]
}

// change sets held window h's state to w.
func (hw *heldWindows[A]) change(h *heldWindow[A], w WindowState[A]) {
	hw.log(heldUndo[A]{h: h, op: heldChanged, prev: h.w})
	h.w = w
}

// leave stops holding h, which moved to the store.
func (hw *heldWindows[A]) leave(h *heldWindow[A]) {
	hw.log(heldUndo[A]{h: h, op: heldLeft})
	hw.forget(h)
}

func (hw *heldWindows[A]) forget(h *heldWindow[A]) {
	h.gone = true
	delete(hw.byKey, h.keyString())
	hw.bytes -= len(h.key) + heldOverhead
}

func (hw *heldWindows[A]) log(u heldUndo[A]) {
	if hw.marked {
		hw.undo = append(hw.undo, u)
	}
}

// first is at most the earliest close time of a held window,
// math.MaxInt64 if none is held.
func (hw *heldWindows[A]) first() int64 {
	if len(hw.times) == 0 {
		return math.MaxInt64
	}
	return hw.times[0]
}

// takeDue stops holding the windows that close at or before wm and
// returns them, in the order the expiry index would hold them: by close
// time, then by data key. Closing is not a change of a unit: the task
// closes windows between units (exec.WatermarkListener), so it is not
// logged.
func (hw *heldWindows[A]) takeDue(wm int64) []*heldWindow[A] {
	var due []*heldWindow[A]
	n := 0
	for _, t := range hw.times {
		if t > wm {
			break
		}
		due = hw.appendSorted(due, hw.due[t])
		delete(hw.due, t)
		n++
	}
	hw.times = append(hw.times[:0], hw.times[n:]...)
	for _, h := range due {
		hw.forget(h)
	}
	hw.closed += len(due)
	if len(hw.order) > 2*len(hw.byKey)+64 {
		// The closed windows leave the list, so that a transaction
		// that opens and closes many keeps only those still held.
		hw.order = slices.DeleteFunc(hw.order, func(h *heldWindow[A]) bool { return h.gone })
	}
	return due
}

// appendSorted appends to dst the windows of hs not gone, by data key.
//
// The windows of one close time are a transaction's windows of one start,
// thousands at a time, whose keys begin alike: laid out by start, with the
// prefix and the start. They are sorted by the sixteen bytes of their keys
// after what all of them share, held beside them (sortByPrefix), and only
// where those are equal by the keys.
func (hw *heldWindows[A]) appendSorted(dst, hs []*heldWindow[A]) []*heldWindow[A] {
	buf := hw.sortBuf[:0]
	var first []byte
	shared := 0
	for i, h := range hs {
		if h.gone {
			continue
		}
		if first == nil {
			first, shared = h.key, len(h.key)
		}
		shared = commonPrefix(first[:shared], h.key)
		buf = append(buf, byPrefix{i: i})
	}
	for i := range buf {
		var p [16]byte
		copy(p[:], hs[buf[i].i].key[shared:])
		buf[i].hi, buf[i].lo = binary.BigEndian.Uint64(p[:8]), binary.BigEndian.Uint64(p[8:])
	}
	hw.sortTmp = sortByPrefix(buf, hw.sortTmp, func(i int) []byte { return hs[i].key })
	for _, b := range buf {
		dst = append(dst, hs[b.i])
	}
	hw.sortBuf = buf[:0]
	return dst
}

// commonPrefix is the length of the prefix a and b share.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// byPrefix is the i-th window of a list beside sixteen bytes of its key,
// after those its group shares (appendSorted). It holds no pointer: the
// sort moves it with no write barrier.
type byPrefix struct {
	hi, lo uint64
	i      int
}

// radixMin is the fewest windows sortByPrefix sorts by radix: below it a
// comparison sort is as fast.
const radixMin = 64

// sortByPrefix sorts buf by the sixteen bytes, then, where those are
// equal, by key(i) as bytes.Compare orders them, using tmp as room; it
// returns tmp, to be passed again.
//
// The sixteen bytes are sorted by radix: a stable pass for each byte,
// least significant first, skipping the bytes every window has alike. A
// close time's windows are thousands, with keys that often differ in a
// few bytes only (the bench's 8-digit keys in 5 of them), and a
// comparison sort of them was 4 % of the windowed job's CPU.
func sortByPrefix(buf, tmp []byPrefix, key func(i int) []byte) []byPrefix {
	byKey := func(a, b byPrefix) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		return bytes.Compare(key(a.i), key(b.i))
	}
	if len(buf) < radixMin {
		slices.SortFunc(buf, byKey)
		return tmp
	}
	orHi, andHi, orLo, andLo := uint64(0), ^uint64(0), uint64(0), ^uint64(0)
	for _, b := range buf {
		orHi, andHi = orHi|b.hi, andHi&b.hi
		orLo, andLo = orLo|b.lo, andLo&b.lo
	}
	tmp = slices.Grow(tmp[:0], len(buf))[:len(buf)]
	src, dst := buf, tmp
	for pass := range 16 {
		differ, shift := orLo^andLo, uint(8*(pass%8))
		if pass >= 8 {
			differ = orHi ^ andHi
		}
		if differ>>shift&0xff == 0 {
			continue
		}
		var at [256]int
		for i := range src {
			at[src[i].digit(pass, shift)]++
		}
		n := 0
		for d, c := range at {
			at[d] = n
			n += c
		}
		for _, b := range src {
			d := b.digit(pass, shift)
			dst[at[d]] = b
			at[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &buf[0] {
		copy(buf, src)
	}
	for i := 0; i < len(buf); {
		j := i + 1
		for j < len(buf) && buf[j].hi == buf[i].hi && buf[j].lo == buf[i].lo {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(buf[i:j], byKey)
		}
		i = j
	}
	return tmp[:0]
}

// digit is the byte of b's sixteen that pass sorts by: lo's for the first
// eight passes, hi's for the rest, shift bits up.
func (b byPrefix) digit(pass int, shift uint) byte {
	if pass < 8 {
		return byte(b.lo >> shift)
	}
	return byte(b.hi >> shift)
}

// takeAll returns the windows held, in the order they were opened, and
// holds none after. The list is valid until the next open.
func (hw *heldWindows[A]) takeAll() []*heldWindow[A] {
	live := slices.DeleteFunc(hw.order, func(h *heldWindow[A]) bool { return h.gone })
	hw.order = hw.order[:0]
	for _, h := range live {
		hw.forget(h)
	}
	clear(hw.due)
	hw.times = hw.times[:0]
	return live
}

// holding says whether the transaction holds the windows it opens.
func (hw *heldWindows[A]) holding() bool { return hw.rest == 0 }

// pace decides at the flush, which wrote spilled held windows to the
// store, whether the next transactions hold windows. When nearly every
// window held outlived its transaction (8 spilled for each closed, and 64
// at least) at three flushes in a row, holding only added its bookkeeping
// to the store path's: so it is when a job keeps up with live input and
// its windows span many transactions. (One such flush says little: the
// first transactions of a job close no window before the watermark
// passes the first ones.) The next 15 transactions then hold none, and the
// one after holds again, to find out whether that is still so (a backlog
// may have come).
func (hw *heldWindows[A]) pace(spilled int) {
	switch {
	case hw.rest > 0:
		hw.rest--
	case spilled >= 64 && spilled >= 8*hw.closed:
		if hw.outlived++; hw.outlived == 3 {
			hw.outlived, hw.rest = 0, 15
		}
	default:
		hw.outlived = 0
	}
	hw.closed = 0
}

// Mark, Rollback and Drop are exec.Holder's, for Window.

func (hw *heldWindows[A]) mark() {
	clear(hw.undo)
	hw.undo, hw.marked = hw.undo[:0], true
}

func (hw *heldWindows[A]) rollback() {
	if !hw.marked {
		return
	}
	for i := len(hw.undo) - 1; i >= 0; i-- {
		u := hw.undo[i]
		switch u.op {
		case heldOpened:
			hw.forget(u.h)
		case heldChanged:
			u.h.w = u.prev
		case heldLeft:
			u.h.gone = false
			hw.byKey[u.h.keyString()] = u.h
			hw.bytes += len(u.h.key) + heldOverhead
		}
	}
	clear(hw.undo)
	hw.undo, hw.marked = hw.undo[:0], false
}

func (hw *heldWindows[A]) drop() {
	clear(hw.byKey)
	clear(hw.order)
	hw.order = hw.order[:0]
	clear(hw.due)
	hw.times = hw.times[:0]
	clear(hw.undo)
	hw.undo, hw.marked = hw.undo[:0], false
	hw.bytes, hw.closed = 0, 0
}
