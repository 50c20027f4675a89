package layout

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// entryBuilders builds, with this package's own encoders, a store key of
// each (kind, prefix byte) row of Prefixes that belongs to the record key
// kb; at is a time and seq a sequence number to put in it. A row without a
// builder fails TestRecordKeyCoversPrefixes.
var entryBuilders = map[StoreKind]map[byte]func(kb []byte, at, seq int64) []byte{
	KindWindow: {
		WindowData:    func(kb []byte, at, _ int64) []byte { return WindowKey(nil, kb, at) },
		WindowFire:    func(kb []byte, at, _ int64) []byte { return IndexKey(WindowFire, at-1, WindowKey(nil, kb, at)) },
		WindowProc:    func(kb []byte, at, _ int64) []byte { return IndexKey(WindowProc, at, WindowKey(nil, kb, at)) },
		WindowExpire:  func(kb []byte, at, _ int64) []byte { return IndexKey(WindowExpire, at, WindowKey(nil, kb, at)) },
		WindowByStart: func(kb []byte, at, _ int64) []byte { return StartKey(nil, kb, at) },
		WindowFireByStart: func(kb []byte, at, _ int64) []byte {
			return IndexKey(WindowFireByStart, at-1, StartKey(nil, kb, at))
		},
		WindowProcByStart: func(kb []byte, at, _ int64) []byte {
			return IndexKey(WindowProcByStart, at, StartKey(nil, kb, at))
		},
		WindowElement: func(kb []byte, at, seq int64) []byte {
			return ElementKey(WindowKey(nil, kb, at), seq)
		},
	},
	KindSliding: {
		WindowData:    func(kb []byte, at, _ int64) []byte { return WindowKey(nil, kb, at) },
		WindowFire:    func(kb []byte, at, _ int64) []byte { return IndexKey(WindowFire, at, WindowKey(nil, kb, at)) },
		WindowExpire:  func(kb []byte, at, _ int64) []byte { return IndexKey(WindowExpire, at, WindowKey(nil, kb, at)) },
		SlidingRecord: func(kb []byte, at, seq int64) []byte { return SlidingRecordKey(kb, at, seq) },
		SlidingRecordExpire: func(kb []byte, at, seq int64) []byte {
			return IndexKey(SlidingRecordExpire, at, SlidingRecordKey(kb, at, seq))
		},
	},
	KindJoin: {
		JoinRecord: func(kb []byte, at, seq int64) []byte { return JoinKey(kb, JoinSegment(at, 60_000), at, seq) },
		WindowExpire: func(kb []byte, at, seq int64) []byte {
			return JoinIndexKey(at+60_000, JoinKey(kb, JoinSegment(at, 60_000), at, seq))
		},
		// A record of the layout before segments.
		WindowData: func(kb []byte, at, seq int64) []byte {
			return binary.BigEndian.AppendUint64(AppendTime(WindowKeyPrefix(kb), at), uint64(seq))
		},
	},
	KindState: {
		StateValue: func(kb []byte, _, _ int64) []byte { return ValueKey(kb) },
		StateList:  func(kb []byte, _, _ int64) []byte { return ListKey(kb) },
		StateMap: func(kb []byte, _, seq int64) []byte {
			return append(MapPrefix(kb), bytes.Repeat([]byte{byte(seq)}, int(seq%5))...)
		},
	},
	KindTimers: {
		TimerEvent:      func(kb []byte, at, _ int64) []byte { return TimerKey(TimerEvent, at, kb) },
		TimerProcessing: func(kb []byte, at, _ int64) []byte { return TimerKey(TimerProcessing, at, kb) },
	},
	KindKV: {0: func(kb []byte, _, _ int64) []byte { return kb }},
	KindSubscriptions: {0: func(kb []byte, _, seq int64) []byte {
		return SubscriptionKey(SubscriptionPrefix(kb), testkeys.Bytes()[seq%40])
	}},
}

// perTaskKeys are the keys of entries that belong to their task.
var perTaskKeys = map[StoreKind]map[byte][]byte{
	KindState: {StateClock: StateClockKey},
}

func init() {
	for _, k := range TimeStateKinds {
		if perTaskKeys[k] == nil {
			perTaskKeys[k] = map[byte][]byte{}
		}
		perTaskKeys[k][TimeStateKey[0]] = TimeStateKey
	}
}

var times = []int64{math.MinInt64 + 1, -1, 0, 1, 1 << 40, math.MaxInt64}

