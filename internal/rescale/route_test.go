package rescale_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/keyhash"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/rescale"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
)

// counts are the partition counts rescaling is checked for: 8 → 16 and
// 12 → 4 among them.
var counts = []int32{1, 4, 8, 12, 16}

// build makes, with internal/layout's own encoders, a store key of a
// (kind, prefix byte) row of the table of prefixes that belongs to the
// record key kb (for subscriptions: the foreign key); at and seq go where
// the layout has a time and a sequence number.
type build func(kb []byte, at, seq int64) []byte

// builders has one builder per row of layout.Prefixes and layout.Unprefixed
// (byte 0 for the unprefixed) that belongs to a key; a row without one
// fails TestRouteEveryLayout, so a new prefix cannot go untested.
var builders = map[layout.StoreKind]map[byte]build{
	layout.KindWindow: {
		layout.WindowData: func(kb []byte, at, _ int64) []byte { return layout.WindowKey(nil, kb, at) },
		layout.WindowFire: func(kb []byte, at, _ int64) []byte {
			return layout.IndexKey(layout.WindowFire, at, layout.WindowKey(nil, kb, at))
		},
		layout.WindowProc: func(kb []byte, at, _ int64) []byte {
			return layout.IndexKey(layout.WindowProc, at, layout.WindowKey(nil, kb, at))
		},
		layout.WindowExpire: func(kb []byte, at, _ int64) []byte {
			return layout.IndexKey(layout.WindowExpire, at, layout.WindowKey(nil, kb, at))
		},
		layout.WindowElement: func(kb []byte, at, seq int64) []byte {
			return layout.ElementKey(layout.WindowKey(nil, kb, at), seq)
		},
		layout.WindowByStart: func(kb []byte, at, _ int64) []byte { return layout.StartKey(nil, kb, at) },
		layout.WindowFireByStart: func(kb []byte, at, _ int64) []byte {
			return layout.IndexKey(layout.WindowFireByStart, at+9, layout.StartKey(nil, kb, at))
		},
		layout.WindowProcByStart: func(kb []byte, at, _ int64) []byte {
			return layout.IndexKey(layout.WindowProcByStart, at+9, layout.StartKey(nil, kb, at))
		},
	},
	layout.KindSliding: {
		layout.WindowData: func(kb []byte, at, _ int64) []byte { return layout.WindowKey(nil, kb, at) },
		layout.WindowFire: func(kb []byte, at, _ int64) []byte {
			return layout.IndexKey(layout.WindowFire, at, layout.WindowKey(nil, kb, at))
		},
		layout.WindowExpire: func(kb []byte, at, _ int64) []byte {
			return layout.IndexKey(layout.WindowExpire, at, layout.WindowKey(nil, kb, at))
		},
		layout.SlidingRecord: func(kb []byte, at, seq int64) []byte { return layout.SlidingRecordKey(kb, at, seq) },
		layout.SlidingRecordExpire: func(kb []byte, at, seq int64) []byte {
			return layout.IndexKey(layout.SlidingRecordExpire, at, layout.SlidingRecordKey(kb, at, seq))
		},
	},
	layout.KindJoin: {
		layout.JoinRecord: func(kb []byte, at, seq int64) []byte {
			return layout.JoinKey(kb, layout.JoinSegment(at, 60_000), at, seq)
		},
		layout.WindowExpire: func(kb []byte, at, seq int64) []byte {
			return layout.JoinIndexKey(at+60_000, layout.JoinKey(kb, layout.JoinSegment(at, 60_000), at, seq))
		},
		// A record of the layout before segments.
		layout.WindowData: func(kb []byte, at, seq int64) []byte {
			return binary.BigEndian.AppendUint64(layout.AppendTime(layout.WindowKeyPrefix(kb), at), uint64(seq))
		},
	},
	layout.KindState: {
		layout.StateValue: func(kb []byte, _, _ int64) []byte { return layout.ValueKey(kb) },
		layout.StateList:  func(kb []byte, _, _ int64) []byte { return layout.ListKey(kb) },
		layout.StateMap: func(kb []byte, _, seq int64) []byte {
			return append(layout.MapPrefix(kb), testkeys.Bytes()[seq%int64(testkeys.MaxLen+1)]...)
		},
	},
	layout.KindTimers: {
		layout.TimerEvent: func(kb []byte, at, _ int64) []byte {
			return layout.TimerKey(layout.TimerEvent, at, kb)
		},
		layout.TimerProcessing: func(kb []byte, at, _ int64) []byte {
			return layout.TimerKey(layout.TimerProcessing, at, kb)
		},
	},
	layout.KindKV: {0: func(kb []byte, _, _ int64) []byte { return kb }},
	layout.KindSubscriptions: {0: func(fk []byte, _, seq int64) []byte {
		left := testkeys.UUIDs(3)[seq%3]
		return layout.SubscriptionKey(layout.SubscriptionPrefix(fk), []byte(left))
	}},
}

