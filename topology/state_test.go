package topology_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/topologytest"
)

// commands is a Processor driven by the record values: "op arg". Each op
// returns an answer, forwarded under the record's key unless empty.
type commands struct {
	ctx  *topology.ProcessorContext[string, string]
	open func(*topology.ProcessorContext[string, string]) // opens the state
	ops  map[string]func(k, arg string) (string, error)
}

func (c *commands) Init(ctx *topology.ProcessorContext[string, string]) error {
	c.ctx = ctx
	c.open(ctx)
	return nil
}

func (c *commands) Process(r topology.Record[string, string]) error {
	op, arg, _ := strings.Cut(r.Value, " ")
	fn := c.ops[op]
	if fn == nil {
		return fmt.Errorf("unknown op %q", op)
	}
	out, err := fn(r.Key, arg)
	if err != nil || out == "" {
		return err
	}
	return c.ctx.Forward(topology.Record[string, string]{Key: r.Key, Value: out, Timestamp: r.Timestamp})
}

func (c *commands) Close() error { return nil }

func show(s string, ok bool) string {
	if !ok {
		return "<none>"
	}
	return s
}

// harness runs in → Process("p") → out through the test driver, and reads
// the state's changelog topic.
type harness struct {
	t         *testing.T
	d         *topologytest.Driver
	in        *topologytest.InputTopic[string, string]
	out       *topologytest.OutputTopic[string, string]
	changelog *topologytest.OutputTopic[[]byte, []byte]
}

func newHarness(t *testing.T, st topology.StoreSpec, proc func() *commands) *harness {
	t.Helper()
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	out := topology.Process(in, "p", func() topology.Processor[string, string, string, string] { return proc() }, st)
	topology.To(out, "out", serde.String, serde.String)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &harness{
		t: t, d: d,
		in:        topologytest.NewInputTopic(d, "in", serde.String, serde.String),
		out:       topologytest.NewOutputTopic(d, "out", serde.String, serde.String),
		changelog: topologytest.NewOutputTopic(d, "test-"+st.Name()+"-changelog", serde.Bytes, serde.Bytes),
	}
}

// step is one input record and the answer it must produce ("" for none).
type step struct {
	key, cmd string
	ts       int64
	want     string
}

// run pipes each step (the driver commits after each, so later steps read
// committed state) and checks its answer exactly.
func (h *harness) run(steps ...step) {
	h.t.Helper()
	for _, s := range steps {
		if err := h.in.Pipe(s.key, s.cmd, s.ts); err != nil {
			h.t.Fatalf("%s %q @%d: %v", s.key, s.cmd, s.ts, err)
		}
		rs, err := h.out.ReadRecords()
		if err != nil {
			h.t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			if r.Key != s.key || r.Timestamp != s.ts {
				h.t.Errorf("%s %q @%d: answer %+v has another key or time", s.key, s.cmd, s.ts, r)
			}
			got = append(got, r.Value)
		}
		var want []string
		if s.want != "" {
			want = []string{s.want}
		}
		if !slices.Equal(got, want) {
			h.t.Errorf("%s %q @%d: answers %q, want %q", s.key, s.cmd, s.ts, got, want)
		}
	}
}

// changes reads the changelog records written since the last read as
// "key=value" with a nil value shown as "key=<tombstone>".
func (h *harness) changes() []string {
	h.t.Helper()
	rs, err := h.changelog.ReadRecords()
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, r := range rs {
		v := fmt.Sprintf("%q", r.Value)
		if r.Value == nil {
			v = "<tombstone>"
		}
		out = append(out, fmt.Sprintf("%q=%s", r.Key, v))
	}
	return out
}

func timed(ts int64, v string) string {
	return fmt.Sprintf("%q", append(binary.BigEndian.AppendUint64([]byte{2}, uint64(ts)), v...))
}

// clockBytes is a state's stored clock at ts.
func clockBytes(ts int64) []byte { return binary.BigEndian.AppendUint64([]byte{1}, uint64(ts)) }

func clock(ts int64) string { return fmt.Sprintf("%q", clockBytes(ts)) }

var errPoison = errors.New("poisoned record")

