package layout

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// TestTimerKeys: timer keys of every key length turn back into their time
// and key, and sort by time, then key bytes.
func TestTimerKeys(t *testing.T) {
	times := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64}
	type timer struct {
		at int64
		kb []byte
	}
	var want []timer
	var keys [][]byte
	for _, at := range times {
		for _, kb := range testkeys.Bytes() {
			want = append(want, timer{at, kb})
		}
	}
	slices.SortFunc(want, func(a, b timer) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.kb, b.kb)
	})
	for i := len(want) - 1; i >= 0; i-- { // written in reverse
		keys = append(keys, TimerKey(TimerEvent, want[i].at, want[i].kb))
	}
	slices.SortFunc(keys, bytes.Compare)
	for i, k := range keys {
		if k[0] != TimerEvent {
			t.Fatalf("prefix %q", k[0])
		}
		at, kb, err := ParseTimerKey(k)
		if err != nil || at != want[i].at || !bytes.Equal(kb, want[i].kb) {
			t.Fatalf("timer %d: %d %x %v, want %d %x", i, at, kb, err, want[i].at, want[i].kb)
		}
	}
	if got := TimerKey(TimerProcessing, 1, []byte("k")); string(got) != "p\x80\x00\x00\x00\x00\x00\x00\x01k" {
		t.Fatalf("TimerKey = %q", got)
	}
	if _, _, err := ParseTimerKey([]byte("e\x80")); err == nil {
		t.Fatal("a short timer key parsed")
	}
}

// TestDueEnd: the bound lies above every key due at now and at or below
// every key due later.
func TestDueEnd(t *testing.T) {
	for _, now := range []int64{math.MinInt64, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64} {
		end := DueEnd(TimerEvent, now)
		for _, kb := range [][]byte{nil, {0xff, 0xff}, bytes.Repeat([]byte{0xff}, 200)} {
			if k := TimerKey(TimerEvent, now, kb); bytes.Compare(k, end) >= 0 {
				t.Fatalf("now %d: a timer due now, %x, is not below the end %x", now, k, end)
			}
			if now < math.MaxInt64 {
				if k := TimerKey(TimerEvent, now+1, kb); bytes.Compare(k, end) < 0 {
					t.Fatalf("now %d: a timer due later, %x, is below the end %x", now, k, end)
				}
			}
		}
		if k := TimerKey(TimerEvent+1, math.MinInt64, nil); bytes.Compare(k, end) < 0 && now == math.MaxInt64 {
			t.Fatalf("the end at MaxInt64 lets the next prefix in")
		}
	}
}
