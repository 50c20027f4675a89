package task

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/exec"
	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/names"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/topology"
	"github.com/sluice-streams/sluice/window"
)

// TestDataDriven runs the scripts in testdata/ against one task at a time,
// with no broker: the driver's part (offsets, the transaction) is played by
// the script. Each script's expected output is in the file; after a
// deliberate change of behaviour, regenerate them with
//
//	go test ./internal/task -run TestDataDriven -rewrite
//
// and read the diff: an output is right when the design says so, not
// because the code produced it.
//
// Commands:
//
//	topology name=<count|tumbling|session|grouped> [sub=N] [fold] [idle=MS]
//	    build a fixed topology (ddFixtures) and open the task of partition 0
//	    of sub-topology N (default 0) in a fresh state directory, with
//	    Config.FoldUpdates and Config.IdleTimeout as given.
//	pipe
//	topic=T key=K value=V ts=MS [offset=N] [wm=MS]   (one record a line)
//	topic=T announce=<MS|idle> writer=W ts=MS
//	    Task.Process each record; print what it sent. The offset defaults
//	    to the topic's next one; an abort rewinds it, as the consumer would.
//	    wm= gives a repartition record the watermark it was judged by
//	    upstream (header sluice.wm); announce= makes a watermark record of
//	    writer W (header sluice.watermark).
//	flush | commit | abort
//	    Task.Flush, Commit (the transaction committed) or Abort; print what
//	    they sent.
//	tick now=MS
//	    Task.Tick: the wall clock.
//	watermark
//	    the task's watermark, its inputs', its stream time and late count.
//	store name=S
//	    the committed contents of store S, read from its engine, and its
//	    changelog checkpoint.
//	reopen
//	    close the task and open it again from its state directory (the
//	    committed state; what was not committed is lost, as in a crash).
//
// A record sent prints as its topic, partition, key, value, timestamp and
// headers, in the order the task sent it. Printable keys and values print
// as they are, others in hex; int64 store values, windowed keys
// (key@[start,end)) and watermark records are decoded. A window store's
// changelog key prints as its layout in internal/layout/window.go says:
// d/key@start (the window), f@t/key@start (its event timer at t),
// x@t/key@start (its removal at t), or in a store laid out by start
// w/key@start and g@t/key@start, T (the task's time state); its values
// print by size, and the store command shows them decoded.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &ddHarness{}
		defer h.close(t)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return h.run(t, td)
		})
	})
}

// ddFixture is a topology a script can open, and how to show what its task
// sends and stores.
type ddFixture struct {
	build func() *topology.Topology
	// windowed names the window stores, whose changelog keys are decoded
	// and whose contents are read through WindowView.
	windowed map[string]topology.Materialization[string, int64]
	// kv names the key-value stores of string keys and int64 values.
	kv         map[string]bool
	partitions map[string]int32 // Config.InternalPartitions
	// windowedOut names the sink topics whose keys are windowed strings.
	windowedOut map[string]bool
	// int64Out names the sink topics whose values are serde.Int64.
	int64Out map[string]bool
}

const ddApp = "dd"