func valueCommands(spec topology.ValueSpec[string, string]) func() *commands {
	return func() *commands {
		var v *topology.KeyedValue[string, string]
		return &commands{
			open: func(ctx *topology.ProcessorContext[string, string]) { v = spec.Open(ctx) },
			ops: map[string]func(k, arg string) (string, error){
				"set":   func(k, arg string) (string, error) { return "", v.Set(k, arg) },
				"clear": func(k, _ string) (string, error) { return "", v.Clear(k) },
				// setfail writes, then fails the record.
				"setfail": func(k, arg string) (string, error) {
					if err := v.Set(k, arg); err != nil {
						return "", err
					}
					return "", errPoison
				},
				"get": func(k, _ string) (string, error) {
					s, ok, err := v.Get(k)
					return show(s, ok), err
				},
			},
		}
	}
}

func TestValueState(t *testing.T) {
	spec := topology.ValueState("values", serde.String, serde.String)
	h := newHarness(t, spec, valueCommands(spec))
	h.run(
		step{"k", "get", 1, "<none>"},
		step{"k", "set a", 2, ""},
	)
	// Without a TTL: a plain entry, and no clock.
	if got, want := h.changes(), []string{`"vk"="\x01a"`}; !slices.Equal(got, want) {
		t.Errorf("changelog %q, want %q", got, want)
	}
	h.run(
		step{"k", "get", 3, "a"},
		step{"j", "get", 4, "<none>"}, // keys are independent
		step{"j", "set b", 5, ""},
		step{"k", "set c", 6, ""},
		step{"k", "get", 7, "c"},
		step{"j", "get", 8, "b"},
		step{"k", "clear", 9, ""},
		step{"k", "get", 10, "<none>"},
		step{"j", "get", 11, "b"},
		// Timestamps play no part without a TTL, however far apart.
		step{"j", "get", 1 << 40, "b"},
	)
	if got, want := h.changes(), []string{`"vj"="\x01b"`, `"vk"="\x01c"`, `"vk"=<tombstone>`}; !slices.Equal(got, want) {
		t.Errorf("changelog %q, want %q", got, want)
	}
}

func TestValueStateTTL(t *testing.T) {
	spec := topology.ValueState("ttl-values", serde.String, serde.String, topology.StateTTL(100*time.Millisecond))
	h := newHarness(t, spec, valueCommands(spec))
	h.run(step{"k", "set a", 1000, ""})
	// The clock, then the entry stamped with it.
	if got, want := h.changes(), []string{`"c"="\x01\x00\x00\x00\x00\x00\x00\x03\xe8"`, `"vk"=` + timed(1000, "a")}; !slices.Equal(got, want) {
		t.Errorf("changelog %q, want %q", got, want)
	}
	h.run(
		// Live for [write, write+ttl): not expired a millisecond early.
		step{"k", "get", 1099, "a"},
		step{"k", "get", 1100, "<none>"},

		// The clock never runs backwards: a late record does not see
		// what a record at 1300 already made expire.
		step{"m", "set x", 1200, ""},
		step{"other", "get", 1300, "<none>"},
		step{"m", "get", 1250, "<none>"},

		// A write restarts the entry's life (OnCreateAndWrite)...
		step{"w", "set b", 2000, ""},
		step{"w", "set c", 2080, ""},
		step{"w", "get", 2179, "c"},
		step{"w", "get", 2180, "<none>"},

		// ... and a read does not.
		step{"r", "set d", 3000, ""},
		step{"u", "set z", 3000, ""},
		step{"r", "get", 3050, "d"},
		step{"r", "get", 3100, "<none>"},

		// An expired entry that was deleted stays away; a new write
		// brings the key back.
		step{"k", "set e", 3200, ""},
		step{"k", "get", 3299, "e"},
	)
	// Expired entries are deleted when read, and only then: "u" expired
	// at 3100 but was never read, so no tombstone.
	var tombstones []string
	for _, c := range h.changes() {
		if k, ok := strings.CutSuffix(c, "=<tombstone>"); ok {
			tombstones = append(tombstones, k)
		}
	}
	if want := []string{`"vk"`, `"vm"`, `"vw"`, `"vr"`}; !slices.Equal(tombstones, want) {
		t.Errorf("tombstones %q, want %q", tombstones, want)
	}
	raw, err := topologytest.KeyValueStore(h.d, topology.KeyValueStore("ttl-values", serde.Bytes, serde.Bytes))
	if err != nil {
		t.Fatal(err)
	}
	if b, ok, err := raw.Get([]byte("vu")); err != nil || !ok || fmt.Sprintf("%q", b) != timed(3000, "z") {
		t.Errorf("the unread expired entry: %q, %t, %v; want it still stored", b, ok, err)
	}
}

