package processor_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-streams/sluice/internal/readback"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/serde"
	"github.com/sluice-streams/sluice/sink"
	"github.com/sluice-streams/sluice/sink/sinkfile"
	"github.com/sluice-streams/sluice/topology"
)

// Records an external store refuses (sink.Rejected), in both modes, with
// sinkfile as the store: its value serde refuses values that carry "bad",
// as a database refuses a row. Each refused record must become one dead
// letter with the store's message (policy dead-letter), or stop the
// instance without being committed (policy fail); every other record must
// be stored exactly once either way.

// refusing is the store's value serde: it refuses "<id>|bad...".
var refusing = serde.Funcs(func(v []byte) ([]byte, error) {
	if _, rest, _ := strings.Cut(string(v), "|"); strings.HasPrefix(rest, "bad") {
		return nil, errors.New("value refused by the store")
	}
	return v, nil
}, func(b []byte) ([]byte, error) { return b, nil })

// isBad says which inputs the store refuses: some of every kind of key,
// the first and the last among them.
func isBad(i, n int) bool { return i == 0 || i == n-1 || i%37 == 5 }

type rowErrRun struct {
	t        *testing.T
	addrs    []string
	app, in  string
	dir      string
	n        int
	offsets  bool
	policy   topology.Action
	runErr   error
	stored   func() ([]sink.Record[string, []byte], error)
	prepared func() (int, error)
}

// runRowErr feeds n records (bad ones among them) to an app writing
// through a refusing sinkfile store, and runs it until the store holds
// every good record, or until it stops by itself (policy fail).
func runRowErr(t *testing.T, n int, offsets bool, policy topology.Action) *rowErrRun {
	r := &rowErrRun{t: t, addrs: testBrokers(t), app: uniq(t, "rowerr"), in: uniq(t, "rowerr-in"), dir: t.TempDir(),
		n: n, offsets: offsets, policy: policy}
	cl := setup(t, r.addrs, 3, r.in)
	keys := testkeys.All()
	for i := range n {
		v := strconv.Itoa(i) + "|"
		if isBad(i, n) {
			v += "bad"
		}
		v += string([]byte{0xff, 0, byte(i)})
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(keys[i%len(keys)]), Value: []byte(v),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	tp := topology.New()
	s := topology.From(tp, r.in, serde.String, serde.Bytes)
	opt := topology.SinkOnError(topology.Always(policy))
	if offsets {
		st, err := sinkfile.NewStore(r.dir, serde.String, refusing)
		if err != nil {
			t.Fatal(err)
		}
		topology.ToIdempotent(s, sinkName, st, serde.String, serde.Bytes, opt)
		r.stored = func() ([]sink.Record[string, []byte], error) { return st.Records(sinkName, r.app+"-"+sinkName+"-sink") }
	} else {
		p, err := sinkfile.NewParticipant(r.dir, serde.String, refusing)
		if err != nil {
			t.Fatal(err)
		}
		topology.ToParticipant(s, sinkName, sink.Participant[string, []byte](p), opt)
		r.stored = p.Committed
		r.prepared = p.PreparedCount
	}
	_, ctx, cancel, done := startSinkApp(t, tp, r.app, r.addrs, slog.LevelWarn)
	defer cancel()
	want := n
	for i := range n {
		if isBad(i, n) {
			want--
		}
	}
	for {
		select {
		case err := <-done:
			r.runErr = err
			return r
		case <-time.After(50 * time.Millisecond):
		}
		if recs, err := r.stored(); err == nil && distinct(recs) >= want && policy != topology.Fail {
			time.Sleep(300 * time.Millisecond) // anything more would show
			cancel()
			r.runErr = <-done
			return r
		}
		if ctx.Err() != nil {
			cancel()
			<-done
			t.Fatal("timed out")
		}
	}
}

// checkStored: every good record exactly once, no bad one; nothing left
// prepared.
func (r *rowErrRun) checkStored() error {
	recs, err := r.stored()
	if err != nil {
		return err
	}
	var ids []string
	for _, rec := range recs {
		id := idOf(rec.Value)
		if i, _ := strconv.Atoi(id); isBad(i, r.n) {
			return fmt.Errorf("refused record %s is stored", id)
		}
		ids = append(ids, id)
	}
	var want []string
	for i := range r.n {
		if !isBad(i, r.n) {
			want = append(want, strconv.Itoa(i))
		}
	}
	slices.Sort(ids)
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		return fmt.Errorf("stored %d records, want the %d good ones each once: %v", len(ids), len(want), checkExactlyOnceGood(ids, want))
	}
	if r.prepared != nil {
		if n, err := r.prepared(); err != nil || n != 0 {
			return fmt.Errorf("%d transactions left prepared (%v)", n, err)
		}
	}
	return nil
}

