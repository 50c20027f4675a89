package window

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"
)

const none = NoWatermark

func TestStrategies(t *testing.T) {
	for _, c := range []struct {
		s        Strategy
		ts, prev int64
		want     int64
	}{
		{BoundedOutOfOrderness(5 * time.Millisecond), 100, none, 94},
		{BoundedOutOfOrderness(5 * time.Millisecond), 100, 120, 120}, // never back
		{BoundedOutOfOrderness(time.Second), 1500, none, 499},
		{BoundedOutOfOrderness(5 * time.Millisecond), math.MinInt64 + 3, none, none}, // saturates
		{BoundedOutOfOrderness(0), math.MinInt64, none, none},
		{Monotonous(), 100, none, 99},
		{Monotonous(), math.MaxInt64, none, math.MaxInt64 - 1},
		{PerRecord(func(ts, prev int64) int64 { return ts / 10 * 10 }), 57, none, 50},
		{PerRecord(func(ts, prev int64) int64 { return ts }), 57, 60, 60}, // clamped
		{PerRecord(func(ts, prev int64) int64 { return prev }), 57, none, none},
	} {
		if got := c.s.Next(c.ts, c.prev); got != c.want {
			t.Errorf("%v.Next(%d, %d) = %d, want %d", c.s, c.ts, c.prev, got, c.want)
		}
	}
}

func TestNewTrackerValidates(t *testing.T) {
	for _, c := range []struct {
		s    Strategy
		n    int
		opts []TrackerOpt
	}{
		{nil, 1, nil},
		{BoundedOutOfOrderness(-time.Second), 1, nil},
		{PerRecord(nil), 1, nil},
		{Monotonous(), 0, nil},
		{Monotonous(), 1, []TrackerOpt{IdleTimeout(-time.Second)}},
		{Monotonous(), 1, []TrackerOpt{IdleTimeout(time.Microsecond)}},
	} {
		if _, err := NewTracker(c.s, c.n, c.opts...); !errors.Is(err, ErrInvalid) {
			t.Errorf("NewTracker(%v, %d) = %v, want ErrInvalid", c.s, c.n, err)
		}
	}
	if _, err := NewTracker(BoundedOutOfOrderness(time.Second), 3, IdleTimeout(time.Minute)); err != nil {
		t.Errorf("valid tracker rejected: %v", err)
	}
}

// op is one step of a tracker scenario.
type op struct {
	kind  byte // 'o' Observe, 'a' Advance, 'i' SetIdle, 't' Tick, 'r' restore
	input int
	v     int64 // ts, wm or now
}

func (o op) String() string {
	switch o.kind {
	case 'o':
		return fmt.Sprintf("Observe(%d,%d)", o.input, o.v)
	case 'a':
		return fmt.Sprintf("Advance(%d,%d)", o.input, o.v)
	case 'i':
		return fmt.Sprintf("SetIdle(%d)", o.input)
	case 't':
		return fmt.Sprintf("Tick(%d)", o.v)
	}
	return "restore"
}