// The clock includes the record being processed, so TTL works from the
// very first record with no call but the state's own, and a late record's
// writes are stamped with the stream time, not with its own timestamp.
func TestStateTTLFromFirstRecord(t *testing.T) {
	spec := topology.ValueState("first", serde.String, serde.String, topology.StateTTL(100*time.Millisecond))
	h := newHarness(t, spec, valueCommands(spec))
	h.run(step{"k", "set a", 1000, ""})
	if got, want := h.changes(), []string{`"c"=` + clock(1000), `"vk"=` + timed(1000, "a")}; !slices.Equal(got, want) {
		t.Errorf("changelog %q, want %q", got, want)
	}
	h.run(
		step{"k", "get", 1099, "a"},
		step{"k", "get", 1100, "<none>"},
		step{"j", "set b", 500, ""}, // late: stamped 1100
	)
	want := []string{`"c"=` + clock(1099), `"c"=` + clock(1100), `"vk"=<tombstone>`, `"vj"=` + timed(1100, "b")}
	if got := h.changes(); !slices.Equal(got, want) {
		t.Errorf("changelog %q, want %q", got, want)
	}
	// A failed record leaves neither its writes nor its time behind: the
	// task's stream time and the state's clock are back at 1100.
	if err := h.in.Pipe("j", "setfail c", 5000); !errors.Is(err, errPoison) {
		t.Fatalf("the poisoned record: %v", err)
	}
	h.run(
		step{"j", "get", 1199, "b"},
		step{"j", "get", 1200, "<none>"},
	)
}

// The task persists its stream time only for sub-topologies with a windowed
// store, so after a restart it starts again from nothing while the state's
// clock restores with its entries: the clock is the later of the two, and
// what expired before the restart stays expired.
func TestStateClockAheadOfStreamTime(t *testing.T) {
	spec := topology.ValueState("restarted", serde.String, serde.String, topology.StateTTL(100*time.Millisecond))
	h := newHarness(t, spec, valueCommands(spec))
	h.run(step{"k", "set a", 1000, ""})
	// Stand in for a restart: the stored clock at 1100, the task's stream
	// time at 1000.
	raw, err := topologytest.KeyValueStore(h.d, topology.KeyValueStore("restarted", serde.Bytes, serde.Bytes))
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Put([]byte("c"), clockBytes(1100)); err != nil {
		t.Fatal(err)
	}
	h.run(
		step{"k", "get", 1050, "<none>"}, // judged at 1100, not 1050
		step{"j", "set b", 1060, ""},     // stamped 1100
		step{"j", "get", 1199, "b"},
		step{"j", "get", 1200, "<none>"},
	)
}

// A write from a punctuation before the task has processed any record has
// no time to be stamped with; once a record was processed, it is stamped
// with the stream time.
func TestStateTTLBeforeAnyRecord(t *testing.T) {
	spec := topology.ValueState("ticks", serde.String, serde.String, topology.StateTTL(100*time.Millisecond))
	proc := valueCommands(spec)
	h := newHarness(t, spec, func() *commands {
		c := proc()
		open := c.open
		c.open = func(ctx *topology.ProcessorContext[string, string]) {
			open(ctx)
			ctx.Schedule(time.Second, topology.WallClockTime, func(int64) error {
				_, err := c.ops["set"]("tick", "tock")
				return err
			})
		}
		return c
	})
	err := h.d.AdvanceWallClock(time.Second)
	if !errors.Is(err, topology.ErrStateNoTime) || !strings.Contains(err.Error(), "store ticks: ") {
		t.Fatalf("a punctuation's write before any record: %v, want a store ticks error wrapping ErrStateNoTime", err)
	}
	h.run(step{"tick", "get", 1000, "<none>"}) // the failed write left nothing
	if err := h.d.AdvanceWallClock(time.Second); err != nil {
		t.Fatal(err)
	}
	h.run(
		step{"tick", "get", 1099, "tock"},
		step{"tick", "get", 1100, "<none>"},
	)
}

