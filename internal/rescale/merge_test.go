package rescale_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/rescale"
	"github.com/sluice-streams/sluice/window"
)

// The inputs of the tasks below, laid out as internal/task's clock lays
// them: a user topic (1), a table read from a user topic (1, idle from the
// start), a repartition topic of 8 partitions (one input per writer).
var groups = []int{1, 1, 8}

const tableInput = 1

// oldTask is one old task's time state.
type oldTask struct {
	streamTime int64
	tr         *window.Tracker
}

func (o oldTask) value() []byte { return layout.AppendTimeState(nil, o.streamTime, o.tr) }

// oldTasks makes n tasks' time states from a seeded run: each input
// advances to its own watermark, some writers go idle (writer 5 in every
// task), the table input is idle throughout.
func oldTasks(t *testing.T, n int, seed uint64) []oldTask {
	rng := rand.New(rand.NewPCG(seed, 1))
	inputs := 0
	for _, g := range groups {
		inputs += g
	}
	var olds []oldTask
	for range n {
		tr, err := window.NewTracker(window.Monotonous(), inputs)
		if err != nil {
			t.Fatal(err)
		}
		tr.SetIdle(tableInput)
		st := int64(-1)
		for range 50 {
			i := rng.IntN(inputs)
			if i == tableInput {
				continue
			}
			ts := 1_000 + rng.Int64N(100_000)
			tr.Advance(i, ts)
			st = max(st, ts+rng.Int64N(500))
		}
		tr.SetIdle(2 + 5)
		if rng.IntN(2) == 0 {
			tr.SetIdle(2 + rng.IntN(8))
		}
		olds = append(olds, oldTask{st, tr})
	}
	return olds
}

// decode reads a time state with the decoders a task uses when it loads
// one (internal/task's loadTime): layout.ParseTimeState, then a tracker of
// inputs inputs made by window.NewTracker.
func decode(b []byte, inputs int) (int64, *window.Tracker, error) {
	st, tb, err := layout.ParseTimeState(b)
	if err != nil {
		return 0, nil, err
	}
	tr, err := window.NewTracker(window.Monotonous(), inputs)
	if err != nil {
		return 0, nil, err
	}
	return st, tr, tr.UnmarshalBinary(tb)
}

// mergeErrors is the checker of a merged time state, against the old
// tasks it was merged from: it decodes with the current decoder; its
// watermark is the earliest old one (no window closes earlier than in any
// old task, none stays open that every old task closed); no input's own
// watermark is past it; an input is idle if and only if it was idle in
// every old task; its stream time is the latest; and once every active
// input passes the watermark, the watermark follows (an input that should
// be idle does not hold it for ever).
func mergeErrors(olds []oldTask, merged []byte, inputs int, idleIn func(i int) bool) []string {
	st, tr, err := decode(merged, inputs)
	if err != nil {
		return []string{fmt.Sprintf("does not decode: %v", err)}
	}
	var bad []string
	wm, latest := olds[0].tr.Watermark(), olds[0].streamTime
	for _, o := range olds {
		wm, latest = min(wm, o.tr.Watermark()), max(latest, o.streamTime)
	}
	if tr.Watermark() != wm {
		bad = append(bad, fmt.Sprintf("watermark %d, the earliest old one %d", tr.Watermark(), wm))
	}
	if st != latest {
		bad = append(bad, fmt.Sprintf("stream time %d, the latest old one %d", st, latest))
	}
	for i := range inputs {
		if got := tr.InputWatermark(i); got > wm {
			bad = append(bad, fmt.Sprintf("input %d's watermark %d is past the merged %d", i, got, wm))
		}
		if got, want := tr.InputIdle(i), idleIn(i); got != want {
			bad = append(bad, fmt.Sprintf("input %d idle %v, want %v", i, got, want))
		}
	}
	next := max(wm, 0) + 1_000_000
	for i := range inputs {
		if !tr.InputIdle(i) {
			tr.Advance(i, next)
		}
	}
	if tr.Watermark() != next {
		bad = append(bad, fmt.Sprintf("every active input at %d, the watermark stays at %d", next, tr.Watermark()))
	}
	return bad
}

// idleInAll says whether input i was idle in every old task.
func idleInAll(olds []oldTask) func(int) bool {
	return func(i int) bool {
		for _, o := range olds {
			if !o.tr.InputIdle(i) {
				return false
			}
		}
		return true
	}
}

func values(olds []oldTask) [][]byte {
	var vs [][]byte
	for _, o := range olds {
		vs = append(vs, o.value())
	}
	return vs
}

