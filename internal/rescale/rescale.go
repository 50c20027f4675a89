package rescale

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/keyhash"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/window"
)

// ErrUnsupported is returned for an entry whose layout cannot be
// redistributed; it names the layout and the key's prefix.
var ErrUnsupported = errors.New("rescale: cannot redistribute")

// Route returns the partition, under n partitions, that the store entry
// key of a store of kind belongs to: the partition of its record key by
// the partitioner sluice writes repartition topics with (and that Kafka's
// default producer uses: murmur2 of the key's bytes). perTask reports an
// entry that belongs to its task and not to a key (see Merge); p is then 0.
//
// The record key is found by layout.RecordKey; an entry it does not know
// (a prefix byte the kind's layout does not have, a key of the wrong
// length for its prefix, an unknown kind) is ErrUnsupported, wrapping
// layout.ErrUnknownKey.
func Route(kind layout.StoreKind, key []byte, n int32) (p int32, perTask bool, err error) {
	if n < 1 {
		return 0, false, fmt.Errorf("rescale: %s store: %d partitions", kind, n)
	}
	kb, perTask, err := layout.RecordKey(kind, key)
	if err != nil {
		return 0, false, unsupported(kind, key, err)
	}
	if perTask {
		return 0, true, nil
	}
	return keyhash.Partition(kb, n), false, nil
}

// Merge combines the values, one per old task that had it, of a per-task
// entry key of a store of kind into the value every new task starts with.
//
// The time state (layout.TimeStateKey) merges to the earliest watermark
// and the latest stream time, with the old trackers' number of inputs
// (ResizeTimeState lays it out for another); a keyed state's clock
// (layout.StateClockKey) to the latest clock. doc.go says why. An entry of
// a key (Route's, not a task's) is ErrUnsupported; a value that does not
// decode is an error wrapping window.ErrCorrupt (time state) or naming the
// clock.
func Merge(kind layout.StoreKind, key []byte, values [][]byte) ([]byte, error) {
	_, perTask, err := layout.RecordKey(kind, key)
	if err != nil {
		return nil, unsupported(kind, key, err)
	}
	if !perTask {
		return nil, fmt.Errorf("%w %s store entry %s: it belongs to a key (Route), not to its task", ErrUnsupported, kind, describe(key))
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("rescale: %s store entry %s: nothing to merge", kind, describe(key))
	}
	if kind == layout.KindState {
		return mergeClock(values)
	}
	return mergeTime(values)
}

func unsupported(kind layout.StoreKind, key []byte, err error) error {
	return fmt.Errorf("%w %s store entry %s: %w", ErrUnsupported, kind, describe(key), err)
}

// describe names a key by its prefix byte, which is what says its layout.
func describe(key []byte) string {
	if len(key) == 0 {
		return "with an empty key"
	}
	return fmt.Sprintf("with prefix byte %#02x (%q)", key[0], key[0])
}

// mergeClock is the latest of the clocks: a keyed state's clock is the
// latest time an expiry decision was made at (ops.Keyed.now), so it must
// not go back for any entry that moves, and each entry's write time is at
// most its old task's clock.
func mergeClock(values [][]byte) ([]byte, error) {
	latest := int64(-1)
	for i, v := range values {
		ts, ok := layout.ParseClock(v)
		if !ok {
			return nil, fmt.Errorf("rescale: keyed state clock %d of %d: %d bytes are not a clock", i+1, len(values), len(v))
		}
		latest = max(latest, ts)
	}
	return layout.AppendClock(nil, latest), nil
}

// timeState is a decoded time state.
type timeState struct {
	streamTime int64
	tracker    *window.Tracker
}

// parseTime decodes a time state with the current decoders.
func parseTime(b []byte) (timeState, error) {
	st, tb, err := layout.ParseTimeState(b)
	if err != nil {
		return timeState{}, err
	}
	// The number of inputs is the uint32 after the tracker's version and
	// watermark (window.Tracker's binary form); UnmarshalBinary checks
	// the rest, and that it is right.
	if len(tb) < 13 {
		return timeState{}, fmt.Errorf("%w: tracker state of %d bytes", window.ErrCorrupt, len(tb))
	}
	n := int(binary.BigEndian.Uint32(tb[9:]))
	tr, err := window.NewTracker(window.Monotonous(), n)
	if err != nil {
		return timeState{}, fmt.Errorf("%w: tracker of %d inputs: %w", window.ErrCorrupt, n, err)
	}
	if err := tr.UnmarshalBinary(tb); err != nil {
		return timeState{}, err
	}
	return timeState{st, tr}, nil
}

