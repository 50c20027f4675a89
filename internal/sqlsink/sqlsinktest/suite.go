package sqlsinktest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/plugin/sluicedb"
	"github.com/sluice-streams/sluice/sink"
)

// Bill is the value the suite writes; a nil *Bill is a tombstone.
type Bill struct {
	Account string
	Cents   int64
	Note    string
	Blob    []byte
}

// Sink is what an adapter's *Sink[string, *Bill] is.
type Sink interface {
	sink.Participant[string, *Bill]
	sink.Idempotent[string, *Bill]
}

// Harness is one adapter against one server.
type Harness struct {
	// URL is the sink's database; the sink's sessions are those Kill ends.
	URL string
	// Open returns a sink of t at url, with at most maxRows rows per
	// statement (0: the adapter's default).
	Open func(ctx context.Context, url string, t sluicedb.Table[string, *Bill], maxRows int) (Sink, error)
	// Close closes a sink.
	Close func(Sink)
	// Hook sets the function the sink runs right before it prepares.
	Hook func(s Sink, fn func())
	// HookCommit sets the function offsets mode runs right before COMMIT.
	HookCommit func(s Sink, fn func())
	// Reader is an independent session on the sink's database, not ended
	// by Kill.
	Reader *sql.DB
	// Restart restarts the server cleanly, Crash as in a crash.
	Restart, Crash func(context.Context) error
	// Kill ends the sink's sessions.
	Kill func(context.Context) (int, error)
	// Text is a column type of at most n characters (binary collation),
	// Int a 64-bit integer, Bytes a binary string of any length.
	Text       func(n int) string
	Int, Bytes string
	// NULInText says whether a text column takes U+0000.
	NULInText bool
}

var tableSeq atomic.Int64

func unique(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano()%1e6, tableSeq.Add(1))
}

// billsTable is insert-only: no key, so a duplicate shows.
func (h *Harness) billsTable(name string) sluicedb.Table[string, *Bill] {
	return BillsTable(name, h.Text(64), h.Int)
}

// BillsTable is the suite's insert-only table: bill_id (text, 64),
// account (text, 16), cents (int, not negative), src_offset.
func BillsTable(name, text64, integer string) sluicedb.Table[string, *Bill] {
	text16 := strings.Replace(text64, "64", "16", 1)
	return sluicedb.Table[string, *Bill]{
		Name: name,
		Columns: []sluicedb.Column{{Name: "bill_id", Type: text64 + " NOT NULL"}, {Name: "account", Type: text16 + " NOT NULL"},
			{Name: "cents", Type: integer + " NOT NULL CHECK (cents >= 0)"}, {Name: "src_offset", Type: integer}},
		Row: func(r sink.Record[string, *Bill]) ([]any, error) {
			return []any{r.Key, r.Value.Account, r.Value.Cents, r.Offset}, nil
		},
		Create: true,
	}
}

// mirrorTable mirrors a table: upsert by key, delete on a nil value.
func (h *Harness) mirrorTable(name string, keyLen int) sluicedb.Table[string, *Bill] {
	return sluicedb.Table[string, *Bill]{
		Name: name,
		Columns: []sluicedb.Column{{Name: "k", Type: h.Text(keyLen) + " NOT NULL"}, {Name: "note", Type: h.Text(200)},
			{Name: "bin", Type: h.Bytes}, {Name: "cents", Type: h.Int}},
		PrimaryKey: []string{"k"},
		Row: func(r sink.Record[string, *Bill]) ([]any, error) {
			return []any{r.Key, r.Value.Note, r.Value.Blob, r.Value.Cents}, nil
		},
		Deleted: func(r sink.Record[string, *Bill]) bool { return r.Value == nil },
		Key:     func(r sink.Record[string, *Bill]) ([]any, error) { return []any{r.Key}, nil },
		Create:  true,
	}
}

func bills(topic string, from, n int) []sink.Record[string, *Bill] {
	out := make([]sink.Record[string, *Bill], n)
	for i := range out {
		o := from + i
		out[i] = sink.Record[string, *Bill]{Key: fmt.Sprintf("bill-%06d", o), Value: &Bill{Account: fmt.Sprintf("acct-%d", o%7), Cents: int64(o)},
			Topic: topic, Partition: int32(o % 3), Offset: int64(o)}
	}
	return out
}