// TestMergeTimeState merges the time states of 8, 12 and 1 old tasks, in
// every kind of store that can hold one, and in reverse order.
func TestMergeTimeState(t *testing.T) {
	for _, n := range []int{1, 8, 12} {
		for seed := range uint64(5) {
			olds := oldTasks(t, n, seed)
			vs := values(olds)
			for _, kind := range layout.TimeStateKinds {
				merged, err := rescale.Merge(kind, layout.TimeStateKey, vs)
				if err != nil {
					t.Fatalf("%d tasks, %s: %v", n, kind, err)
				}
				if bad := mergeErrors(olds, merged, 10, idleInAll(olds)); len(bad) > 0 {
					t.Fatalf("%d tasks, seed %d, %s:\n%s", n, seed, kind, strings.Join(bad, "\n"))
				}
				rev := slices.Clone(vs)
				slices.Reverse(rev)
				if again, err := rescale.Merge(kind, layout.TimeStateKey, rev); err != nil || string(again) != string(merged) {
					t.Fatalf("%d tasks: the merge depends on the order of the values (%v)", n, err)
				}
			}
		}
	}
}

// TestMergeTimeStateFresh: tasks that saw nothing merge to a task that
// saw nothing, and one that saw nothing holds the merge at NoWatermark.
func TestMergeTimeStateFresh(t *testing.T) {
	fresh, err := window.NewTracker(window.Monotonous(), 10)
	if err != nil {
		t.Fatal(err)
	}
	fresh.SetIdle(tableInput)
	olds := append(oldTasks(t, 3, 9), oldTask{-1, fresh})
	merged, err := rescale.Merge(layout.KindTime, layout.TimeStateKey, values(olds))
	if err != nil {
		t.Fatal(err)
	}
	if bad := mergeErrors(olds, merged, 10, idleInAll(olds)); len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
	if _, tr, _ := decode(merged, 10); tr.Watermark() != window.NoWatermark {
		t.Fatalf("watermark %d with a task that saw nothing", tr.Watermark())
	}
}

// TestMergeCheckerCatches is the negative control: keeping the fastest
// task's time state, the slowest's as it is (its inputs past its
// watermark), or a merge that wakes the idle table input, is caught.
func TestMergeCheckerCatches(t *testing.T) {
	olds := oldTasks(t, 8, 3)
	byWM := slices.Clone(olds)
	slices.SortFunc(byWM, func(a, b oldTask) int { return int(a.tr.Watermark() - b.tr.Watermark()) })
	slowest, fastest := byWM[0], byWM[len(byWM)-1]
	if slowest.tr.Watermark() == fastest.tr.Watermark() {
		t.Fatal("the old tasks' watermarks do not differ: the control proves nothing")
	}
	merged, err := rescale.Merge(layout.KindTime, layout.TimeStateKey, values(olds))
	if err != nil {
		t.Fatal(err)
	}
	st, good, _ := decode(merged, 10)
	woken, _ := window.NewTracker(window.Monotonous(), 10)
	woken.Advance(0, 0)
	for i := range 10 {
		woken.Advance(i, good.Watermark())
	}
	for name, b := range map[string][]byte{
		"fastest task's state": fastest.value(),
		"slowest task's state": slowest.value(),
		"table input woken":    layout.AppendTimeState(nil, st, woken),
	} {
		if bad := mergeErrors(olds, b, 10, idleInAll(olds)); len(bad) == 0 {
			t.Errorf("the checker passes the %s", name)
		}
	}
}