var ddFixtures = map[string]func() ddFixture{
	// count: a keyed count, no event time. Its store caches, so the
	// changelog gets one record per key written, at the flush.
	"count": func() ddFixture {
		return ddFixture{
			build: func() *topology.Topology {
				tp := topology.New()
				in := topology.From(tp, "in", serde.String, serde.String)
				c := topology.Count(topology.GroupByKey(in), topology.Materialized("counts", serde.String, serde.Int64))
				topology.To(topology.ToStream(c), "out", serde.String, serde.Int64Text)
				return tp
			},
			kv: map[string]bool{"counts": true},
		}
	},
	// tumbling: counts per key in 100 ms tumbling windows, fired when the
	// watermark (10 ms behind the newest record) passes a window's end,
	// kept 50 ms longer for late records (AllowedLateness); records past
	// that go to the topic "late".
	"tumbling": func() ddFixture {
		m := topology.Materialized("per-key", serde.String, serde.Int64)
		return ddFixture{
			build: func() *topology.Topology {
				tp := topology.New()
				in := topology.From(tp, "clicks", serde.String, serde.String,
					topology.Watermarks(window.BoundedOutOfOrderness(10*time.Millisecond)))
				ws := topology.WindowedBy(topology.GroupByKey(in), window.Tumbling(100*time.Millisecond),
					topology.AllowedLateness(50*time.Millisecond))
				c := topology.CountWindows(ws, m)
				topology.To(topology.ToStream(c), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
				topology.To(topology.LateRecords(ws), "late", serde.String, serde.String)
				return tp
			},
			windowed:    map[string]topology.Materialization[string, int64]{"per-key": m},
			windowedOut: map[string]bool{"out": true},
		}
	},
	// session: counts per key in sessions of 30 ms inactivity, monotonous
	// watermark (1 ms behind the newest record), kept 100 ms after they
	// fire (AllowedLateness), so that a record can still merge sessions
	// that fired.
	"session": func() ddFixture {
		m := topology.Materialized("sessions", serde.String, serde.Int64)
		return ddFixture{
			build: func() *topology.Topology {
				tp := topology.New()
				in := topology.From(tp, "in", serde.String, serde.String)
				ws := topology.WindowedBy(topology.GroupByKey(in), window.InactivityGap(30*time.Millisecond),
					topology.AllowedLateness(100*time.Millisecond))
				c := topology.CountWindows(ws, m)
				topology.To(topology.ToStream(c), "out", topology.WindowedSerde(serde.String), serde.Int64Text)
				topology.To(topology.LateRecords(ws), "late", serde.String, serde.String)
				return tp
			},
			windowed:    map[string]topology.Materialization[string, int64]{"sessions": m},
			windowedOut: map[string]bool{"out": true},
		}
	},
	// grouped: groupBy-then-window (groupThenWindow). Sub-topology 0 reads
	// clicks (watermark 10 ms behind) and writes the 2-partition topic
	// dd-by-user-repartition; sub-topology 1 counts per user in 100 ms
	// windows.
	"grouped": func() ddFixture {
		return ddFixture{
			// the same serdes as groupThenWindow's store, to read it
			windowed:   map[string]topology.Materialization[string, int64]{"per-user": topology.Materialized("per-user", serde.String, serde.Int64)},
			build:      groupThenWindow,
			partitions: map[string]int32{ddApp + "-by-user-repartition": 2},
			int64Out:   map[string]bool{"out": true},
		}
	},
}

type ddHarness struct {
	fx    ddFixture
	plan  *exec.Plan
	sub   int
	dir   string
	cfg   Config
	tk    *Task
	sent  []*kgo.Record
	fold  bool
	clOff map[string]int64 // next offset per produced topic, for promises
	// next input offset per topic, now and at the last commit
	next, committed map[string]int64
}

func (h *ddHarness) close(t *testing.T) {
	if h.tk != nil {
		if err := h.tk.Close(); err != nil {
			t.Error(err)
		}
		h.tk = nil
	}
}

func (h *ddHarness) send(r *kgo.Record, promise func(*kgo.Record, error)) {
	h.sent = append(h.sent, r)
	if promise != nil {
		r.Offset = h.clOff[r.Topic]
		h.clOff[r.Topic]++
		promise(r, nil)
	}
}

func (h *ddHarness) open(t *testing.T) {
	tk, err := New(ID{h.sub, 0}, h.plan.Subs[h.sub], h.plan, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Init(); err != nil {
		t.Fatal(err)
	}
	h.tk = tk
}

func (h *ddHarness) run(t *testing.T, td *datadriven.TestData) string {
	if td.Cmd != "topology" && h.tk == nil {
		td.Fatalf(t, "%s before topology", td.Cmd)
	}
	h.sent = h.sent[:0]
	switch td.Cmd {
	case "topology":
		h.close(t)
		var name string
		td.ScanArgs(t, "name", &name)
		mk, ok := ddFixtures[name]
		if !ok {
			td.Fatalf(t, "unknown topology %q", name)
		}
		h.fx = mk()
		h.sub = 0
		td.MaybeScanArgs(t, "sub", &h.sub)
		h.fold = td.HasArg("fold")
		var idle int64
		td.MaybeScanArgs(t, "idle", &idle)
		h.plan = plan(t, h.fx.build())
		h.dir = t.TempDir()
		h.clOff = map[string]int64{}
		h.next, h.committed = map[string]int64{}, map[string]int64{}
		h.cfg = Config{AppID: ddApp, StateDir: h.dir, Send: h.send, InternalPartitions: h.fx.partitions, FoldUpdates: h.fold,
			IdleTimeout: time.Duration(idle) * time.Millisecond}
		h.open(t)
		var b strings.Builder
		fmt.Fprintf(&b, "task %s", h.tk.ID())
		if len(h.tk.Stores()) > 0 {
			fmt.Fprintf(&b, ", stores %s", strings.Join(h.tk.Stores(), ", "))
		}
		if h.plan.UsesEventTime() {
			b.WriteString(", event time")
		}
		return b.String() + "\n"

	case "pipe":
		var b strings.Builder
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			r := h.parseRecord(t, td, line)
			if err := h.tk.Process(r); err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
			}
		}
		return h.output(&b)

	case "flush":
		var b strings.Builder
		if err := h.tk.Flush(); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		return h.output(&b)

	case "commit":
		var b strings.Builder
		if err := h.tk.Commit(); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		for k, v := range h.next {
			h.committed[k] = v
		}
		return h.output(&b)

	case "abort":
		var b strings.Builder
		h.tk.Abort()
		clear(h.next)
		for k, v := range h.committed {
			h.next[k] = v
		}
		return h.output(&b)

	case "reopen":
		h.close(t)
		// A crash loses what was not committed: the consumer resumes at
		// the committed offsets.
		clear(h.next)
		for k, v := range h.committed {
			h.next[k] = v
		}
		h.open(t)
		return h.output(&strings.Builder{})

	case "tick":
		var now int64
		td.ScanArgs(t, "now", &now)
		var b strings.Builder
		if err := h.tk.Tick(now); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		return h.output(&b)

	case "watermark":
		tr := h.tk.clock.tracker
		var b strings.Builder
		fmt.Fprintf(&b, "watermark %s\n", fmtWM(tr.Watermark()))
		for i := range tr.Inputs() {
			fmt.Fprintf(&b, "  input %d: %s", i, fmtWM(tr.InputWatermark(i)))
			if tr.InputIdle(i) {
				b.WriteString(" idle")
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "stream time %s\nlate %d\n", fmtWM(h.tk.streamTime), h.tk.Late())
		return b.String()

	case "store":
		var name string
		td.ScanArgs(t, "name", &name)
		return h.dumpStore(t, td, name)

	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
		return ""
	}
}

// parseRecord reads "topic=T key=K value=V ts=MS [offset=N]".
func (h *ddHarness) parseRecord(t *testing.T, td *datadriven.TestData, line string) *kgo.Record {
	r := &kgo.Record{}
	offset := int64(-1)
	writer := "0"
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			td.Fatalf(t, "pipe: %q is not key=value", f)
		}
		switch k {
		case "topic":
			r.Topic = v
		case "key":
			r.Key = []byte(v)
		case "value":
			r.Value = []byte(v)
		case "ts":
			ts, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				td.Fatalf(t, "pipe: ts: %v", err)
			}
			r.Timestamp = time.UnixMilli(ts)
		case "wm":
			// The watermark the record was judged by upstream.
			wm, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				td.Fatalf(t, "pipe: wm: %v", err)
			}
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: exec.HeaderRecordWatermark, Value: binary.BigEndian.AppendUint64(nil, uint64(wm))})
		case "announce":
			// A watermark record: writer W's watermark, or idle.
			wm, idle := int64(window.NoWatermark), v == "idle"
			if !idle {
				var err error
				if wm, err = strconv.ParseInt(v, 10, 64); err != nil {
					td.Fatalf(t, "pipe: announce: %v", err)
				}
			}
			r.Value = binary.BigEndian.AppendUint64(nil, uint64(wm))
			if idle {
				r.Value = append(r.Value, 1)
			} else {
				r.Value = append(r.Value, 0)
			}
			r.Headers = append([]kgo.RecordHeader{{Key: exec.HeaderWatermark}}, r.Headers...)
		case "writer":
			writer = v
		case "offset":
			o, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				td.Fatalf(t, "pipe: offset: %v", err)
			}
			offset = o
		default:
			td.Fatalf(t, "pipe: unknown field %q", k)
		}
	}
	if len(r.Headers) > 0 && r.Headers[0].Key == exec.HeaderWatermark {
		r.Headers[0].Value = []byte(writer)
	}
	if offset < 0 {
		offset = h.next[r.Topic]
	}
	r.Offset = offset
	h.next[r.Topic] = offset + 1
	return r
}