// TestRecordKeyCoversPrefixes: every row of the table of prefixes and
// every unprefixed layout gives back, for keys of every length and bytes,
// the record key its entry was built from, or is per task.
func TestRecordKeyCoversPrefixes(t *testing.T) {
	rows := append(append([]Prefix(nil), Prefixes...), Unprefixed...)
	for _, p := range rows {
		if want, ok := perTaskKeys[p.Kind][p.Byte]; ok {
			kb, perTask, err := RecordKey(p.Kind, want)
			if err != nil || !perTask || kb != nil {
				t.Errorf("%s %q: %q, per task %v, %v", p.Kind, p.Byte, kb, perTask, err)
			}
			continue
		}
		build := entryBuilders[p.Kind][p.Byte]
		if build == nil {
			t.Errorf("%s %q (%s): no entry builder, so RecordKey is untested for it", p.Kind, p.Byte, p.Key)
			continue
		}
		for i, kb := range testkeys.Bytes() {
			for j, at := range times {
				key := build(kb, at, int64(i*len(times)+j))
				got, perTask, err := RecordKey(p.Kind, key)
				if err != nil || perTask || !bytes.Equal(got, kb) {
					t.Fatalf("%s %q key %x: record key %x, per task %v, %v; want %x", p.Kind, p.Byte, key, got, perTask, err, kb)
				}
			}
		}
	}
}

// TestRecordKeyRejects is the negative control: prefixes a kind does not
// have, per-task bytes with more after them, and every truncation and
// extension of a well-formed key are ErrUnknownKey, never a panic or a
// wrong key.
func TestRecordKeyRejects(t *testing.T) {
	for _, c := range []struct {
		kind StoreKind
		key  []byte
	}{
		{KindWindow, []byte{}},
		{KindWindow, []byte("rX")},        // sliding's records are not a window store's
		{KindSliding, []byte("eX")},       // nor are elements a sliding store's
		{KindJoin, []byte("f")},           // a join buffer has no fire index
		{KindTimers, []byte("x")},         // nor do timers
		{KindState, []byte("cc")},         // the clock is one byte
		{KindTime, []byte("TT")},          // so is the time state
		{KindTime, []byte("d\x00")},       // a time store holds only it
		{StoreKind("bloom"), []byte("d")}, // no such layout
		{KindSubscriptions, []byte{0x80}}, // a uvarint that does not end
		{KindSubscriptions, []byte{5, 'a'}},
	} {
		if kb, _, err := RecordKey(c.kind, c.key); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("%s %q: %x, %v; want ErrUnknownKey", c.kind, c.key, kb, err)
		}
	}
	// Cutting a byte off a key or adding one is caught, or changes the
	// record key, for every layout but the two whose keys end in a key of
	// their own (a map state's map key, a subscription's left key).
	kb := []byte("some-key")
	for kind, bs := range entryBuilders {
		for b, build := range bs {
			if kind == KindSubscriptions || kind == KindState && b == StateMap {
				continue
			}
			key := build(kb, 7, 3)
			for _, bad := range [][]byte{key[:len(key)-1], append(append([]byte(nil), key...), 0)} {
				got, _, err := RecordKey(kind, bad)
				if err == nil && bytes.Equal(got, kb) {
					t.Errorf("%s %q: %x gave the record key of %x", kind, b, bad, key)
				}
			}
		}
	}
}

// FuzzRecordKey: RecordKey never panics on any bytes in any layout, and a
// record key it finds is a run of the store key's own bytes, which for
// the layouts with a length prefix is the run the prefix says.
func FuzzRecordKey(f *testing.F) {
	for _, bs := range entryBuilders {
		for _, build := range bs {
			f.Add(build([]byte("k"), 7, 3))
			f.Add(build(testkeys.Bytes()[130], -1, 0))
		}
	}
	f.Add([]byte("T"))
	f.Add([]byte{0x80, 0x80, 0x80})
	kinds := append([]StoreKind{KindKV, KindSubscriptions, KindState, "other"}, TimeStateKinds...)
	f.Fuzz(func(t *testing.T, key []byte) {
		for _, kind := range kinds {
			kb, perTask, err := RecordKey(kind, key)
			switch {
			case err != nil:
				if !errors.Is(err, ErrUnknownKey) || kb != nil || perTask {
					t.Fatalf("%s %x: %x, %v, %v", kind, key, kb, perTask, err)
				}
			case perTask:
				if kb != nil || len(key) != 1 {
					t.Fatalf("%s %x: per task with %x", kind, key, kb)
				}
			case !bytes.Contains(key, kb):
				t.Fatalf("%s %x: record key %x is not in it", kind, key, kb)
			}
		}
	})
}