func listCommands(spec topology.ListSpec[string, string]) func() *commands {
	return func() *commands {
		var l *topology.KeyedList[string, string]
		return &commands{
			open: func(ctx *topology.ProcessorContext[string, string]) { l = spec.Open(ctx) },
			ops: map[string]func(k, arg string) (string, error){
				"add":    func(k, arg string) (string, error) { return "", l.Add(k, arg) },
				"update": func(k, arg string) (string, error) { return "", l.Update(k, strings.Split(arg, ",")) },
				"empty":  func(k, _ string) (string, error) { return "", l.Update(k, nil) },
				"clear":  func(k, _ string) (string, error) { return "", l.Clear(k) },
				"get": func(k, _ string) (string, error) {
					vs, err := l.Get(k)
					return show(strings.Join(vs, ","), vs != nil), err
				},
			},
		}
	}
}

func TestListState(t *testing.T) {
	spec := topology.ListState("lists", serde.String, serde.String)
	h := newHarness(t, spec, listCommands(spec))
	h.run(
		step{"k", "get", 1, "<none>"},
		step{"k", "add a", 2, ""},
		step{"k", "add b", 3, ""},
		step{"j", "add x", 4, ""},
		step{"k", "add a", 5, ""}, // duplicates are kept, in order
		step{"k", "get", 6, "a,b,a"},
		step{"j", "get", 7, "x"},
		step{"k", "update c,d", 8, ""},
		step{"k", "get", 9, "c,d"},
		step{"k", "add ", 10, ""}, // an empty element is an element
		step{"k", "get", 11, "c,d,"},
		step{"k", "empty", 12, ""},
		step{"k", "get", 13, "<none>"},
		step{"j", "clear", 14, ""},
		step{"j", "get", 15, "<none>"},
	)
	// One value per list: the last write of "j" before its clear holds
	// the element with its header.
	got := h.changes()
	if !slices.Contains(got, `"lj"="\x01\x02\x01x"`) || got[len(got)-1] != `"lj"=<tombstone>` {
		t.Errorf("changelog %q lacks j's list or its tombstone", got)
	}
}

func TestListStateTTL(t *testing.T) {
	spec := topology.ListState("ttl-lists", serde.String, serde.String, topology.StateTTL(100*time.Millisecond))
	h := newHarness(t, spec, listCommands(spec))
	h.run(
		step{"k", "add p", 1000, ""},
		step{"k", "add q", 1050, ""},
		step{"k", "get", 1099, "p,q"},
		step{"k", "get", 1100, "q"}, // elements expire one by one
		step{"k", "add r", 1160, ""},
	)
	// The Add at 1160 dropped q (written at 1050) by itself, without a read.
	got := h.changes()
	want := `"lk"="\x01` + strings.Trim(fmt.Sprintf("%q", appendElement(nil, 1160, "r")), `"`) + `"`
	if len(got) == 0 || got[len(got)-1] != want {
		t.Errorf("changelog %q, want it to end with %s", got, want)
	}
	h.run(
		step{"k", "get", 1160, "r"},
		step{"k", "update s,t", 1200, ""},
		step{"k", "get", 1259, "s,t"},
		step{"k", "get", 1300, "<none>"},
	)
	got = h.changes()
	if len(got) == 0 || got[len(got)-1] != `"lk"=<tombstone>` {
		t.Errorf("the list whose elements all expired was not deleted: %q", got)
	}
}

func appendElement(dst []byte, ts int64, v string) []byte {
	e := append(binary.BigEndian.AppendUint64([]byte{2}, uint64(ts)), v...)
	return append(binary.AppendUvarint(dst, uint64(len(e))), e...)
}

func mapCommands(spec topology.MapSpec[string, string, string]) func() *commands {
	return func() *commands {
		var m *topology.KeyedMap[string, string, string]
		rangeAll := func(k string, fn func(uk, uv string) error) (string, error) {
			var es []string
			err := m.Range(k, func(uk, uv string) error {
				es = append(es, uk+"="+uv)
				return fn(uk, uv)
			})
			return show(strings.Join(es, ","), es != nil), err
		}
		return &commands{
			open: func(ctx *topology.ProcessorContext[string, string]) { m = spec.Open(ctx) },
			ops: map[string]func(k, arg string) (string, error){
				"put": func(k, arg string) (string, error) {
					uk, uv, _ := strings.Cut(arg, "=")
					return "", m.Put(k, uk, uv)
				},
				"get": func(k, uk string) (string, error) {
					uv, ok, err := m.Get(k, uk)
					return show(uv, ok), err
				},
				"remove": func(k, uk string) (string, error) { return "", m.Remove(k, uk) },
				"clear":  func(k, _ string) (string, error) { return "", m.Clear(k) },
				"range": func(k, _ string) (string, error) {
					return rangeAll(k, func(uk, _ string) error {
						_, _, err := m.Get(k, uk) // reads are allowed inside
						return err
					})
				},
				"rewrite": func(k, _ string) (string, error) {
					return rangeAll(k, func(uk, uv string) error { return m.Put(k, uk, uv+"!") })
				},
			},
		}
	}
}

