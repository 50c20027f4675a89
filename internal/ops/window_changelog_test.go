package ops

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/store"
	"github.com/sluice-streams/sluice/window"
)

// windowLogRun runs tumbling windows (fired at the close, as EmitFinal
// does) over keys of every length, with a commit every `every` records
// (0: one transaction for all), the transaction holding record abortAt
// aborted once and replayed, and checks after every commit that the
// changelog replayed and compacted is what the engine holds. It returns
// the results, the number of changelog records and of range deletes among
// them, and the engine's final content.
func windowLogRun(t *testing.T, every, abortAt int, check func(log map[string]string, e store.Engine) error) (out []string, records, ranges int, final map[string]string) {
	t.Helper()
	keys := windowTestKeys()
	e := store.NewMemory()
	p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
		Windows: window.Tumbling(50 * time.Millisecond), Trigger: window.OnWatermark(),
	}, e)
	var txn, committed []logRecord
	ctx.st.SetChangelog(func(k, v []byte) { txn = append(txn, logRecord{key: string(k), value: v}) })
	ctx.st.SetRangeChangelog(func(start, end []byte) {
		txn = append(txn, logRecord{key: string(start), value: end, isRange: true})
	})
	commit := func() {
		// As the task ends a transaction: the held windows to the
		// store (exec.Holder), then the store's flush.
		if err := p.Spill(); err != nil {
			t.Fatal(err)
		}
		ctx.st.Flush()
		records += len(txn)
		for _, r := range txn {
			if r.isRange {
				ranges++
			}
		}
		committed = append(committed, txn...)
		txn = nil
		if err := ctx.st.Commit(store.NoCheckpoint); err != nil {
			t.Fatal(err)
		}
		// The log as written, and as Kafka compacts it: a restore may
		// read anything between the two.
		for _, compacted := range []bool{false, true} {
			if err := check(replay(committed, compacted), e); err != nil {
				t.Fatalf("compacted %v: %v", compacted, err)
			}
		}
	}
	const n = 2000
	step := func(i int) {
		ts := int64(i) / 4 // 200 records per window over 141 keys
		windowFeed(t, p, ctx, keys[i*7%len(keys)], ts, ts-5)
	}
	start, committedOut, committedWM, aborted := 0, 0, ctx.wm, false
	for i := 0; i < n; i++ {
		step(i)
		end := i == n-1 || every > 0 && (i+1)%every == 0
		if !end {
			continue
		}
		if !aborted && abortAt >= start && abortAt <= i {
			// The transaction aborts: its stage, its records and its
			// results go, and its input comes again.
			aborted = true
			ctx.st.Abort()
			p.Drop()
			p.OnAbort()
			txn = nil
			ctx.out, ctx.wm = ctx.out[:committedOut], committedWM
			i = start - 1
			continue
		}
		commit()
		start, committedOut, committedWM = i+1, len(ctx.out), ctx.wm
	}
	final = map[string]string{}
	if err := e.Range(nil, nil, func(k, v []byte) error {
		final[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ctx.out, records, ranges, final
}

// windowFeed processes a record of key at ts, of value 1, and then moves
// the watermark to wm if that is past it, as the task does.
func windowFeed(t *testing.T, p *Window[string, int64, int64], ctx *windowTestCtx, key string, ts, wm int64) {
	t.Helper()
	if err := ctx.process(p, key, 1, ts); err != nil {
		t.Fatal(err)
	}
	if wm > ctx.wm {
		ctx.wm = wm
		if err := p.OnWatermark(wm); err != nil {
			t.Fatal(err)
		}
	}
}

// logRecord is a changelog record: a key's value (nil: its tombstone), or
// a range delete from key to value.
type logRecord struct {
	key     string
	value   []byte
	isRange bool
}

// replay is what a restore from the changelog log builds, as written or
// once Kafka compacted it: then the last record of each key alone, in the
// log's order. A range record's key is its start, so of the ranges dropped
// from one start only the last is left.
func replay(log []logRecord, compacted bool) map[string]string {
	last := map[string]int{}
	for i, r := range log {
		last[r.key] = i
	}
	out := map[string]string{}
	for i, r := range log {
		switch {
		case compacted && last[r.key] != i:
		case r.isRange:
			for k := range out {
				if k >= r.key && k < string(r.value) {
					delete(out, k)
				}
			}
		case r.value == nil:
			delete(out, r.key)
		default:
			out[r.key] = string(r.value)
		}
	}
	return out
}

// replayIsEngine is the check: the compacted changelog is the engine.
func replayIsEngine(log map[string]string, e store.Engine) error {
	held := map[string]string{}
	if err := e.Range(nil, nil, func(k, v []byte) error {
		held[string(k)] = string(v)
		return nil
	}); err != nil {
		return err
	}
	if !maps.Equal(log, held) {
		return fmt.Errorf("replayed changelog: %d keys; engine: %d", len(log), len(held))
	}
	return nil
}

// TestWindowChangelogHoldsOnlyCommittedWindows: whatever the commit
// cadence, and with a transaction aborted and replayed, the windows give
// the same results, the engine ends the same, and the changelog, compacted,
// replays to the engine after every commit; a window opened and closed
// within one transaction costs no changelog record, so one transaction for
// the whole input writes only the windows still open at its end; the
// committed expiry entries due (by start: the windows due) go in range
// deletes. In both layouts of the store.
func TestWindowChangelogHoldsOnlyCommittedWindows(t *testing.T) {
	for _, byStart := range []bool{true, false} {
		t.Run(fmt.Sprintf("byStart=%v", byStart), func(t *testing.T) {
			defer func(was bool) { WindowsByStart = was }(WindowsByStart)
			WindowsByStart = byStart
			windowChangelogRuns(t, byStart)
		})
	}
}

func windowChangelogRuns(t *testing.T, byStart bool) {
	ref, refRecords, _, refFinal := windowLogRun(t, 1, -1, replayIsEngine)
	if len(ref) == 0 {
		t.Fatal("no window fired")
	}
	// A window's changelog records while open: its own and, laid out by
	// key, its expiry entry.
	data, perWindow := byte(layout.WindowData), 2
	if byStart {
		data, perWindow = layout.WindowByStart, 1
	}
	for _, c := range []struct{ every, abortAt int }{{7, -1}, {64, 300}, {500, 1200}, {0, -1}, {0, 1999}} {
		t.Run(fmt.Sprintf("every=%d,abort=%d", c.every, c.abortAt), func(t *testing.T) {
			out, records, ranges, final := windowLogRun(t, c.every, c.abortAt, replayIsEngine)
			if !slices.Equal(out, ref) {
				t.Fatalf("%d results, want the %d of one commit per record", len(out), len(ref))
			}
			if !maps.Equal(final, refFinal) {
				t.Fatalf("engine ends with %d keys, want %d", len(final), len(refFinal))
			}
			if c.every == 0 {
				// Only the open windows.
				open := 0
				for k := range final {
					switch k[0] {
					case data:
						open++
					case layout.WindowData, layout.WindowByStart:
						t.Fatalf("engine holds window %q of the other layout", k)
					}
				}
				if records != perWindow*open || open == 0 {
					t.Fatalf("one transaction wrote %d changelog records for %d open windows", records, open)
				}
			} else if records > refRecords {
				t.Fatalf("%d changelog records, more than the %d of a commit per record", records, refRecords)
			} else if ranges == 0 {
				t.Fatal("no range delete: the committed windows or expiry entries due went one by one")
			}
		})
	}
}

// TestWindowChangelogCheckCatchesALostTombstone is the negative control of
// replayIsEngine: a changelog that lost the tombstone of a committed
// window replays to a window the engine no longer holds.
func TestWindowChangelogCheckCatchesALostTombstone(t *testing.T) {
	e := store.NewMemory()
	key := layout.WindowKey(nil, []byte("k"), 0)
	if err := e.Apply([]store.Write{{Key: key, Value: []byte("w")}}, 0); err != nil {
		t.Fatal(err)
	}
	log := map[string]string{string(key): "w"}
	if err := replayIsEngine(log, e); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply([]store.Write{{Key: key}}, 1); err != nil {
		t.Fatal(err)
	}
	if err := replayIsEngine(log, e); err == nil {
		t.Fatal("a changelog holding a window the engine lacks passed the check")
	}
}

// TestWindowLayoutKeptAcrossRestarts: a store of tumbling windows that
// holds windows laid out by key (as a version before the layout by start
// wrote them; here WindowsByStart off) keeps that layout when a runtime
// opens it with the layout by start allowed, and the results are those of
// a store laid out by start throughout, or by key throughout; once its
// windows are gone, the next runtime lays it out by start.
func TestWindowLayoutKeptAcrossRestarts(t *testing.T) {
	defer func(was bool) { WindowsByStart = was }(WindowsByStart)
	keys := windowTestKeys()
	const n, phase = 2000, 500
	// run processes the input in phases of phase records, each by a new
	// runtime on the engine (a restart), committing at its end; byStart
	// says for each phase whether the layout by start is allowed.
	run := func(byStart func(phase int) bool) (out []string, layouts string) {
		e := store.NewMemory()
		wm := window.NoWatermark
		for ph := 0; ph*phase < n; ph++ {
			WindowsByStart = byStart(ph)
			p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
				Windows: window.Tumbling(50 * time.Millisecond), Trigger: window.OnWatermark(),
			}, e)
			layouts += string(p.data)
			ctx.wm = wm
			for i := ph * phase; i < min(n, (ph+1)*phase); i++ {
				ts := int64(i) / 4
				windowFeed(t, p, ctx, keys[i*7%len(keys)], ts, ts-5)
			}
			if (ph+1)*phase >= n {
				// The end of the input: every window closes.
				ctx.wm = math.MaxInt64
				if err := p.OnWatermark(ctx.wm); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Spill(); err != nil {
				t.Fatal(err)
			}
			ctx.st.Flush()
			if err := ctx.st.Commit(store.NoCheckpoint); err != nil {
				t.Fatal(err)
			}
			out, wm = append(out, ctx.out...), ctx.wm
		}
		WindowsByStart = true
		p, _ := windowTestNew(t, WindowConfig[string, int64, int64]{
			Windows: window.Tumbling(50 * time.Millisecond), Trigger: window.OnWatermark(),
		}, e)
		return out, layouts + string(p.data)
	}
	byStart, layouts := run(func(int) bool { return true })
	if layouts != "wwwww" {
		t.Fatalf("layouts %q, want all by start", layouts)
	}
	byKey, layouts := run(func(int) bool { return false })
	if layouts != "ddddw" {
		t.Fatalf("layouts %q, want by key until the store is empty", layouts)
	}
	legacy, layouts := run(func(ph int) bool { return ph > 0 })
	if layouts != "ddddw" {
		t.Fatalf("layouts %q: a store holding windows by key changed its layout", layouts)
	}
	if len(byStart) == 0 || !slices.Equal(byKey, byStart) || !slices.Equal(legacy, byStart) {
		t.Fatalf("results: %d by start, %d by key, %d kept by key after restarts; they differ", len(byStart), len(byKey), len(legacy))
	}
}

// TestWindowRangesSurviveALargerLateness: a deployment that allows more
// lateness closes, for one watermark, windows of earlier starts than the
// one before it did. The windows' range deletes, laid out by start, are
// each their own record, so that Kafka's compaction, keeping a key's last
// record, cannot replace a range with a shorter one and bring back windows
// that only the longer one deleted: the changelog replayed, as written
// and compacted, is still the engine after every commit. Records 30 ms
// behind open again, under the larger lateness, windows the first
// deployment closed.
func TestWindowRangesSurviveALargerLateness(t *testing.T) {
	keys := windowTestKeys()
	e := store.NewMemory()
	var txn, committed []logRecord
	wm, ranges := window.NoWatermark, 0
	for phase, lateness := range []int64{0, 40} {
		p, ctx := windowTestNew(t, WindowConfig[string, int64, int64]{
			Windows: window.Tumbling(10 * time.Millisecond), Lateness: lateness, Trigger: window.OnWatermark(),
		}, e)
		if !p.byStart() {
			t.Fatal("the store is not laid out by start")
		}
		ctx.wm = wm
		ctx.st.SetChangelog(func(k, v []byte) { txn = append(txn, logRecord{key: string(k), value: v}) })
		ctx.st.SetRangeChangelog(func(start, end []byte) {
			txn = append(txn, logRecord{key: string(start), value: end, isRange: true})
			ranges++
		})
		for i := phase * 1000; i < (phase+1)*1000; i++ {
			ts := int64(i) / 4
			if i%3 == 0 {
				// Behind: on time under the larger lateness, in
				// windows the first deployment closed.
				ts -= 30
			}
			windowFeed(t, p, ctx, keys[i*7%len(keys)], ts, int64(i)/4-5)
			if (i+1)%20 != 0 {
				continue
			}
			if err := p.Spill(); err != nil {
				t.Fatal(err)
			}
			ctx.st.Flush()
			committed, txn = append(committed, txn...), nil
			if err := ctx.st.Commit(store.NoCheckpoint); err != nil {
				t.Fatal(err)
			}
			for _, compacted := range []bool{false, true} {
				if err := replayIsEngine(replay(committed, compacted), e); err != nil {
					t.Fatalf("lateness %d, record %d, compacted %v: %v", lateness, i, compacted, err)
				}
			}
		}
		wm = ctx.wm
	}
	if ranges == 0 {
		t.Fatal("no range delete")
	}
}
