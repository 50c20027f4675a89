package ops

import (
	"fmt"
	"maps"
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
		if err := ctx.process(p, keys[i*7%len(keys)], 1, ts); err != nil {
			t.Fatal(err)
		}
		if wm := ts - 5; wm > ctx.wm {
			ctx.wm = wm
			if err := p.OnWatermark(wm); err != nil {
				t.Fatal(err)
			}
		}
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
// committed expiry entries due go in range deletes.
func TestWindowChangelogHoldsOnlyCommittedWindows(t *testing.T) {
	ref, refRecords, _, refFinal := windowLogRun(t, 1, -1, replayIsEngine)
	if len(ref) == 0 {
		t.Fatal("no window fired")
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
				// Only the open windows, each with its expiry entry.
				open := 0
				for k := range final {
					if k[0] == layout.WindowData {
						open++
					}
				}
				if records != 2*open || open == 0 {
					t.Fatalf("one transaction wrote %d changelog records for %d open windows", records, open)
				}
			} else if records > refRecords {
				t.Fatalf("%d changelog records, more than the %d of a commit per record", records, refRecords)
			} else if ranges == 0 {
				t.Fatal("no range delete: the committed expiry entries due went one by one")
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