func TestMapState(t *testing.T) {
	spec := topology.MapState("maps", serde.String, serde.String, serde.String)
	h := newHarness(t, spec, mapCommands(spec))
	h.run(
		step{"a", "range", 1, "<none>"},
		// "a"+"bx" and "ab"+"x" concatenate to the same bytes: the
		// length prefix keeps the two maps apart.
		step{"a", "put bx=1", 2, ""},
		step{"ab", "put x=2", 3, ""},
		step{"a", "put c=3", 4, ""},
		step{"a", "put a=4", 5, ""},
		step{"a", "range", 6, "a=4,bx=1,c=3"}, // in byte order of the map keys
		step{"ab", "range", 7, "x=2"},
		step{"a", "get bx", 8, "1"},
		step{"a", "get x", 9, "<none>"},
		step{"ab", "get bx", 10, "<none>"},
		step{"a", "put c=5", 11, ""},
		step{"a", "remove a", 12, ""},
		step{"a", "range", 13, "bx=1,c=5"},
		step{"a", "clear", 14, ""},
		step{"a", "range", 15, "<none>"},
		step{"ab", "range", 16, "x=2"},
	)
	if err := h.in.Pipe("ab", "rewrite", 17); err == nil || !strings.Contains(err.Error(), "store maps: write during Range") {
		t.Errorf("a write inside Range: %v", err)
	}
	h.run(step{"ab", "range", 18, "x=2"}) // the failed record left no trace
}

func TestMapStateTTL(t *testing.T) {
	spec := topology.MapState("ttl-maps", serde.String, serde.String, serde.String, topology.StateTTL(100*time.Millisecond))
	h := newHarness(t, spec, mapCommands(spec))
	h.run(
		step{"k", "put x=1", 1000, ""},
		step{"k", "put y=2", 1060, ""},
		step{"k", "range", 1099, "x=1,y=2"},
		step{"k", "range", 1100, "y=2"}, // entries expire one by one
		step{"k", "get x", 1100, "<none>"},
		step{"k", "get y", 1159, "2"},
		step{"k", "put x=3", 1160, ""},
		step{"k", "range", 1160, "x=3"},
	)
	var tombstones []string
	for _, c := range h.changes() {
		if k, ok := strings.CutSuffix(c, "=<tombstone>"); ok {
			tombstones = append(tombstones, k)
		}
	}
	// Range deleted x at 1100; y expired at 1160 and Range deleted it.
	if want := []string{`"m\x01kx"`, `"m\x01ky"`}; !slices.Equal(tombstones, want) {
		t.Errorf("tombstones %q, want %q", tombstones, want)
	}
}

func TestReducingState(t *testing.T) {
	spec := topology.ReducingState("paths", serde.String, serde.String, func(cur, added string) string { return cur + "/" + added })
	h := newHarness(t, spec, func() *commands {
		var r *topology.KeyedReducing[string, string]
		return &commands{
			open: func(ctx *topology.ProcessorContext[string, string]) { r = spec.Open(ctx) },
			ops: map[string]func(k, arg string) (string, error){
				"add":   func(k, arg string) (string, error) { return "", r.Add(k, arg) },
				"clear": func(k, _ string) (string, error) { return "", r.Clear(k) },
				"get": func(k, _ string) (string, error) {
					s, ok, err := r.Get(k)
					return show(s, ok), err
				},
			},
		}
	})
	h.run(
		step{"k", "get", 1, "<none>"},
		step{"k", "add a", 2, ""}, // the first value is kept as is, not reduced with a zero
		step{"k", "get", 3, "a"},
		step{"k", "add b", 4, ""}, // reduce(current, added), in that order
		step{"j", "add x", 5, ""},
		step{"k", "add c", 6, ""},
		step{"k", "get", 7, "a/b/c"},
		step{"j", "get", 8, "x"},
		step{"k", "clear", 9, ""},
		step{"k", "add d", 10, ""},
		step{"k", "get", 11, "d"},
	)
}