func apply(t *testing.T, tr *Tracker, o op) *Tracker {
	t.Helper()
	switch o.kind {
	case 'o':
		tr.Observe(o.input, o.v)
	case 'a':
		tr.Advance(o.input, o.v)
	case 'i':
		tr.SetIdle(o.input)
	case 't':
		tr.Tick(o.v)
	case 'r':
		b, err := tr.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if o.input%2 == 1 { // in place, as a task rewinding to its last commit
			if err := tr.UnmarshalBinary(b); err != nil {
				t.Fatalf("restore: %v", err)
			}
			return tr
		}
		fresh, err := NewTracker(tr.strategy, tr.Inputs(), IdleTimeout(time.Duration(tr.idleTimeout)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := fresh.UnmarshalBinary(b); err != nil {
			t.Fatalf("restore: %v", err)
		}
		return fresh
	}
	return tr
}

func TestTrackerScenarios(t *testing.T) {
	b10 := BoundedOutOfOrderness(10 * time.Millisecond)
	for _, c := range []struct {
		name string
		s    Strategy
		n    int
		idle time.Duration
		ops  []op
		want []int64 // Watermark after each op
	}{
		{"single input", b10, 1, 0,
			[]op{{'o', 0, 100}, {'o', 0, 90}, {'o', 0, 150}},
			[]int64{89, 89, 139}},
		{"unseen input holds the minimum", b10, 2, 0,
			[]op{{'o', 0, 100}, {'o', 0, 200}, {'o', 1, 50}, {'o', 1, 300}},
			[]int64{none, none, 39, 189}},
		{"minimum over inputs", Monotonous(), 3, 0,
			[]op{{'o', 0, 10}, {'o', 1, 20}, {'o', 2, 30}, {'o', 0, 40}, {'o', 1, 50}},
			[]int64{none, none, 9, 19, 29}},
		{"explicit idleness excludes, rejoin never goes back", Monotonous(), 2, 0,
			[]op{{'o', 0, 100}, {'o', 1, 10}, {'i', 1, 0}, {'o', 0, 200}, {'o', 1, 50}, {'o', 1, 150}, {'o', 1, 300}},
			[]int64{none, 9, 99, 199, 199, 199, 199}},
		{"all idle holds", Monotonous(), 2, 0,
			[]op{{'o', 0, 100}, {'o', 1, 200}, {'i', 0, 0}, {'i', 1, 0}, {'o', 1, 50}},
			[]int64{none, 99, 199, 199, 199}},
		{"unseen input marked idle", Monotonous(), 2, 0,
			[]op{{'o', 0, 100}, {'i', 1, 0}, {'o', 0, 120}},
			[]int64{none, 99, 119}},
		{"upstream watermarks", Monotonous(), 2, 0,
			[]op{{'a', 0, 500}, {'a', 1, 300}, {'a', 1, 200}, {'a', 1, 700}, {'o', 0, 1000}},
			[]int64{none, 300, 300, 500, 700}},
		{"tick without timeout does nothing", Monotonous(), 2, 0,
			[]op{{'o', 0, 100}, {'t', 0, 0}, {'t', 0, 1 << 40}},
			[]int64{none, none, none}},
		{"idle timeout", Monotonous(), 2, 100 * time.Millisecond,
			[]op{
				{'o', 0, 500}, {'o', 1, 10}, {'t', 0, 1000}, // timers start
				{'o', 0, 600}, {'t', 0, 1100}, // input 0 seen; input 1 silent for 100: not yet
				{'t', 0, 1101},                 // input 1 silent for more than 100: idle
				{'t', 0, 1199}, {'t', 0, 1201}, // input 0 silent since 1100: idle at 1201
				{'o', 1, 20}, {'o', 1, 800}, // input 1 rejoins behind: holds, then leads alone
			},
			[]int64{none, 9, 9, 9, 9, 599, 599, 599, 599, 799}},
		{"restore keeps idleness and restarts timers", Monotonous(), 2, 100 * time.Millisecond,
			[]op{
				{'o', 0, 500}, {'o', 1, 10}, {'i', 1, 0}, {'t', 0, 1000},
				{'r', 0, 0}, {'t', 0, 5000}, {'t', 0, 5100}, {'t', 0, 5101},
			},
			[]int64{none, 9, 499, 499, 499, 499, 499, 499}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := NewTracker(c.s, c.n, IdleTimeout(c.idle))
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range c.ops {
				tr = apply(t, tr, o)
				if got := tr.Watermark(); got != c.want[i] {
					t.Fatalf("after %v (step %d): watermark %d, want %d", o, i, got, c.want[i])
				}
			}
		})
	}
}

func TestIdleAndRejoin(t *testing.T) {
	tr, _ := NewTracker(Monotonous(), 2, IdleTimeout(time.Second))
	tr.Observe(0, 100)
	tr.Tick(0)
	tr.Tick(1001)
	if !tr.Idle() || !tr.InputIdle(0) || !tr.InputIdle(1) {
		t.Fatalf("both inputs should be idle")
	}
	tr.Advance(1, 5)
	if tr.Idle() || tr.InputIdle(1) || tr.InputWatermark(1) != 5 {
		t.Fatalf("input 1 should rejoin at 5")
	}
}

// model is the brute-force tracker: it keeps the whole history and derives
// everything from it on each step.
type model struct {
	s       Strategy
	timeout int64
	n       int
	hist    []op
	wm      int64
	marks   map[int]int // step at which an input was last marked idle
}

func (m *model) step(o op) {
	k := len(m.hist)
	m.hist = append(m.hist, o)
	if o.kind == 't' && m.timeout > 0 {
		for i := range m.n {
			if m.idle(i, k) {
				continue
			}
			// The input times out if some Tick after its last data and
			// after the last restore is more than the timeout before now.
			from := max(m.lastData(i, k), m.lastRestore(k))
			for j := from + 1; j < k; j++ {
				if h := m.hist[j]; h.kind == 't' && o.v-h.v > m.timeout {
					m.marks[i] = k
					break
				}
			}
		}
	}
	if o.kind == 'i' && !m.idle(o.input, k) {
		m.marks[o.input] = k
	}
	lo, any := int64(math.MaxInt64), false
	for i := range m.n {
		if !m.idle(i, k+1) {
			lo, any = min(lo, m.inputWM(i)), true
		}
	}
	if any {
		m.wm = max(m.wm, lo)
	}
}

// lastData returns the last step before k with a record or watermark for
// input i, or -1.
func (m *model) lastData(i, k int) int {
	for j := k - 1; j >= 0; j-- {
		if h := m.hist[j]; (h.kind == 'o' || h.kind == 'a') && h.input == i {
			return j
		}
	}
	return -1
}

func (m *model) lastRestore(k int) int {
	for j := k - 1; j >= 0; j-- {
		if m.hist[j].kind == 'r' {
			return j
		}
	}
	return -1
}

// idle reports whether input i is idle before step k.
func (m *model) idle(i, k int) bool {
	mark, ok := m.marks[i]
	return ok && mark < k && mark > m.lastData(i, k)
}

func (m *model) inputWM(i int) int64 {
	wm := none
	for _, h := range m.hist {
		if h.input != i {
			continue
		}
		switch h.kind {
		case 'o':
			if b, ok := m.s.(bounded); ok {
				// Straight from the definition: max ts - bound - 1.
				if v := h.v - b.bound - 1; h.v >= math.MinInt64+b.bound+1 {
					wm = max(wm, v)
				}
			} else {
				wm = max(wm, m.s.Next(h.v, wm))
			}
		case 'a':
			wm = max(wm, h.v)
		}
	}
	return wm
}

func TestTrackerMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	strategies := []Strategy{
		Monotonous(),
		BoundedOutOfOrderness(7 * time.Millisecond),
		PerRecord(func(ts, prev int64) int64 { // a punctuated generator
			if ts%5 == 0 {
				return ts - 3
			}
			return prev
		}),
	}
	for run := range 400 {
		s := strategies[run%len(strategies)]
		n := 1 + rng.Intn(4)
		timeout := []int64{0, 10, 50}[rng.Intn(3)]
		tr, err := NewTracker(s, n, IdleTimeout(time.Duration(timeout)*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		m := &model{s: s, timeout: timeout, n: n, wm: none, marks: map[int]int{}}
		now, last := int64(1000), none
		base := make([]int64, n) // each input drifts forward at its own pace
		for k := range 200 {
			var o op
			in := rng.Intn(n)
			switch r := rng.Intn(100); {
			case r < 55:
				base[in] += int64(rng.Intn(20))
				o = op{'o', in, base[in] - int64(rng.Intn(30))} // out of order
			case r < 65:
				o = op{'a', in, base[in] - int64(rng.Intn(40))}
			case r < 72:
				o = op{'i', in, 0}
			case r < 97:
				now += int64(rng.Intn(30))
				o = op{'t', 0, now}
			default:
				o = op{'r', rng.Intn(2), 0}
			}
			tr = apply(t, tr, o)
			m.step(o)
			got := tr.Watermark()
			if got != m.wm {
				t.Fatalf("run %d step %d %v: watermark %d, model %d\nhistory %v", run, k, o, got, m.wm, m.hist)
			}
			if got < last {
				t.Fatalf("run %d step %d: watermark went back from %d to %d", run, k, last, got)
			}
			last = got
			for i := range n {
				if tr.InputIdle(i) != m.idle(i, k+1) {
					t.Fatalf("run %d step %d %v: input %d idle %v, model %v", run, k, o, i, tr.InputIdle(i), m.idle(i, k+1))
				}
				if tr.InputWatermark(i) != m.inputWM(i) {
					t.Fatalf("run %d step %d: input %d watermark %d, model %d", run, k, i, tr.InputWatermark(i), m.inputWM(i))
				}
			}
		}
	}
}

func TestTrackerMarshalRoundTrip(t *testing.T) {
	tr, _ := NewTracker(BoundedOutOfOrderness(time.Second), 3)
	tr.Observe(0, 5000)
	tr.Observe(1, 7000)
	tr.Observe(2, 9000)
	tr.SetIdle(0)
	tr.Advance(1, 8500)
	b, err := tr.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 13+3*9 {
		t.Errorf("state is %d bytes, want %d", len(b), 13+3*9)
	}
	got, _ := NewTracker(BoundedOutOfOrderness(time.Second), 3)
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if got.Watermark() != tr.Watermark() {
		t.Errorf("watermark %d, want %d", got.Watermark(), tr.Watermark())
	}
	for i := range 3 {
		if got.InputWatermark(i) != tr.InputWatermark(i) || got.InputIdle(i) != tr.InputIdle(i) {
			t.Errorf("input %d: (%d, %v), want (%d, %v)", i, got.InputWatermark(i), got.InputIdle(i), tr.InputWatermark(i), tr.InputIdle(i))
		}
	}
	again, _ := got.MarshalBinary()
	if !bytes.Equal(again, b) {
		t.Errorf("re-marshalled state differs:\n%x\n%x", again, b)
	}
	// The same decisions after the restore.
	for _, x := range []*Tracker{tr, got} {
		x.Observe(0, 2000) // rejoins behind
		x.Observe(2, 20000)
	}
	if got.Watermark() != tr.Watermark() {
		t.Errorf("diverged after restore: %d, want %d", got.Watermark(), tr.Watermark())
	}
}

func TestTrackerUnmarshalRejects(t *testing.T) {
	tr, _ := NewTracker(Monotonous(), 2)
	tr.Observe(0, 100)
	tr.Observe(1, 200)
	good, _ := tr.MarshalBinary()
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for name, c := range map[string]struct {
		data []byte
		err  error
	}{
		"empty":         {nil, ErrCorrupt},
		"short":         {good[:10], ErrCorrupt},
		"truncated":     {good[:len(good)-1], ErrCorrupt},
		"trailing":      {append(append([]byte(nil), good...), 0), ErrCorrupt},
		"version":       {mutate(func(b []byte) []byte { b[0] = 2; return b }), ErrCorrupt},
		"flags":         {mutate(func(b []byte) []byte { b[len(b)-1] = 0x80; return b }), ErrCorrupt},
		"wm below min":  {mutate(func(b []byte) []byte { b[1] = 0x80; return b }), ErrCorrupt},
		"input count":   {func() []byte { x, _ := NewTracker(Monotonous(), 3); b, _ := x.MarshalBinary(); return b }(), ErrInvalid},
		"count too big": {mutate(func(b []byte) []byte { b[9] = 0xff; return b }), ErrCorrupt},
	} {
		before, _ := tr.MarshalBinary()
		if err := tr.UnmarshalBinary(c.data); !errors.Is(err, c.err) {
			t.Errorf("%s: err %v, want %v", name, err, c.err)
		}
		if after, _ := tr.MarshalBinary(); !bytes.Equal(before, after) {
			t.Errorf("%s: a failed UnmarshalBinary changed the tracker", name)
		}
	}
	var zero Tracker
	if err := zero.UnmarshalBinary(good); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero Tracker: %v, want ErrInvalid", err)
	}
}

func FuzzTrackerUnmarshal(f *testing.F) {
	tr, _ := NewTracker(BoundedOutOfOrderness(time.Millisecond), 3)
	b, _ := tr.MarshalBinary()
	f.Add(b)
	tr.Observe(0, 10)
	tr.Observe(1, 20)
	tr.Observe(2, 30)
	tr.SetIdle(1)
	b, _ = tr.MarshalBinary()
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, _ := NewTracker(BoundedOutOfOrderness(time.Millisecond), 3, IdleTimeout(time.Millisecond))
		if err := tr.UnmarshalBinary(data); err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrInvalid) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		out, err := tr.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("accepted state is not canonical:\n in %x\nout %x", data, out)
		}
		// Accepted state must keep the invariants under use.
		last := tr.Watermark()
		for i, v := range []int64{math.MinInt64, 0, math.MaxInt64} {
			tr.Observe(i%3, v)
			tr.Tick(int64(i) * 10)
			tr.Advance((i+1)%3, v)
			if wm := tr.Watermark(); wm < last {
				t.Fatalf("watermark went back from %d to %d", last, wm)
			}
			last = tr.Watermark()
		}
	})
}