// perTask are the per-task entries: the time state of every kind that can
// be a time store, and a keyed state's clock.
func perTask(kind layout.StoreKind, b byte) ([]byte, bool) {
	if kind == layout.KindState && b == layout.StateClock {
		return layout.StateClockKey, true
	}
	for _, k := range layout.TimeStateKinds {
		if k == kind && b == layout.TimeStateKey[0] {
			return layout.TimeStateKey, true
		}
	}
	return nil, false
}

// keys are adversarial record keys: every length 0..MaxLen as raw bytes
// and as UTF-8, UUIDs, the empty key.
func keys() [][]byte {
	ks := testkeys.Bytes()
	for _, s := range testkeys.All() {
		ks = append(ks, []byte(s))
	}
	return append(ks, []byte{})
}

var times = []int64{math.MinInt64 + 1, -1, 0, 1_700_000_000_000, math.MaxInt64}

type router func(kind layout.StoreKind, key []byte, n int32) (int32, bool, error)

// misrouted is the checker: for every row of the table of prefixes, every
// key, time and partition count, an entry built by the layout's encoders
// must go where the runtime partitions its record key
// (processor.KeyPartition, what the producer uses for repartition topics),
// and a per-task entry must say so. It returns the first few mistakes.
func misrouted(route router) []string {
	var bad []string
	rows := append(append([]layout.Prefix(nil), layout.Prefixes...), layout.Unprefixed...)
	for _, row := range rows {
		if key, ok := perTask(row.Kind, row.Byte); ok {
			for _, n := range counts {
				if p, pt, err := route(row.Kind, key, n); err != nil || !pt || p != 0 {
					bad = append(bad, fmt.Sprintf("%s %q: partition %d, per task %v, %v; want per task", row.Kind, row.Byte, p, pt, err))
				}
			}
			continue
		}
		b := builders[row.Kind][row.Byte]
		if b == nil {
			bad = append(bad, fmt.Sprintf("%s %q (%s): no builder: untested", row.Kind, row.Byte, row.Key))
			continue
		}
		for i, kb := range keys() {
			key := b(kb, times[i%len(times)], int64(i))
			for _, n := range counts {
				want := processor.KeyPartition(kb, n)
				p, pt, err := route(row.Kind, key, n)
				if err != nil || pt || p != want {
					bad = append(bad, fmt.Sprintf("%s %q key %x (record key %d bytes) among %d: partition %d, per task %v, %v; the runtime's %d",
						row.Kind, row.Byte, key, len(kb), n, p, pt, err, want))
					if len(bad) > 5 {
						return bad
					}
				}
			}
		}
	}
	return bad
}

// TestRouteEveryLayout: every layout's entries, for keys of every length,
// go to the partition the runtime gives their record key, under each
// count.
func TestRouteEveryLayout(t *testing.T) {
	if bad := misrouted(rescale.Route); len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
}

// TestRouteCheckerCatches is the negative control: a router with another
// hash, with the record key off by one byte at either end, or hashing the
// whole store key, is caught.
func TestRouteCheckerCatches(t *testing.T) {
	withKey := func(hash func(kb []byte, n int32) int32, cut func([]byte) []byte) router {
		return func(kind layout.StoreKind, key []byte, n int32) (int32, bool, error) {
			kb, pt, err := layout.RecordKey(kind, key)
			if err != nil || pt {
				return 0, pt, err
			}
			return hash(cut(kb), n), false, nil
		}
	}
	same := func(kb []byte) []byte { return kb }
	fnvHash := func(kb []byte, n int32) int32 {
		h := fnv.New32a()
		h.Write(kb)
		return int32(h.Sum32()&0x7fffffff) % n
	}
	for name, r := range map[string]router{
		"fnv hash": withKey(fnvHash, same),
		"mod n-1": withKey(func(kb []byte, n int32) int32 {
			return keyhash.Partition(kb, max(1, n-1))
		}, same),
		"last byte dropped": withKey(keyhash.Partition, func(kb []byte) []byte {
			return kb[:max(0, len(kb)-1)]
		}),
		"first byte dropped": withKey(keyhash.Partition, func(kb []byte) []byte {
			return kb[min(1, len(kb)):]
		}),
		"whole store key": func(kind layout.StoreKind, key []byte, n int32) (int32, bool, error) {
			if _, pt, _ := layout.RecordKey(kind, key); pt {
				return 0, true, nil
			}
			return keyhash.Partition(key, n), false, nil
		},
	} {
		if bad := misrouted(r); len(bad) == 0 {
			t.Errorf("the checker passes a router with the %s", name)
		}
	}
}