// output prints what the task sent since the command began, in the order
// it sent it (which the task fixes: it is part of what the scripts check),
// after any errors already in b.
func (h *ddHarness) output(b *strings.Builder) string {
	for _, r := range h.sent {
		b.WriteString(h.fmtRecord(r))
		b.WriteString("\n")
	}
	h.sent = h.sent[:0]
	if b.Len() == 0 {
		return "ok\n"
	}
	return b.String()
}

func (h *ddHarness) fmtRecord(r *kgo.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s p%d", r.Topic, r.Partition)
	if len(r.Headers) > 0 && r.Headers[0].Key == exec.HeaderWatermark {
		// A watermark record: no key; the writer and its watermark.
		fmt.Fprintf(&b, " watermark-record writer=%s", r.Headers[0].Value)
		if len(r.Value) == 9 {
			fmt.Fprintf(&b, " wm=%s idle=%t", fmtWM(int64(binary.BigEndian.Uint64(r.Value))), r.Value[8]&1 != 0)
		} else {
			fmt.Fprintf(&b, " value=%s", fmtBytes(r.Value))
		}
		fmt.Fprintf(&b, " ts=%d", r.Timestamp.UnixMilli())
		return b.String()
	}
	store, isChangelog := h.changelogStore(r.Topic)
	_, windowedStore := h.fx.windowed[store]
	switch {
	case isChangelog && (windowedStore || string(r.Key) == string(layout.TimeStateKey)):
		fmt.Fprintf(&b, " key=%s", fmtWindowStoreKey(r.Key))
		if r.Value == nil {
			b.WriteString(" delete")
		} else {
			fmt.Fprintf(&b, " value=(%d bytes)", len(r.Value))
		}
	case isChangelog && h.fx.kv[store]:
		fmt.Fprintf(&b, " key=%s value=%s", fmtBytes(r.Key), fmtInt64(r.Value))
	case h.fx.int64Out[r.Topic]:
		fmt.Fprintf(&b, " key=%s value=%s", fmtBytes(r.Key), fmtInt64(r.Value))
	case h.fx.windowedOut[r.Topic]:
		fmt.Fprintf(&b, " key=%s value=%s", fmtWindowedKey(r.Key), fmtBytes(r.Value))
	default:
		fmt.Fprintf(&b, " key=%s value=%s", fmtBytes(r.Key), fmtBytes(r.Value))
	}
	if !isChangelog {
		fmt.Fprintf(&b, " ts=%d", r.Timestamp.UnixMilli())
	}
	for _, hd := range r.Headers {
		if hd.Key == exec.HeaderRecordWatermark && len(hd.Value) == 8 {
			fmt.Fprintf(&b, " %s=%s", hd.Key, fmtWM(int64(binary.BigEndian.Uint64(hd.Value))))
			continue
		}
		fmt.Fprintf(&b, " %s=%s", hd.Key, fmtBytes(hd.Value))
	}
	return b.String()
}