func BenchmarkTrackerObserve(b *testing.B) {
	for _, n := range []int{1, 4, 32} {
		b.Run(fmt.Sprint("inputs=", n), func(b *testing.B) {
			tr, _ := NewTracker(BoundedOutOfOrderness(time.Second), n)
			var sink int64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				// Round robin with a little disorder, as partitions arrive.
				tr.Observe(i%n, int64(i)*10-int64(i%7)*13)
				sink += tr.Watermark()
			}
			_ = sink
		})
	}
}

// BenchmarkTrackerAdvance is the task's path: each source applies its own
// strategy and hands the tracker the result with Advance, as do the
// watermark records of a repartition topic's writers. Round robin over
// rising watermarks makes the advanced input the one holding the minimum
// every time, so every call recomputes it: the worst case.
func BenchmarkTrackerAdvance(b *testing.B) {
	for _, n := range []int{1, 4, 32} {
		b.Run(fmt.Sprint("inputs=", n), func(b *testing.B) {
			tr, _ := NewTracker(Monotonous(), n)
			var sink int64
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				tr.Advance(i%n, int64(i)*10)
				sink += tr.Watermark()
			}
			_ = sink
		})
	}
}

func ExampleTracker() {
	t, _ := NewTracker(BoundedOutOfOrderness(2*time.Second), 2)
	t.Observe(0, 10_000)
	fmt.Println(t.Watermark() == NoWatermark) // input 1 has not reported
	t.Observe(1, 7_000)
	fmt.Println(t.Watermark())
	t.SetIdle(1) // e.g. upstream announced idleness
	fmt.Println(t.Watermark())
	t.Observe(1, 8_000) // rejoins behind: the watermark waits, never goes back
	fmt.Println(t.Watermark())
	// Output:
	// true
	// 4999
	// 7999
	// 7999
}