// TestRouteUnsupported: what no layout writes is ErrUnsupported, naming
// the layout and the prefix byte; nothing panics.
func TestRouteUnsupported(t *testing.T) {
	for _, c := range []struct {
		kind layout.StoreKind
		key  []byte
		want string
	}{
		{layout.KindWindow, []byte("Zabc"), `window store entry with prefix byte 0x5a ('Z')`},
		{layout.KindWindow, []byte("r\x01a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), `window store entry with prefix byte 0x72 ('r')`},
		{layout.KindState, []byte("T"), `keyed state store entry with prefix byte 0x54 ('T')`},
		{layout.KindTimers, []byte("e\x00"), `timers store entry with prefix byte 0x65 ('e')`},
		{layout.KindJoin, []byte{}, `stream-join buffer store entry with an empty key`},
		{layout.StoreKind("bloom filter"), []byte("d"), `bloom filter store entry with prefix byte 0x64 ('d')`},
		{layout.KindSubscriptions, []byte{0xff}, `fk subscriptions store entry with prefix byte 0xff`},
	} {
		_, _, err := rescale.Route(c.kind, c.key, 16)
		if !errors.Is(err, rescale.ErrUnsupported) || !errors.Is(err, layout.ErrUnknownKey) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: %v; want ErrUnsupported naming %q", c.kind, c.key, err, c.want)
		}
	}
	if _, _, err := rescale.Route(layout.KindKV, []byte("k"), 0); err == nil {
		t.Error("0 partitions: no error")
	}
}

func ExampleRoute() {
	key := layout.WindowKey(nil, []byte("user-42"), 1_700_000_000_000)
	p, perTask, err := rescale.Route(layout.KindWindow, key, 16)
	fmt.Println(p == processor.KeyPartition([]byte("user-42"), 16), perTask, err)
	_, perTask, _ = rescale.Route(layout.KindWindow, layout.TimeStateKey, 16)
	fmt.Println(perTask)
	// Output:
	// true false <nil>
	// true
}

// TestSources: every key of new partition p came from one of Sources(p),
// and every source sends some key there (so none is left out for
// nothing), for 8 → 16, 12 → 4, 8 → 12 and the rest.
func TestSources(t *testing.T) {
	keys := keys()
	for i := range 20_000 {
		keys = append(keys, fmt.Appendf(nil, "user-%d", i))
	}
	for _, from := range counts {
		for _, to := range counts {
			seen := map[[2]int32]bool{}
			for _, kb := range keys {
				p, o := processor.KeyPartition(kb, to), processor.KeyPartition(kb, from)
				if !slices.Contains(rescale.Sources(p, from, to), o) {
					t.Fatalf("%d → %d: key %x goes from %d to %d, not among the sources %v", from, to, kb, o, p, rescale.Sources(p, from, to))
				}
				seen[[2]int32{p, o}] = true
			}
			for p := range to {
				for _, o := range rescale.Sources(p, from, to) {
					if !seen[[2]int32{p, o}] {
						t.Errorf("%d → %d: source %d of %d sent no key there", from, to, o, p)
					}
				}
			}
		}
	}
	if got := rescale.Sources(3, 8, 16); !slices.Equal(got, []int32{3}) {
		t.Errorf("8 → 16: the sources of 3 are %v", got)
	}
	if got := rescale.Sources(1, 12, 4); !slices.Equal(got, []int32{1, 5, 9}) {
		t.Errorf("12 → 4: the sources of 1 are %v", got)
	}
}