func checkExactlyOnceGood(ids, want []string) string {
	return fmt.Sprintf("got %.20v..., want %.20v...", ids, want)
}

// checkDeadLetters: each refused record is one dead letter, read
// committed, carrying the record (two-phase: the input's bytes and
// headers, its coordinates; offsets mode: the sink topic's record) and
// the store's message.
func (r *rowErrRun) checkDeadLetters(dlq []*kgo.Record) error {
	got := map[string]int{}
	for _, d := range dlq {
		hs := map[string]string{}
		for _, h := range d.Headers {
			hs[h.Key] = string(h.Value)
		}
		id := idOf(d.Value)
		got[id]++
		if !strings.Contains(hs["sluice.error.message"], "value refused by the store") || hs["sluice.error.class"] != "production" {
			return fmt.Errorf("dead letter %s: headers %v lack the store's message", id, hs)
		}
		topic := r.in
		if r.offsets {
			topic = r.app + "-" + sinkName + "-sink"
		} else if hs["h"] != id {
			return fmt.Errorf("dead letter %s: the input's header is %q", id, hs["h"])
		}
		if hs["sluice.source.topic"] != topic || hs["sluice.source.offset"] == "" || hs["sluice.source.partition"] == "" {
			return fmt.Errorf("dead letter %s: origin %v, want topic %s", id, hs, topic)
		}
	}
	for i := range r.n {
		id := strconv.Itoa(i)
		if isBad(i, r.n) && got[id] != 1 {
			return fmt.Errorf("refused record %s has %d dead letters, want 1", id, got[id])
		}
		if !isBad(i, r.n) && got[id] != 0 {
			return fmt.Errorf("good record %s was dead-lettered", id)
		}
	}
	return nil
}

func (r *rowErrRun) deadLetters() []*kgo.Record {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recs, err := readback.ReadCommitted(ctx, r.addrs, r.app+"-dlq")
	if err != nil {
		r.t.Fatal(err)
	}
	return recs
}

func modeName(offsets bool) string {
	if offsets {
		return "offsets"
	}
	return "twophase"
}

// TestSinkRejectedRecordDeadLettered: dead-letter policy, both modes; the
// negative control runs the same with the policy continue, where the
// dead-letter checker must fail (and the store's still passes).
func TestSinkRejectedRecordDeadLettered(t *testing.T) {
	for _, offsets := range []bool{false, true} {
		t.Run(modeName(offsets), func(t *testing.T) {
			r := runRowErr(t, 300, offsets, topology.SendToDeadLetterQueue)
			if r.runErr != nil {
				t.Fatal(r.runErr)
			}
			if err := r.checkStored(); err != nil {
				t.Fatal(err)
			}
			if err := r.checkDeadLetters(r.deadLetters()); err != nil {
				t.Fatal(err)
			}
		})
		t.Run(modeName(offsets)+"/continue", func(t *testing.T) {
			r := runRowErr(t, 120, offsets, topology.Continue)
			if r.runErr != nil {
				t.Fatal(r.runErr)
			}
			if err := r.checkStored(); err != nil {
				t.Fatal(err)
			}
			if err := r.checkDeadLetters(r.deadLetters()); err == nil {
				t.Fatal("negative control: the dead-letter checker passed with no dead letters")
			}
		})
	}
}