// TestCopyFromKeepsIdleTimers: a copy taken at a commit and copied back on
// abort keeps how long each input has been silent, which MarshalBinary
// does not: the replay then finds an input idle exactly when the first run
// did.
func TestCopyFromKeepsIdleTimers(t *testing.T) {
	tr, _ := NewTracker(Monotonous(), 2, IdleTimeout(time.Second))
	tr.Observe(0, 100)
	tr.Tick(0) // both inputs start their timers
	var committed Tracker
	committed.CopyFrom(tr)
	tr.Observe(1, 50)
	tr.Tick(1001) // input 0 goes idle
	if !tr.InputIdle(0) {
		t.Fatal("input 0 should be idle")
	}
	tr.CopyFrom(&committed) // abort
	if tr.InputIdle(0) || tr.Watermark() != committed.Watermark() {
		t.Fatal("the copy did not return to the committed state")
	}
	tr.Tick(1001)
	if !tr.InputIdle(0) || !tr.InputIdle(1) {
		t.Fatal("the replayed tick did not find both inputs idle, as the committed timers say")
	}
	// Through MarshalBinary the timers restart: neither is idle yet.
	b, _ := committed.MarshalBinary()
	tr.UnmarshalBinary(b)
	if tr.Tick(1001); tr.InputIdle(0) {
		t.Fatal("MarshalBinary kept the idle timers; CopyFrom is then needless")
	}
	// The copy shares nothing with its source.
	committed.Observe(1, 500)
	if tr.InputWatermark(1) == 500 {
		t.Fatal("the copy shares its inputs with the source")
	}
}