// span is an accumulator whose start (init) is not its zero value.
type span struct{ Min, Max, N int64 }

func TestAggregatingStateTTL(t *testing.T) {
	spec := topology.AggregatingState("spans", serde.String, serde.JSON[span](),
		func() span { return span{Min: math.MaxInt64, Max: math.MinInt64} },
		func(in int64, acc span) span { return span{min(acc.Min, in), max(acc.Max, in), acc.N + 1} },
		func(acc span) string { return fmt.Sprintf("%d..%d of %d", acc.Min, acc.Max, acc.N) },
		topology.StateTTL(100*time.Millisecond), topology.InMemory())
	h := newHarness(t, spec, func() *commands {
		var a *topology.KeyedAggregating[string, int64, span, string]
		return &commands{
			open: func(ctx *topology.ProcessorContext[string, string]) { a = spec.Open(ctx) },
			ops: map[string]func(k, arg string) (string, error){
				"add": func(k, arg string) (string, error) {
					n, err := strconv.ParseInt(arg, 10, 64)
					if err != nil {
						return "", err
					}
					return "", a.Add(k, n)
				},
				"clear": func(k, _ string) (string, error) { return "", a.Clear(k) },
				"get": func(k, _ string) (string, error) {
					s, ok, err := a.Get(k)
					return show(s, ok), err
				},
			},
		}
	})
	h.run(
		step{"k", "get", 1000, "<none>"},
		step{"k", "add 10", 1000, ""},
		step{"k", "add 21", 1050, ""},
		step{"k", "get", 1149, "10..21 of 2"},
		// The accumulator was last written at 1050: at 1150 it expired, so
		// the Add starts again from init.
		step{"k", "add 30", 1150, ""},
		step{"k", "get", 1150, "30..30 of 1"},
		step{"k", "clear", 1151, ""},
		step{"k", "get", 1152, "<none>"},
	)
}

func TestStateBuildErrors(t *testing.T) {
	s := serde.String
	tp := topology.New()
	in := topology.From(tp, "in", s, s)
	proc := func() topology.Processor[string, string, string, string] { return nil }
	topology.Process(in, "p", proc,
		topology.ValueState("", s, s),
		topology.ListState[string, string]("nil-serde", nil, s),
		topology.ReducingState("nil-reduce", s, s, nil),
		topology.AggregatingState[string, string, string, string]("nil-result", s, s, func() string { return "" }, func(a, b string) string { return a + b }, nil),
		topology.MapState("negative", s, s, s, topology.StateTTL(-time.Second)),
		topology.ValueState("micro", s, s, topology.StateTTL(time.Microsecond)),
		topology.ValueState("fine", s, s, topology.StateTTL(time.Hour), topology.InMemory()),
	)
	_, err := tp.Build()
	for _, want := range []error{topology.ErrMissingName, topology.ErrMissingSerde, topology.ErrNilFunction, topology.ErrInvalidTTL} {
		if !errors.Is(err, want) {
			t.Errorf("Build: %v; want it to wrap %v", err, want)
		}
	}
	for _, name := range []string{`"nil-serde"`, `"nil-reduce"`, `"nil-result"`, `"negative"`, `"micro"`} {
		if !strings.Contains(fmt.Sprint(err), name) {
			t.Errorf("Build: %v; want it to name %s", err, name)
		}
	}
	if strings.Contains(fmt.Sprint(err), "fine") {
		t.Errorf("Build: %v; the valid state is reported", err)
	}

	// The valid state is a store like any other.
	tp = topology.New()
	in = topology.From(tp, "in", s, s)
	topology.Process(in, "p", proc, topology.ValueState("fine", s, s, topology.StateTTL(time.Hour), topology.InMemory()))
	b, err := tp.Build()
	if err != nil {
		t.Fatal(err)
	}
	if d := b.Describe(); !strings.Contains(d, "fine (in-memory, cache=true, sub-topology 0, changelog <application.id>-fine-changelog)") {
		t.Errorf("Describe:\n%s", d)
	}
}