// TestSinkRejectedRecordStops: policy fail stops the instance with the
// store's error; the refused record is not stored, not dead-lettered, and
// (two-phase) its input offset is not committed.
func TestSinkRejectedRecordStops(t *testing.T) {
	for _, offsets := range []bool{false, true} {
		t.Run(modeName(offsets), func(t *testing.T) {
			r := runRowErr(t, 60, offsets, topology.Fail)
			var rej sink.Rejected
			if !errors.As(r.runErr, &rej) {
				t.Fatalf("Run returned %v, want the store's refusal", r.runErr)
			}
			recs, err := r.stored()
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				if i, _ := strconv.Atoi(idOf(rec.Value)); isBad(i, r.n) {
					t.Fatalf("refused record %d is stored", i)
				}
			}
			if len(r.deadLetters()) != 0 {
				t.Fatal("dead letters under the policy fail")
			}
			if offsets {
				return // its input committed long ago; the store's offset is checked by stored above
			}
			// Record 0 (bad) is first on its partition: that partition's
			// committed offset must not pass it.
			adm := kadm.NewClient(mustClient(t, r.addrs))
			offs, err := adm.FetchOffsets(context.Background(), r.app)
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := offs.Lookup(r.in, partitionOf(t, r, 0)); ok && o.At > 0 {
				t.Fatalf("the refused record's offset was committed: %d", o.At)
			}
		})
	}
}

func mustClient(t *testing.T, addrs []string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// partitionOf finds input i's partition by reading the input.
func partitionOf(t *testing.T, r *rowErrRun, i int) int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recs, err := readback.ReadCommitted(ctx, r.addrs, r.in)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if idOf(rec.Value) == strconv.Itoa(i) {
			if rec.Offset != 0 {
				t.Fatalf("input %d is at offset %d, not first on its partition", i, rec.Offset)
			}
			return rec.Partition
		}
	}
	t.Fatalf("input %d not found", i)
	return 0
}

// downParticipant is sinkfile's participant that fails every call while
// down, as a database that cannot be reached (not a refused record).
type downParticipant struct {
	*sinkfile.Participant[string, []byte]
	down *atomic.Bool
}

var errDown = errors.New("store unreachable")

func (d downParticipant) Prepare(ctx context.Context, xid string, recs []sink.Record[string, []byte]) error {
	if d.down.Load() {
		return errDown
	}
	return d.Participant.Prepare(ctx, xid, recs)
}

func (d downParticipant) Prepared(ctx context.Context, prefix string) ([]string, error) {
	if d.down.Load() {
		return nil, errDown
	}
	return d.Participant.Prepared(ctx, prefix)
}

// TestSinkOutageBacksOff: a store unreachable for 3s while input keeps
// coming costs a bounded number of aborted transactions (the loop backs
// off 100ms doubling to 5s), and afterwards every record is stored exactly
// once. The negative control turns the backoff off: an abort per commit
// interval (30ms), far past the bound.
func TestSinkOutageBacksOff(t *testing.T) {
	const bound = 10 // 3s of 100ms, 200ms, 400ms, 800ms, 1.6s: about 5
	t.Run("backoff", func(t *testing.T) {
		if n := runOutage(t); n > bound {
			t.Fatalf("%d transactions aborted by the outage, want at most %d", n, bound)
		}
	})
	t.Run("negative-control", func(t *testing.T) {
		defer processor.SetSinkBackoff(0, 0)()
		if n := runOutage(t); n <= bound {
			t.Fatalf("negative control: without backoff only %d transactions aborted", n)
		}
	})
}