// TestResizeTimeState lays a merged state of a task reading an
// 8-partition repartition topic out for 16 and for 4 partitions: the new
// tracker decodes with the new number of inputs, the table stays idle and
// the idle writer group stays idle only where every old writer was.
func TestResizeTimeState(t *testing.T) {
	olds := oldTasks(t, 8, 1)
	merged, err := rescale.Merge(layout.KindWindow, layout.TimeStateKey, values(olds))
	if err != nil {
		t.Fatal(err)
	}
	for _, width := range []int{16, 4, 8} {
		b, err := rescale.ResizeTimeState(merged, groups, []int{1, 1, width})
		if err != nil {
			t.Fatal(err)
		}
		idle := func(i int) bool { return i == tableInput }
		if bad := mergeErrors(olds, b, 2+width, idle); len(bad) > 0 {
			t.Fatalf("8 → %d writers:\n%s", width, strings.Join(bad, "\n"))
		}
		if _, _, err := decode(b, 10); width != 8 && err == nil {
			t.Fatalf("8 → %d writers: the old decoder reads the new state", width)
		}
	}
	// A group every input of which was idle stays idle.
	tr, _ := window.NewTracker(window.Monotonous(), 4)
	tr.Advance(0, 10)
	tr.SetIdle(2)
	tr.SetIdle(3)
	b, err := rescale.ResizeTimeState(layout.AppendTimeState(nil, 10, tr), []int{2, 2}, []int{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if bad := mergeErrors([]oldTask{{10, tr}}, b, 4, func(i int) bool { return i >= 1 }); len(bad) > 0 {
		t.Fatal(strings.Join(bad, "\n"))
	}
	for _, c := range []struct{ old, new []int }{
		{[]int{1, 1, 7}, []int{1, 1, 16}}, // does not add up
		{[]int{1, 1, 8}, []int{1, 17}},    // groups differ
		{[]int{1, 1, 8}, []int{1, 1, 0}},  // an empty group
	} {
		if _, err := rescale.ResizeTimeState(merged, c.old, c.new); err == nil {
			t.Errorf("%v → %v: no error", c.old, c.new)
		}
	}
}

func TestMergeClock(t *testing.T) {
	var vs [][]byte
	for _, ts := range []int64{5, 1_700_000_000_000, 0, 42} {
		vs = append(vs, layout.AppendClock(nil, ts))
	}
	b, err := rescale.Merge(layout.KindState, layout.StateClockKey, vs)
	if err != nil {
		t.Fatal(err)
	}
	if ts, ok := layout.ParseClock(b); !ok || ts != 1_700_000_000_000 {
		t.Fatalf("merged clock %d (%v), want the latest", ts, ok)
	}
	if _, err := rescale.Merge(layout.KindState, layout.StateClockKey, append(vs, []byte{9})); err == nil {
		t.Fatal("a clock that is not one merged")
	}
}

// TestMergeRejects: entries of a key, unknown entries, corrupt time
// states, states of different sub-topologies and nothing to merge.
func TestMergeRejects(t *testing.T) {
	olds := oldTasks(t, 2, 1)
	other, _ := window.NewTracker(window.Monotonous(), 3)
	for name, c := range map[string]struct {
		kind   layout.StoreKind
		key    []byte
		values [][]byte
		is     error
	}{
		"a key's entry":           {layout.KindState, layout.ValueKey([]byte("k")), values(olds), rescale.ErrUnsupported},
		"a window":                {layout.KindWindow, layout.WindowKey(nil, []byte("k"), 0), values(olds), rescale.ErrUnsupported},
		"a time state in a state": {layout.KindState, layout.TimeStateKey, values(olds), rescale.ErrUnsupported},
		"an unknown prefix":       {layout.KindTimers, []byte("Q"), values(olds), rescale.ErrUnsupported},
		"a corrupt time state":    {layout.KindTime, layout.TimeStateKey, [][]byte{olds[0].value(), {1, 2, 3}}, window.ErrCorrupt},
		"a corrupt tracker":       {layout.KindTime, layout.TimeStateKey, [][]byte{append(olds[0].value(), 0)}, window.ErrCorrupt},
		"another sub-topology":    {layout.KindTime, layout.TimeStateKey, [][]byte{olds[0].value(), layout.AppendTimeState(nil, 1, other)}, nil},
		"nothing":                 {layout.KindTime, layout.TimeStateKey, nil, nil},
	} {
		_, err := rescale.Merge(c.kind, c.key, c.values)
		if err == nil || c.is != nil && !errors.Is(err, c.is) || !strings.HasPrefix(err.Error(), "rescale: ") {
			t.Errorf("%s: %v, want an error wrapping %v", name, err, c.is)
		}
	}
}

func ExampleMerge() {
	slow, _ := window.NewTracker(window.Monotonous(), 1)
	slow.Advance(0, 1_000)
	fast, _ := window.NewTracker(window.Monotonous(), 1)
	fast.Advance(0, 9_000)
	b, _ := rescale.Merge(layout.KindTime, layout.TimeStateKey, [][]byte{
		layout.AppendTimeState(nil, 1_500, slow),
		layout.AppendTimeState(nil, 9_200, fast),
	})
	streamTime, tb, _ := layout.ParseTimeState(b)
	tr, _ := window.NewTracker(window.Monotonous(), 1)
	_ = tr.UnmarshalBinary(tb)
	fmt.Println(tr.Watermark(), streamTime)
	// Output: 1000 9200
}