// changelogStore is the store whose changelog topic is topic, if it is one.
func (h *ddHarness) changelogStore(topic string) (string, bool) {
	for _, name := range h.tk.Stores() {
		if topic == names.Changelog(ddApp, name) {
			return name, true
		}
	}
	return "", false
}

func (h *ddHarness) dumpStore(t *testing.T, td *datadriven.TestData, name string) string {
	eng := h.tk.Engine(name)
	if eng == nil {
		td.Fatalf(t, "no store %q", name)
	}
	var b strings.Builder
	cp, err := eng.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if cp == store.NoCheckpoint {
		b.WriteString("checkpoint none\n")
	} else {
		fmt.Fprintf(&b, "checkpoint %d\n", cp)
	}
	if v, ok, err := eng.Get(layout.TimeStateKey); err != nil {
		t.Fatal(err)
	} else if ok {
		b.WriteString(h.fmtTimeState(v))
	}
	if m, ok := h.fx.windowed[name]; ok {
		// A Staged with nothing staged reads the engine: the committed
		// windows.
		err := m.WindowView(store.NewStaged(name, eng)).All(func(w topology.Windowed[string], n int64) error {
			fmt.Fprintf(&b, "%s [%d,%d) = %d\n", fmtBytes([]byte(w.Key)), w.Window.Start, w.Window.End, n)
			return nil
		})
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		}
		return b.String()
	}
	err = eng.Range(nil, nil, func(k, v []byte) error {
		if string(k) == string(layout.TimeStateKey) {
			return nil
		}
		if h.fx.kv[name] {
			fmt.Fprintf(&b, "%s = %s\n", fmtBytes(k), fmtInt64(v))
		} else {
			fmt.Fprintf(&b, "%s = %s\n", fmtBytes(k), fmtBytes(v))
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	return b.String()
}

// fmtTimeState decodes the time state (see saveTime).
func (h *ddHarness) fmtTimeState(v []byte) string {
	streamTime, state, err := layout.ParseTimeState(v)
	if err != nil {
		return fmt.Sprintf("time state: bad %x\n", v)
	}
	tr, err := window.NewTracker(window.Monotonous(), h.tk.clock.tracker.Inputs())
	if err != nil {
		return fmt.Sprintf("time state: %v\n", err)
	}
	if err := tr.UnmarshalBinary(state); err != nil {
		return fmt.Sprintf("time state: %v\n", err)
	}
	s := fmt.Sprintf("time state: stream time %s, watermark %s", fmtWM(streamTime), fmtWM(tr.Watermark()))
	for i := range tr.Inputs() {
		s += fmt.Sprintf(", input %d %s", i, fmtWM(tr.InputWatermark(i)))
		if tr.InputIdle(i) {
			s += " idle"
		}
	}
	return s + "\n"
}

func fmtWM(wm int64) string {
	if wm == window.NoWatermark {
		return "none"
	}
	if wm == -1 {
		return "-1"
	}
	return strconv.FormatInt(wm, 10)
}

// fmtBytes prints printable ASCII as it is, anything else in hex.
func fmtBytes(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	if len(b) == 0 {
		return `""`
	}
	for _, c := range b {
		if c <= ' ' || c > '~' {
			return "0x" + hex.EncodeToString(b)
		}
	}
	return string(b)
}

func fmtInt64(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	n, err := serde.Int64.Decode(b)
	if err != nil {
		return "0x" + hex.EncodeToString(b)
	}
	return strconv.FormatInt(n, 10)
}

// fmtWindowedKey prints a windowed key of a string key (WindowedSerde).
func fmtWindowedKey(b []byte) string {
	w, err := topology.WindowedSerde(serde.String).Decode(b)
	if err != nil {
		return fmtBytes(b)
	}
	return fmt.Sprintf("%s@[%d,%d)", fmtBytes([]byte(w.Key)), w.Window.Start, w.Window.End)
}

// fmtWindowStoreKey prints a key of a window store, laid out as
// internal/layout/window.go says, by key or by start: the window's data (d,
// w), its event timer (f, g), its processing timer (p, q), its removal (x);
// and the task's time state (T).
func fmtWindowStoreKey(k []byte) string {
	if string(k) == string(layout.TimeStateKey) {
		return "T(time-state)"
	}
	rest, prefix := k, ""
	switch {
	case len(k) == 9 && k[0] == 'w':
		// The start of a range delete of the windows starting there.
		return fmt.Sprintf("w@%d", layout.ReadTime(k[1:]))
	case len(k) > 0 && (k[0] == 'd' || k[0] == 'w'):
		rest, prefix = k[1:], fmt.Sprintf("%c/", k[0])
	case len(k) > 9 && strings.IndexByte("fpxgq", k[0]) >= 0:
		rest, prefix = k[9:], fmt.Sprintf("%c@%d/", k[0], layout.ReadTime(k[1:9]))
	default:
		return fmtBytes(k)
	}
	data := byte('d')
	if k[0] == 'w' || k[0] == 'g' || k[0] == 'q' {
		data = 'w'
	}
	kb, start, err := layout.ParseWindowKey(append([]byte{data}, rest...))
	if err != nil {
		return fmtBytes(k)
	}
	return fmt.Sprintf("%s%s@%d", prefix, fmtBytes(kb), start)
}