// newTracker is the tracker of a new task: emitted watermark wm, every
// input's own watermark wm, input i idle if idle(i). Lowering an input's
// watermark to wm changes nothing the task decides by — the task's
// watermark never goes below wm, and a record is judged by the larger of
// the two — so only the emitted watermark and the idle inputs carry over.
func newTracker(wm int64, n int, idle func(int) bool) (*window.Tracker, error) {
	tr, err := window.NewTracker(window.Monotonous(), n)
	if err != nil {
		return nil, err
	}
	if wm != window.NoWatermark {
		for i := range n {
			tr.Advance(i, wm)
		}
	}
	for i := range n {
		if idle(i) {
			tr.SetIdle(i)
		}
	}
	return tr, nil
}

// mergeTime merges time states: the earliest emitted watermark, the latest
// stream time, an input idle only if it was idle in every old task.
func mergeTime(values [][]byte) ([]byte, error) {
	olds := make([]timeState, len(values))
	for i, v := range values {
		ts, err := parseTime(v)
		if err != nil {
			return nil, fmt.Errorf("rescale: time state %d of %d: %w", i+1, len(values), err)
		}
		if i > 0 && ts.tracker.Inputs() != olds[0].tracker.Inputs() {
			return nil, fmt.Errorf("rescale: time state %d of %d has %d inputs, the first %d: not tasks of one sub-topology",
				i+1, len(values), ts.tracker.Inputs(), olds[0].tracker.Inputs())
		}
		olds[i] = ts
	}
	wm, streamTime := olds[0].tracker.Watermark(), olds[0].streamTime
	for _, o := range olds[1:] {
		wm, streamTime = min(wm, o.tracker.Watermark()), max(streamTime, o.streamTime)
	}
	tr, err := newTracker(wm, olds[0].tracker.Inputs(), func(i int) bool {
		for _, o := range olds {
			if !o.tracker.InputIdle(i) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("rescale: time state: %w", err)
	}
	return layout.AppendTimeState(nil, streamTime, tr), nil
}

// ResizeTimeState lays the tracker of the time state b (Merge's, or any
// task's) out for a task whose inputs changed width: old and new are the
// widths of the tracker's input groups in the task's order (internal/task's
// clock: per source, per topic, 1 for a user topic, the repartition
// topic's partition count for a repartition topic, one input per upstream
// writer), before and after the rescale. Every input of a group is idle if
// every old input of that group was; the watermark and the stream time are
// kept. old must add up to the tracker's inputs, and have as many groups
// as new.
func ResizeTimeState(b []byte, old, new []int) ([]byte, error) {
	ts, err := parseTime(b)
	if err != nil {
		return nil, fmt.Errorf("rescale: time state: %w", err)
	}
	if len(old) != len(new) {
		return nil, fmt.Errorf("rescale: time state: %d input groups before, %d after", len(old), len(new))
	}
	sum, n := 0, 0
	var idle []bool
	for g := range old {
		if old[g] < 1 || new[g] < 1 {
			return nil, fmt.Errorf("rescale: time state: input group %d of width %d, then %d", g, old[g], new[g])
		}
		all := true
		for i := sum; i < sum+old[g] && i < ts.tracker.Inputs(); i++ {
			all = all && ts.tracker.InputIdle(i)
		}
		sum += old[g]
		n += new[g]
		for range new[g] {
			idle = append(idle, all)
		}
	}
	if sum != ts.tracker.Inputs() {
		return nil, fmt.Errorf("rescale: time state: the tracker has %d inputs, the groups %d", ts.tracker.Inputs(), sum)
	}
	tr, err := newTracker(ts.tracker.Watermark(), n, func(i int) bool { return idle[i] })
	if err != nil {
		return nil, fmt.Errorf("rescale: time state: %w", err)
	}
	return layout.AppendTimeState(nil, ts.streamTime, tr), nil
}

// TimeInputGroups returns the widths of the input groups of the tracker of
// a task of sub (ResizeTimeState's old or new), as internal/task's clock
// lays them out: per source, per topic, 1 for a user topic, and for a
// repartition topic (named as in the plan, without the application id)
// width(topic), its partition count, at least 1. The end-to-end tests hold
// it to the tasks' own time states.
func TimeInputGroups(sub *exec.SubTopology, width func(topic string) int) []int {
	var groups []int
	for _, src := range sub.Sources {
		for _, topic := range src.Topics {
			w := 1
			if src.Internal {
				w = max(1, width(topic))
			}
			groups = append(groups, w)
		}
	}
	return groups
}

// Sources returns the old partitions, of oldN, whose keys can belong to
// partition p of newN: those congruent to p modulo gcd(oldN, newN), since
// a key's hash h with h mod newN = p and h mod oldN = o has h ≡ p and
// h ≡ o modulo their gcd. Merging the per-task values of these old tasks
// only, rather than of all, is as safe (no key of another old task can
// reach p) and keeps more: for 8 → 16 a new task has one source, and its
// watermark is its source's.
func Sources(p, oldN, newN int32) []int32 {
	g := gcd(oldN, newN)
	var olds []int32
	for o := p % g; o < oldN; o += g {
		olds = append(olds, o)
	}
	return olds
}

func gcd(a, b int32) int32 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