// runOutage returns the transactions aborted by the sink during the outage.
func runOutage(t *testing.T) int64 {
	addrs := testBrokers(t)
	app, in := uniq(t, "outage"), uniq(t, "outage-in")
	cl := setup(t, addrs, 3, in)
	p, err := sinkfile.NewParticipant(t.TempDir(), serde.String, serde.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	down := &atomic.Bool{}
	tp := topology.New()
	topology.ToParticipant(topology.From(tp, in, serde.String, serde.Bytes), sinkName, sink.Participant[string, []byte](downParticipant{p, down}))
	a, ctx, cancel, done := startSinkApp(t, tp, app, addrs, slog.LevelError)
	defer cancel()
	const n = 400
	keys := testkeys.All()
	var during int64
	for i := range n {
		if i == 100 {
			down.Store(true)
			during = a.Stats().AbortsByCause()["sink"]
		}
		if i == 300 {
			during = a.Stats().AbortsByCause()["sink"] - during
			down.Store(false)
		}
		cl.Produce(ctx, &kgo.Record{Key: []byte(keys[i%len(keys)]), Value: []byte(strconv.Itoa(i) + "|")}, nil)
		time.Sleep(15 * time.Millisecond) // 200 records: 3s of outage
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	awaitStored(t, ctx, p, n, done)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d transactions aborted by the sink during a 3s outage", during)
	return during
}

// stuckParticipant is sinkfile's participant whose Prepare, while stuck,
// waits until its context ends, as a database's prepare that waits for a
// lock another transaction holds.
type stuckParticipant struct {
	*sinkfile.Participant[string, []byte]
	stuck *atomic.Bool
}

func (s stuckParticipant) Prepare(ctx context.Context, xid string, recs []sink.Record[string, []byte]) error {
	if s.stuck.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Participant.Prepare(ctx, xid, recs)
}

// TestSinkPrepareThatWaitsAborts: a prepare that waits and waits is given
// up in time for the transaction to abort cleanly (an abort of cause sink,
// the session kept), and once the store answers again every record is
// stored exactly once. The negative control lets the prepares take the
// whole commit's time: the broker times the transaction out first, End
// fails, and the session is rebuilt.
func TestSinkPrepareThatWaitsAborts(t *testing.T) {
	t.Run("bounded", func(t *testing.T) {
		if logs := runStuckPrepare(t); strings.Contains(logs, "rebuilding session") {
			t.Fatalf("the session was rebuilt:\n%s", logs)
		}
	})
	t.Run("negative-control", func(t *testing.T) {
		defer processor.UnboundPrepares()()
		if logs := runStuckPrepare(t); !strings.Contains(logs, "rebuilding session") {
			t.Fatalf("negative control: the session was not rebuilt:\n%s", logs)
		}
	})
}

// runStuckPrepare stores 100 records, the store stuck for 5s in the middle,
// and returns the instance's log.
func runStuckPrepare(t *testing.T) string {
	addrs := testBrokers(t)
	app, in := uniq(t, "stuck"), uniq(t, "stuck-in")
	cl := setup(t, addrs, 2, in)
	p, err := sinkfile.NewParticipant(t.TempDir(), serde.String, serde.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	stuck := &atomic.Bool{}
	tp := topology.New()
	topology.ToParticipant(topology.From(tp, in, serde.String, serde.Bytes), sinkName, sink.Participant[string, []byte](stuckParticipant{p, stuck}))
	var logs bytes.Buffer
	a, ctx, cancel, done := startSinkApp(t, tp, app, addrs, slog.LevelWarn, processor.TransactionTimeout(4*time.Second),
		processor.Logger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	defer cancel()
	const n = 100
	keys := testkeys.All()
	for i := range n {
		if i == 30 {
			stuck.Store(true)
		}
		if i == 60 {
			time.Sleep(5 * time.Second) // the prepares of records 30-59 wait
			stuck.Store(false)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(keys[i%len(keys)]), Value: []byte(strconv.Itoa(i) + "|")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	awaitStored(t, ctx, p, n, done)
	if a.Stats().AbortsByCause()[processor.AbortSink] == 0 {
		t.Error("no transaction aborted for the sink")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return logs.String()
}

// TestSinkPrepareTimedFromTheFirstRecord: the prepares' deadline counts
// from the transaction's first record, as the broker's timeout does, not
// from its begin: a poll whose processing takes most of the transaction
// timeout before anything is produced (here a step that stalls for 3.5s of
// the 4s) still commits at once. Counted from the begin, the prepare would
// have had no time left and the transaction would have aborted for the
// sink (checked against that code when this test was written).
func TestSinkPrepareTimedFromTheFirstRecord(t *testing.T) {
	addrs := testBrokers(t)
	app, in := uniq(t, "first"), uniq(t, "first-in")
	cl := setup(t, addrs, 1, in)
	p, err := sinkfile.NewParticipant(t.TempDir(), serde.String, serde.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	var stalled atomic.Bool
	tp := topology.New()
	s := topology.Peek(topology.From(tp, in, serde.String, serde.Bytes), func(string, []byte) {
		if !stalled.Swap(true) {
			time.Sleep(3500 * time.Millisecond)
		}
	})
	topology.ToParticipant(s, sinkName, sink.Participant[string, []byte](p))
	a, ctx, cancel, done := startSinkApp(t, tp, app, addrs, slog.LevelWarn, processor.TransactionTimeout(4*time.Second))
	defer cancel()
	const n = 10
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(strconv.Itoa(i) + "|")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	awaitStored(t, ctx, p, n, done)
	if aborts := a.Stats().AbortsByCause()[processor.AbortSink]; aborts != 0 {
		t.Errorf("%d transactions aborted for the sink", aborts)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// awaitStored waits until the store holds n distinct inputs, and checks
// that it holds each exactly once; the instance stopping (done) or ctx
// ending first fails the test.
func awaitStored(t *testing.T, ctx context.Context, p *sinkfile.Participant[string, []byte], n int, done chan error) {
	t.Helper()
	for {
		recs, err := p.Committed()
		if err == nil && distinct(recs) >= n {
			var ids []string
			for _, r := range recs {
				ids = append(ids, idOf(r.Value))
			}
			if err := checkExactlyOnce(ids, n); err != nil {
				t.Fatal(err)
			}
			return
		}
		select {
		case err := <-done:
			t.Fatalf("instance stopped: %v", err)
		case <-ctx.Done():
			t.Fatal("timed out")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// pingParticipant is sinkfile's participant whose store is unreachable at
// start, and says so through sink.Pinger.
type pingParticipant struct {
	*sinkfile.Participant[string, []byte]
}

func (pingParticipant) Ping(context.Context) error {
	return errors.New("connect to postgres://app@db.invalid:5432/bills: refused")
}

// TestSinkUnreachableAtStart: Run stops at once with the sink's Ping error,
// naming the sink; the negative control (the same store without Ping)
// runs.
func TestSinkUnreachableAtStart(t *testing.T) {
	addrs := testBrokers(t)
	for _, ping := range []bool{true, false} {
		in := uniq(t, "ping-in")
		setup(t, addrs, 1, in)
		p, err := sinkfile.NewParticipant(t.TempDir(), serde.String, serde.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		var part sink.Participant[string, []byte] = p
		if ping {
			part = pingParticipant{p}
		}
		tp := topology.New()
		topology.ToParticipant(topology.From(tp, in, serde.String, serde.Bytes), sinkName, part)
		a, err := processor.New(tp, processor.ApplicationID(uniq(t, "ping")), processor.Brokers(addrs...), processor.StateDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = a.Run(ctx)
		cancel()
		switch {
		case ping && (err == nil || !strings.Contains(err.Error(), "sink out-db is unreachable") || !strings.Contains(err.Error(), "postgres://app@db.invalid")):
			t.Fatalf("Run with an unreachable sink: %v", err)
		case !ping && err != nil:
			t.Fatalf("negative control: Run without Ping: %v", err)
		}
	}
}

// startSinkApp runs tp as one instance, for at most 60s; done gets Run's
// error. opts come after the usual options, so they may replace them.
func startSinkApp(t *testing.T, tp *topology.Topology, app string, addrs []string, level slog.Level, opts ...processor.Opt) (*processor.App, context.Context, context.CancelFunc, chan error) {
	a, err := processor.New(tp, append([]processor.Opt{processor.ApplicationID(app), processor.Brokers(addrs...),
		processor.StateDir(t.TempDir()), processor.CommitInterval(30 * time.Millisecond),
		processor.Logger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return a, ctx, cancel, done
}