// A processor that forgot to pass its state to Process gets an error, not
// a nil dereference.
func TestStateNotPassedToProcess(t *testing.T) {
	spec := topology.ValueState("undeclared", serde.String, serde.String)
	tp := topology.New()
	in := topology.From(tp, "in", serde.String, serde.String)
	out := topology.Process(in, "p", func() topology.Processor[string, string, string, string] { return valueCommands(spec)() })
	topology.To(out, "out", serde.String, serde.String)
	d, err := topologytest.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = topologytest.NewInputTopic(d, "in", serde.String, serde.String).Pipe("k", "get", 1)
	if !errors.Is(err, topology.ErrUnknownStore) || !strings.Contains(err.Error(), "store undeclared: ") {
		t.Errorf("use of an undeclared state: %v", err)
	}
}

// Bytes that the layout cannot have produced come back as errors, never
// as panics or as values.
func TestStateCorrupt(t *testing.T) {
	ttl := topology.StateTTL(time.Second)
	st := store.NewStaged("s", store.NewMemory())
	val := topology.ValueState("s", serde.String, serde.String, ttl).View(st)
	num := topology.ValueState("s", serde.String, serde.Int64).View(st)
	list := topology.ListState("s", serde.String, serde.String).View(st)
	m := topology.MapState("s", serde.String, serde.String, serde.String).View(st)

	for _, c := range []struct {
		name  string
		key   string
		value []byte
		read  func() error
		want  error
	}{
		{"empty entry", "vk", []byte{}, func() error { _, _, err := val.Get("k"); return err }, topology.ErrCorruptState},
		{"unknown format", "vk", []byte{9, 'a'}, func() error { _, _, err := val.Get("k"); return err }, topology.ErrCorruptState},
		{"short timed entry", "vk", []byte{2, 0, 0, 1}, func() error { _, _, err := val.Get("k"); return err }, topology.ErrCorruptState},
		{"negative write time", "vk", []byte{2, 0x80, 0, 0, 0, 0, 0, 0, 0, 'a'}, func() error { _, _, err := val.Get("k"); return err }, topology.ErrCorruptState},
		{"bad value bytes", "vk", []byte{1, 1, 2, 3}, func() error { _, _, err := num.Get("k"); return err }, serde.ErrDecode},
		{"list format", "lk", []byte{7}, func() error { _, err := list.Get("k"); return err }, topology.ErrCorruptState},
		{"list length past the end", "lk", []byte{1, 5, 1, 'a'}, func() error { _, err := list.Get("k"); return err }, topology.ErrCorruptState},
		{"list length overflow", "lk", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, func() error { _, err := list.Get("k"); return err }, topology.ErrCorruptState},
		{"list element", "lk", []byte{1, 1, 3}, func() error { _, err := list.Get("k"); return err }, topology.ErrCorruptState},
		{"list add onto a corrupt list", "lk", []byte{1, 2, 1}, func() error { return list.Add("k", "x") }, topology.ErrCorruptState},
		{"map entry", "m\x01ku", []byte{}, func() error { _, _, err := m.Get("k", "u"); return err }, topology.ErrCorruptState},
		{"map range", "m\x01ku", []byte{3}, func() error { return m.Range("k", func(string, string) error { return nil }) }, topology.ErrCorruptState},
		{"clock", "c", []byte{1, 0}, func() error { return val.Set("k", "a") }, topology.ErrCorruptState},
	} {
		st.Abort()
		if err := st.Put([]byte(c.key), c.value); err != nil {
			t.Fatal(err)
		}
		err := c.read()
		if !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), "store s: ") {
			t.Errorf("%s: %v; want a store s error wrapping %v", c.name, err, c.want)
		}
	}
	// A broken map entry does not stop Clear from removing it.
	st.Abort()
	st.Put([]byte("m\x01ku"), []byte{3})
	if err := m.Clear("k"); err != nil {
		t.Errorf("Clear over a corrupt entry: %v", err)
	}
	if _, ok, _ := st.Get([]byte("m\x01ku")); ok {
		t.Error("Clear left the corrupt entry")
	}
}