func (h *Harness) open(t *testing.T, ctx context.Context, tbl sluicedb.Table[string, *Bill]) Sink {
	t.Helper()
	s, err := h.Open(ctx, h.URL, tbl, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(s) })
	return s
}

// count returns the rows of table and of its distinct bill ids.
func (h *Harness) count(t *testing.T, ctx context.Context, table string) (rows, distinct int) {
	t.Helper()
	var err error
	for range 20 { // the reader's pooled sessions die with a restart of the server
		if err = h.Reader.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT bill_id) FROM "+table).Scan(&rows, &distinct); err == nil {
			return rows, distinct
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal(err)
	return 0, 0
}

// retry runs f until it returns something other than a connection error:
// after a restart or a killed session, the pool's first use may find a
// dead connection, as the runtime's would.
func retry(ctx context.Context, f func() error) error {
	var err error
	for range 20 {
		if err = f(); !errors.Is(err, sluicedb.ErrConnection) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
	return err
}

func (h *Harness) prepared(t *testing.T, ctx context.Context, s Sink, prefix string) []string {
	t.Helper()
	var ids []string
	err := retry(ctx, func() (err error) { ids, err = s.Prepared(ctx, prefix); return err })
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// Run runs the suite.
func Run(t *testing.T, h *Harness) {
	t.Run("TwoPhase", h.testTwoPhase)
	t.Run("KilledSession", h.testKilledSession)
	t.Run("Offsets", h.testOffsets)
	t.Run("Rejected", h.testRejected)
	t.Run("Adversarial", h.testAdversarial)
	t.Run("Unreachable", h.testUnreachable)
	t.Run("Concurrent", h.testConcurrent)
	t.Run("PreparedSideBySide", h.testPreparedSideBySide)
}

// testConcurrent: writers racing on one sink's partitions (a zombie and
// its successor replaying the same committed output) write each record
// once, and prepares of several tasks at once do not mix.
func (h *Harness) testConcurrent(t *testing.T) {
	ctx := ctxFor(t)
	table := unique("bills")
	s := h.open(t, ctx, h.billsTable(table))
	name := unique("sink")
	const writers, batches, per = 4, 12, 50
	errs := make(chan error, writers*2)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for b := range batches {
				recs := bills("out", b*per, per)
				next := map[int32]int64{}
				for _, r := range recs {
					next[r.Partition] = max(next[r.Partition], r.Offset+1)
				}
				if err := retry(ctx, func() error { return s.Write(ctx, name, "out", recs, next) }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	prefix := unique("conc") + "-"
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				xid := fmt.Sprintf("%s%d-%d", prefix, w, b)
				if err := s.Prepare(ctx, xid, bills("in", 100000+(w*batches+b)*per, per)); err != nil {
					errs <- err
					return
				}
				if err := s.CommitPrepared(ctx, xid); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := batches*per + writers*batches*per
	if rows, distinct := h.count(t, ctx, table); rows != want || distinct != want {
		var written, prepared int
		_ = h.Reader.QueryRowContext(ctx, "SELECT count(CASE WHEN src_offset < 100000 THEN 1 END), count(CASE WHEN src_offset >= 100000 THEN 1 END) FROM "+table).Scan(&written, &prepared)
		t.Fatalf("%d rows, %d distinct; want %d exactly once (offsets mode wrote %d of %d, two-phase %d of %d)",
			rows, distinct, want, written, batches*per, prepared, writers*batches*per)
	}
	if ids := h.prepared(t, ctx, s, prefix); len(ids) != 0 {
		t.Fatalf("left prepared: %v", ids)
	}
}

// testPreparedSideBySide: the tasks of one Kafka transaction prepare their
// batches side by side, and none is committed before all are prepared. So a
// prepared batch must hold no lock that another task's batch, of other
// keys, waits for: that wait would last until the transaction timed out
// (InnoDB's gap locks at REPEATABLE READ did this: a delete of an absent
// key locked the gap around it until the commit). Here two batches of
// interleaved keys, each of upserts and deletes of present and absent
// rows, must both prepare while the other is prepared.
func (h *Harness) testPreparedSideBySide(t *testing.T) {
	ctx := ctxFor(t)
	table := unique("mirror")
	s := h.open(t, ctx, h.mirrorTable(table, 64))
	model := map[string]*Bill{}
	key := func(i int) string { return fmt.Sprintf("k-%04d", i) }
	var first []sink.Record[string, *Bill]
	for i := 0; i < 120; i += 4 { // rows at every fourth key
		first = append(first, sink.Record[string, *Bill]{Key: key(i), Value: &Bill{Note: "first", Blob: []byte{}}, Topic: "t", Offset: int64(i)})
		model[key(i)] = first[len(first)-1].Value
	}
	xid := unique("side")
	if err := s.Prepare(ctx, xid, first); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitPrepared(ctx, xid); err != nil {
		t.Fatal(err)
	}
	// Task 0 takes the even keys, task 1 the odd ones; each upserts and
	// deletes keys that are rows and keys that are not.
	batches := make([][]sink.Record[string, *Bill], 2)
	for i := range 120 {
		var b *Bill
		if i%3 != 0 {
			b = &Bill{Note: fmt.Sprint("task ", i%2), Blob: []byte{byte(i)}, Cents: int64(i)}
		}
		batches[i%2] = append(batches[i%2], sink.Record[string, *Bill]{Key: key(i), Value: b, Topic: "t", Partition: int32(i % 2), Offset: int64(i)})
		if b == nil {
			delete(model, key(i))
		} else {
			model[key(i)] = b
		}
	}
	prefix := unique("side") + "-"
	for task, recs := range batches {
		// Far below any lock wait timeout, far above a prepare's time.
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		err := s.Prepare(pctx, fmt.Sprint(prefix, task), recs)
		cancel()
		if err != nil {
			t.Fatalf("task %d's batch could not prepare beside task %d's prepared one: %v", task, 1-task, err)
		}
	}
	for task := range batches {
		if err := s.CommitPrepared(ctx, fmt.Sprint(prefix, task)); err != nil {
			t.Fatal(err)
		}
	}
	h.compare(t, ctx, table, model)
}

// Bench measures one batch of n rows per operation, in mode "two_phase"
// (Prepare and CommitPrepared) or "offsets" (Write), maxRows per
// statement.
func Bench(b *testing.B, h *Harness, mode string, n, maxRows int) {
	ctx := context.Background()
	table := unique("bench")
	s, err := h.Open(ctx, h.URL, h.billsTable(table), maxRows)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(s)
	name := unique("sink")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		recs := bills("t", i*n, n)
		switch mode {
		case "two_phase":
			xid := fmt.Sprintf("%s-%d", table, i)
			if err := s.Prepare(ctx, xid, recs); err != nil {
				b.Fatal(err)
			}
			if err := s.CommitPrepared(ctx, xid); err != nil {
				b.Fatal(err)
			}
		default:
			next := map[int32]int64{}
			for _, r := range recs {
				next[r.Partition] = max(next[r.Partition], r.Offset+1)
			}
			if err := s.Write(ctx, name, "t", recs, next); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "rows/s")
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (h *Harness) testTwoPhase(t *testing.T) {
	ctx := ctxFor(t)
	table := unique("bills")
	s := h.open(t, ctx, h.billsTable(table))
	prefix := unique("app") + "-"
	x1, x2, other := prefix+"0_1-1", prefix+"0_1-2", unique("other")+"-0_1-1"
	const n = 2500 // several statements' worth (1000 rows each)
	if err := s.Prepare(ctx, x1, bills("in", 0, n)); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx, x2, bills("in", n, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx, other, bills("in", 5000, 10)); err != nil {
		t.Fatal(err)
	}
	// Prepared: invisible to another session; listed by prefix only.
	if rows, _ := h.count(t, ctx, table); rows != 0 {
		t.Fatalf("%d rows of prepared transactions visible", rows)
	}
	if ids := h.prepared(t, ctx, s, prefix); len(ids) != 2 || !contains(ids, x1) || !contains(ids, x2) {
		t.Fatalf("Prepared(%q) = %v, want %s and %s only", prefix, ids, x1, x2)
	}
	// They survive a killed session, a clean restart and a crash.
	if _, err := h.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Crash(ctx); err != nil {
		t.Fatal(err)
	}
	if ids := h.prepared(t, ctx, s, prefix); len(ids) != 2 {
		t.Fatalf("after restart and crash: Prepared = %v", ids)
	}
	if rows, _ := h.count(t, ctx, table); rows != 0 {
		t.Fatalf("%d rows visible after restart", rows)
	}
	// Commit: visible exactly once; a second commit is ErrNotPrepared.
	if err := retry(ctx, func() error { return s.CommitPrepared(ctx, x1) }); err != nil {
		t.Fatal(err)
	}
	if rows, distinct := h.count(t, ctx, table); rows != n || distinct != n {
		t.Fatalf("after commit: %d rows, %d distinct, want %d", rows, distinct, n)
	}
	if err := s.CommitPrepared(ctx, x1); !errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("second CommitPrepared = %v, want ErrNotPrepared", err)
	}
	// Rollback: gone.
	if err := s.RollbackPrepared(ctx, x2); err != nil {
		t.Fatal(err)
	}
	if err := s.RollbackPrepared(ctx, x2); !errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("second RollbackPrepared = %v, want ErrNotPrepared", err)
	}
	if err := s.CommitPrepared(ctx, x2); !errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("CommitPrepared after rollback = %v, want ErrNotPrepared", err)
	}
	if rows, _ := h.count(t, ctx, table); rows != n {
		t.Fatalf("after rollback: %d rows, want %d", rows, n)
	}
	if err := s.CommitPrepared(ctx, unique("never")); !errors.Is(err, sink.ErrNotPrepared) {
		t.Fatalf("CommitPrepared of an unknown id = %v, want ErrNotPrepared", err)
	}
	if ids := h.prepared(t, ctx, s, prefix); len(ids) != 0 {
		t.Fatalf("left prepared: %v", ids)
	}
	if err := s.RollbackPrepared(ctx, other); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", strings.Repeat("x", sink.MaxXIDLength+1), "a'b", "a b"} {
		if err := s.Prepare(ctx, bad, nil); err == nil || errors.Is(err, sluicedb.ErrConnection) {
			t.Fatalf("Prepare(%q) = %v, want an id error", bad, err)
		}
	}

	// Negative control: the same batch written twice without two-phase
	// commit, as a sink that cannot tell whether its write landed before
	// a crash would: the checker sees the duplicate.
	if err := s.Write(ctx, unique("plain"), "in", bills("in", 0, n), map[int32]int64{0: n, 1: n, 2: n}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, unique("plain"), "in", bills("in", 0, n), map[int32]int64{0: n, 1: n, 2: n}); err != nil {
		t.Fatal(err)
	}
	if rows, distinct := h.count(t, ctx, table); rows != 3*n || distinct != n {
		t.Fatalf("control: %d rows, %d distinct; want %d and %d (duplicates seen)", rows, distinct, 3*n, n)
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// testKilledSession: the sink's session ended between its writes and
// PREPARE (or, in offsets mode, COMMIT) leaves nothing, prepared or
// visible, and the error is a lost connection, not a rejected row.
func (h *Harness) testKilledSession(t *testing.T) {
	ctx := ctxFor(t)
	table := unique("bills")
	s := h.open(t, ctx, h.billsTable(table))
	prefix := unique("app") + "-"
	var killed int
	h.Hook(s, func() {
		n, err := h.Kill(ctx)
		if err != nil {
			t.Error(err)
		}
		killed += n
	})
	err := s.Prepare(ctx, prefix+"x", bills("in", 0, 100))
	h.Hook(s, nil)
	if killed == 0 {
		t.Fatal("no session was killed: the test tests nothing")
	}
	if err == nil {
		t.Fatal("Prepare succeeded on a killed session")
	}
	var re *sluicedb.RowError
	if errors.As(err, &re) || !errors.Is(err, sluicedb.ErrConnection) {
		t.Fatalf("Prepare on a killed session = %v; want ErrConnection, not a RowError", err)
	}
	if ids := h.prepared(t, ctx, s, prefix); len(ids) != 0 {
		t.Fatalf("left prepared: %v", ids)
	}
	if rows, _ := h.count(t, ctx, table); rows != 0 {
		t.Fatalf("%d rows visible", rows)
	}
	// Control: the same Prepare without the kill does prepare.
	if err := retry(ctx, func() error { return s.Prepare(ctx, prefix+"y", bills("in", 0, 100)) }); err != nil {
		t.Fatal(err)
	}
	if ids := h.prepared(t, ctx, s, prefix); len(ids) != 1 {
		t.Fatalf("control: Prepared = %v", ids)
	}
	if err := s.RollbackPrepared(ctx, prefix+"y"); err != nil {
		t.Fatal(err)
	}

	// Offsets mode: a session killed before COMMIT leaves neither rows nor
	// coordinates, and the retry writes the batch exactly once.
	name := unique("sink")
	recs, next := bills("out", 0, 100), map[int32]int64{0: 100, 1: 100, 2: 100}
	killed = 0
	h.HookCommit(s, func() {
		n, err := h.Kill(ctx)
		if err != nil {
			t.Error(err)
		}
		killed += n
	})
	err = s.Write(ctx, name, "out", recs, next)
	h.HookCommit(s, nil)
	if killed == 0 || !errors.Is(err, sluicedb.ErrConnection) || errors.As(err, &re) {
		t.Fatalf("Write on a killed session (%d killed) = %v; want ErrConnection", killed, err)
	}
	if off, err := s.Offsets(ctx, name, "out"); err != nil || len(off) != 0 {
		t.Fatalf("a killed Write stored offsets %v, %v", off, err)
	}
	if rows, _ := h.count(t, ctx, table); rows != 0 {
		t.Fatalf("a killed Write left %d rows", rows)
	}
	for range 2 { // the retry, and a replay of it
		if err := retry(ctx, func() error { return s.Write(ctx, name, "out", recs, next) }); err != nil {
			t.Fatal(err)
		}
	}
	if rows, distinct := h.count(t, ctx, table); rows != 100 || distinct != 100 {
		t.Fatalf("after the retry: %d rows, %d distinct; want 100 once", rows, distinct)
	}
}

func (h *Harness) testOffsets(t *testing.T) {
	ctx := ctxFor(t)
	table := unique("bills")
	s := h.open(t, ctx, h.billsTable(table))
	name := unique("sink")
	if off, err := s.Offsets(ctx, name, "out"); err != nil || len(off) != 0 {
		t.Fatalf("Offsets of a new sink = %v, %v", off, err)
	}
	// Offsets 0..29 over partitions 0..2; next is one past each's last.
	next := func(recs []sink.Record[string, *Bill]) map[int32]int64 {
		m := map[int32]int64{}
		for _, r := range recs {
			m[r.Partition] = max(m[r.Partition], r.Offset+1)
		}
		return m
	}
	first := bills("out", 0, 30)
	if err := s.Write(ctx, name, "out", first, next(first)); err != nil {
		t.Fatal(err)
	}
	off, err := s.Offsets(ctx, name, "out")
	if err != nil || off[0] != 28 || off[1] != 29 || off[2] != 30 {
		t.Fatalf("Offsets = %v, %v", off, err)
	}
	// A replay writes nothing; an overlapping batch only its new records.
	if err := s.Write(ctx, name, "out", first, next(first)); err != nil {
		t.Fatal(err)
	}
	second := bills("out", 20, 25) // 20..44
	if err := s.Write(ctx, name, "out", second, next(second)); err != nil {
		t.Fatal(err)
	}
	if rows, distinct := h.count(t, ctx, table); rows != 45 || distinct != 45 {
		t.Fatalf("%d rows, %d distinct; want 45 exactly once", rows, distinct)
	}
	// Another topic or sink name has coordinates of its own.
	if off, err := s.Offsets(ctx, name, "other"); err != nil || len(off) != 0 {
		t.Fatalf("Offsets of another topic = %v, %v", off, err)
	}
	// A stored offset never moves back.
	if err := s.Write(ctx, name, "out", nil, map[int32]int64{0: 3}); err != nil {
		t.Fatal(err)
	}
	if off, _ := s.Offsets(ctx, name, "out"); off[0] != 43 {
		t.Fatalf("next offset of partition 0 moved to %d", off[0])
	}
	// A record of a partition without a next offset is refused.
	if err := s.Write(ctx, name, "out", bills("out", 50, 1), map[int32]int64{}); err == nil {
		t.Fatal("Write of a record without its partition's next offset succeeded")
	}
	// Control: under another sink name (no stored coordinates) the replay
	// is written again, and the checker sees it.
	if err := s.Write(ctx, unique("sink"), "out", first, next(first)); err != nil {
		t.Fatal(err)
	}
	if rows, distinct := h.count(t, ctx, table); rows != 75 || distinct != 45 {
		t.Fatalf("control: %d rows, %d distinct; want 75 and 45", rows, distinct)
	}
}

// testRejected: a row the database rejects is a *RowError naming it, for
// each way to reject one, in both modes; the batch is not written.
func (h *Harness) testRejected(t *testing.T) {
	ctx := ctxFor(t)
	table := unique("bills")
	tbl := h.billsTable(table)
	s := h.open(t, ctx, tbl)
	cases := []struct {
		name string
		bad  func(b *Bill, r *sink.Record[string, *Bill])
	}{
		{"too long", func(b *Bill, _ *sink.Record[string, *Bill]) { b.Account = strings.Repeat("a", 17) }},
		{"check", func(b *Bill, _ *sink.Record[string, *Bill]) { b.Cents = -1 }},
		{"key too long", func(_ *Bill, r *sink.Record[string, *Bill]) { r.Key = strings.Repeat("k", 65) }},
	}
	for ci, c := range cases {
		for _, badAt := range []int{0, 1536, 2999} {
			recs := bills("in", 0, 3000)
			c.bad(recs[badAt].Value, &recs[badAt])
			for _, mode := range []string{"prepare", "write"} {
				var err error
				xid := fmt.Sprintf("%s-%d-%d", unique("rej"), ci, badAt)
				if mode == "prepare" {
					err = s.Prepare(ctx, xid, recs)
				} else {
					err = s.Write(ctx, unique("sink"), "in", recs, map[int32]int64{0: 3000, 1: 3000, 2: 3000})
				}
				var re *sluicedb.RowError
				if !errors.As(err, &re) {
					t.Fatalf("%s at %d (%s): %v; want a RowError", c.name, badAt, mode, err)
				}
				if re.Index != badAt || re.Offset != int64(badAt) || re.Message == "" || re.Table != table || errors.Is(err, sluicedb.ErrConnection) {
					t.Fatalf("%s at %d (%s): %+v", c.name, badAt, mode, re)
				}
				if ids := h.prepared(t, ctx, s, xid); len(ids) != 0 {
					t.Fatalf("a rejected batch left %v prepared", ids)
				}
			}
		}
	}
	if rows, _ := h.count(t, ctx, table); rows != 0 {
		t.Fatalf("rejected batches left %d rows", rows)
	}
	// Row's own error is a RowError too; the control batch (no bad row) is
	// written.
	tbl.Row = func(r sink.Record[string, *Bill]) ([]any, error) {
		if r.Offset == 7 {
			return nil, errors.New("cannot map")
		}
		return []any{r.Key, r.Value.Account, r.Value.Cents, r.Offset}, nil
	}
	s2 := h.open(t, ctx, tbl)
	var re *sluicedb.RowError
	if err := s2.Prepare(ctx, unique("row"), bills("in", 0, 10)); !errors.As(err, &re) || re.Index != 7 {
		t.Fatalf("Row's error: %v", err)
	}
	if err := s2.Prepare(ctx, unique("typ"), bills("in", 8, 10)); err != nil {
		t.Fatalf("control: %v", err)
	}
	// A value of the wrong type for its column.
	tbl.Row = func(r sink.Record[string, *Bill]) ([]any, error) {
		if r.Offset == 3 {
			return []any{r.Key, r.Value.Account, "not a number", r.Offset}, nil
		}
		return []any{r.Key, r.Value.Account, r.Value.Cents, r.Offset}, nil
	}
	s3 := h.open(t, ctx, tbl)
	if err := s3.Write(ctx, unique("sink"), "in", bills("in", 0, 10), map[int32]int64{0: 10, 1: 10, 2: 10}); !errors.As(err, &re) || re.Index != 3 {
		t.Fatalf("a value of the wrong type: %v", err)
	}
}

// testAdversarial: keys of every length up to the column's limit, UUIDs,
// quotes, unicode, NULs and empty values, upserted and deleted as a
// mirrored table, read back byte for byte against a model.
func (h *Harness) testAdversarial(t *testing.T) {
	ctx := ctxFor(t)
	const keyLen = 64
	table := unique("mirror")
	s := h.open(t, ctx, h.mirrorTable(table, keyLen))
	model := map[string]*Bill{}
	var recs []sink.Record[string, *Bill]
	add := func(k string, b *Bill) {
		recs = append(recs, sink.Record[string, *Bill]{Key: k, Value: b, Topic: "t", Offset: int64(len(recs))})
		if b == nil {
			delete(model, k)
		} else {
			model[k] = b
		}
	}
	notes := []string{"", "'", "''", `"`, "`", `\`, `\'`, "a'); DROP TABLE x; --", "ünïcödé", "日本語", "🦀🦀", "e\u0301", "\t\n\r", "%_", strings.Repeat("é", 200)}
	for l := 0; l <= keyLen; l++ {
		k := strings.Repeat("k", l)
		add(k, &Bill{Note: notes[l%len(notes)], Blob: []byte(k), Cents: int64(l)})
	}
	for i := range 20 {
		add(fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", i*7919, i, i, i, i*104729), &Bill{Note: "uuid", Blob: []byte{0, byte(i), 0xff}})
	}
	for i, n := range notes {
		k := []rune(n)
		add(string(k[:min(len(k), keyLen)]), &Bill{Note: n, Blob: []byte{}, Cents: -int64(i)}) // 64 two-byte runes: the limit in characters
		add("upd-"+fmt.Sprint(i), &Bill{Note: "first"})
		add("upd-"+fmt.Sprint(i), &Bill{Note: n}) // the last in a batch wins
	}
	add("nul", &Bill{Note: "x", Blob: []byte("a\x00b\x00")})
	xid := unique("adv")
	if err := s.Prepare(ctx, xid, recs); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitPrepared(ctx, xid); err != nil {
		t.Fatal(err)
	}
	// Second batch: delete every other key, re-add one, through Write.
	recs = nil
	i := 0
	for k := range model {
		if i%2 == 0 {
			add(k, nil)
		}
		i++
	}
	add("", &Bill{Note: "back", Blob: []byte{0}})
	if err := s.Write(ctx, unique("sink"), "t", recs, map[int32]int64{0: int64(len(recs))}); err != nil {
		t.Fatal(err)
	}
	h.compare(t, ctx, table, model)

	// NUL in text: stored where the type takes it, a RowError where not.
	nul := []sink.Record[string, *Bill]{{Key: "nul-text", Value: &Bill{Note: "a\x00b"}, Topic: "t"}}
	err := s.Write(ctx, unique("sink"), "t", nul, map[int32]int64{0: 1})
	var re *sluicedb.RowError
	if h.NULInText {
		if err != nil {
			t.Fatal(err)
		}
		model["nul-text"] = nul[0].Value
	} else if !errors.As(err, &re) || re.Index != 0 {
		t.Fatalf("NUL in a text column: %v; want a RowError", err)
	}
	h.compare(t, ctx, table, model)

	// Negative control: a model that differs by one byte is caught.
	model["nul"] = &Bill{Note: "x", Blob: []byte("a\x00c\x00")}
	if h.diff(t, ctx, table, model) == "" {
		t.Fatal("control: compare missed a changed byte")
	}
}

func (h *Harness) compare(t *testing.T, ctx context.Context, table string, model map[string]*Bill) {
	t.Helper()
	if d := h.diff(t, ctx, table, model); d != "" {
		t.Fatal(d)
	}
}

func (h *Harness) diff(t *testing.T, ctx context.Context, table string, model map[string]*Bill) string {
	t.Helper()
	rows, err := h.Reader.QueryContext(ctx, "SELECT k, note, bin, cents FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]*Bill{}
	for rows.Next() {
		var k string
		var note sql.NullString
		var blob []byte
		var cents sql.NullInt64
		if err := rows.Scan(&k, &note, &blob, &cents); err != nil {
			t.Fatal(err)
		}
		got[k] = &Bill{Note: note.String, Blob: blob, Cents: cents.Int64}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(model) {
		return fmt.Sprintf("%d rows, model has %d", len(got), len(model))
	}
	for k, want := range model {
		g, ok := got[k]
		if !ok {
			return fmt.Sprintf("key %q missing", k)
		}
		if g.Note != want.Note || string(g.Blob) != string(want.Blob) || g.Cents != want.Cents {
			return fmt.Sprintf("key %q: got %+v, want %+v", k, g, want)
		}
	}
	return ""
}

// testUnreachable: a database nobody listens at is an error naming the
// URL without its password.
func (h *Harness) testUnreachable(t *testing.T) {
	ctx := ctxFor(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nobody listens there now
	i := strings.Index(h.URL, "127.0.0.1:")
	j := i + strings.IndexAny(h.URL[i:], "/?")
	url := h.URL[:i] + addr + h.URL[j:]
	const secret = "hunter2-secret"
	if i := strings.Index(url, "@"); i > 0 {
		j := strings.LastIndex(url[:i], ":")
		url = url[:j+1] + secret + url[i:]
	}
	_, err = h.Open(ctx, url, h.billsTable("never"), 0)
	if err == nil {
		t.Skip("something listens at " + url)
	}
	if !errors.Is(err, sluicedb.ErrConnection) || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("unreachable database: %v", err)
	}
	t.Log(err)
}