// A view (a store read from outside its task) judges expiry by the clock
// stored with the state alone, and neither moves it nor deletes what it
// finds expired.
func TestStateView(t *testing.T) {
	st := store.NewStaged("s", store.NewMemory())
	v := topology.ValueState("s", serde.String, serde.String, topology.StateTTL(100*time.Millisecond)).View(st)
	if err := v.Set("k", "a"); !errors.Is(err, topology.ErrStateNoTime) {
		t.Fatalf("write before any time: %v", err)
	}
	setClock := func(ts int64) {
		t.Helper()
		if err := st.Put([]byte("c"), clockBytes(ts)); err != nil {
			t.Fatal(err)
		}
	}
	setClock(1000)
	if err := v.Set("k", "a"); err != nil {
		t.Fatal(err)
	}
	if b, _, _ := st.Get([]byte("vk")); fmt.Sprintf("%q", b) != timed(1000, "a") {
		t.Errorf("entry %q, want %s: stamped with the stored clock", b, timed(1000, "a"))
	}
	for _, c := range []struct {
		clock int64
		want  bool
	}{{1099, true}, {1100, false}} {
		setClock(c.clock)
		if _, ok, err := v.Get("k"); err != nil || ok != c.want {
			t.Errorf("at clock %d: ok %t, %v; want %t", c.clock, ok, err, c.want)
		}
		if b, _, _ := st.Get([]byte("c")); !slices.Equal(b, clockBytes(c.clock)) {
			t.Errorf("the view moved the clock to %q", b)
		}
	}
	if _, ok, _ := st.Get([]byte("vk")); !ok {
		t.Error("the view deleted the expired entry")
	}
}

// Reading any bytes never panics.
func FuzzStateRead(f *testing.F) {
	f.Add([]byte{1, 'a'})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 'a'})
	f.Add([]byte{1, 2, 1, 'a', 10, 2, 0, 0, 0, 0, 0, 0, 0, 1, 'b'})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, ttl := range []time.Duration{0, time.Millisecond} {
			st := store.NewStaged("s", store.NewMemory())
			for _, k := range []string{"c", "vk", "lk", "m\x01ku", "m\x01kv"} {
				st.Put([]byte(k), b)
			}
			v := topology.ValueState("s", serde.String, serde.String, topology.StateTTL(ttl)).View(st)
			l := topology.ListState("s", serde.String, serde.String, topology.StateTTL(ttl)).View(st)
			m := topology.MapState("s", serde.String, serde.String, serde.String, topology.StateTTL(ttl)).View(st)
			v.Get("k")
			v.Set("k", "x")
			l.Get("k")
			l.Add("k", "x")
			m.Get("k", "u")
			m.Range("k", func(string, string) error { return nil })
			m.Clear("k")
		}
	})
}

// dedupe forwards a record only if its key was not seen within the last
// minute of event time.
type dedupe struct {
	ctx  *topology.ProcessorContext[string, string]
	spec topology.ValueSpec[string, int64]
	seen *topology.KeyedValue[string, int64]
}

func (p *dedupe) Init(ctx *topology.ProcessorContext[string, string]) error {
	p.ctx, p.seen = ctx, p.spec.Open(ctx)
	return nil
}

func (p *dedupe) Process(r topology.Record[string, string]) error {
	if _, ok, err := p.seen.Get(r.Key); err != nil || ok {
		return err
	}
	if err := p.seen.Set(r.Key, r.Timestamp); err != nil {
		return err
	}
	return p.ctx.Forward(r)
}

func (p *dedupe) Close() error { return nil }

func ExampleValueState() {
	seen := topology.ValueState("seen", serde.String, serde.Int64, topology.StateTTL(time.Minute))
	tp := topology.New()
	in := topology.From(tp, "clicks", serde.String, serde.String)
	out := topology.Process(in, "dedupe", func() topology.Processor[string, string, string, string] {
		return &dedupe{spec: seen}
	}, seen)
	topology.To(out, "unique-clicks", serde.String, serde.String)

	d, err := topologytest.New(tp)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	clicks := topologytest.NewInputTopic(d, "clicks", serde.String, serde.String)
	unique := topologytest.NewOutputTopic(d, "unique-clicks", serde.String, serde.String)
	for _, c := range []struct {
		user, page string
		ts         time.Duration
	}{{"ann", "/a", 0}, {"ann", "/b", 30 * time.Second}, {"bob", "/a", 45 * time.Second}, {"ann", "/c", 61 * time.Second}} {
		if err := clicks.Pipe(c.user, c.page, c.ts.Milliseconds()); err != nil {
			fmt.Println(err)
			return
		}
	}
	rs, _ := unique.ReadRecords()
	for _, r := range rs {
		fmt.Println(r.Key, r.Value, time.Duration(r.Timestamp)*time.Millisecond)
	}
	// Output:
	// ann /a 0s
	// bob /a 45s
	// ann /c 1m1s
}
