package store

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzStagedMatchesModel drives a Staged over a Memory engine with a random
// sequence of puts, deletes (plain or held), range drops, flushes, takes of
// the held updates, commits and aborts, with and without its read cache (which every
// step's reads fill), and checks it against plain maps after every step. Beyond read-your-writes it checks
// invariant 2 itself: the engine always equals the changelog of the
// committed transactions replayed from the start, and its checkpoint is the
// offset of the last committed record.
func FuzzStagedMatchesModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 'a', 0, 1, 'b', 4, 2, 1, 5, 4})
	f.Add([]byte{1, 0, 1, 'a', 0, 1, 'b', 3, 0, 1, 'c', 4, 2, 1, 5})
	f.Add([]byte{0, 0, 2, 'x', 3, 0, 2, 'y', 2, 2, 3, 4, 0, 3, 0, 5, 4})
	f.Add([]byte("\x00\x00\x01\x00\x01\x01\x02\x02\x03\x00\x04\x04\x05\x00\x06\x07\x04"))
	f.Add([]byte{0, 0, 1, 'a', 6, 2, 1, 1, 1, 0, 4, 6, 1, 2, 1, 1, 1, 4})
	f.Add([]byte{1, 0, 1, 'a', 6, 2, 4, 1, 1, 1, 0, 4, 6, 1, 3, 2, 3, 1, 4})
	// Range drops, with and without the cache: a put in the range after
	// the drop, a second drop from the same start reaching farther, and
	// a drop in a unit rolled back, then in one released.
	f.Add([]byte{0, 0, 1, 1, 0, 1, 1, 0, 0, 0, 4, 1, 1, 1, 1, 0, 0, 8, 0, 4, 0, 0, 0, 0, 4, 1, 2, 1, 1, 0, 0, 4, 1, 0, 0, 8, 0, 6, 1, 0, 0, 4, 1, 0, 0, 0, 6, 1, 3, 1, 1, 0, 0, 6, 0, 0, 7, 0, 1, 1, 2, 1, 1, 0, 1, 0, 0, 4, 1, 0, 0, 6, 0, 0, 7, 0, 1, 1, 2, 1, 1, 1, 1, 0, 0, 4, 1, 0, 0})
	f.Add([]byte{1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 4, 1, 1, 1, 1, 0, 0, 8, 0, 4, 0, 0, 0, 0, 4, 1, 2, 1, 1, 0, 0, 4, 1, 0, 0, 8, 0, 6, 1, 0, 0, 4, 1, 0, 0, 0, 6, 1, 3, 1, 1, 0, 0, 6, 0, 0, 7, 0, 1, 1, 2, 1, 1, 0, 1, 0, 0, 4, 1, 0, 0, 6, 0, 0, 7, 0, 1, 1, 2, 1, 1, 1, 1, 0, 0, 4, 1, 0, 0})
	// A key dropped, the range's record flushed, then the key put and
	// deleted again in the same transaction: the delete is the key's own
	// and needs its tombstone.
	f.Add([]byte{0, 0, 4, 1, 1, 1, 1, 0, 0, 4, 1, 0, 0, 8, 0, 4, 1, 0, 0, 3, 1, 0, 0, 0, 4, 1, 2, 1, 1, 0, 0, 2, 4, 1, 1, 0, 0, 4, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cache := data[0]%2 == 0
		// The read cache: the default, off, or so small that most
		// commits drop it.
		readCache := []int{DefaultReadCache, 0, 3 * entryOverhead}[data[0]/2%3]
		data = data[1:]
		next := func() byte {
			if len(data) == 0 {
				return 0
			}
			b := data[0]
			data = data[1:]
			return b
		}

		opts := []StagedOption{WithReadCache(readCache)}
		if !cache {
			opts = append(opts, WithoutCache())
		}
		eng := NewMemory()
		s := NewStaged("fuzz", eng, opts...)

		committed := map[string]string{}   // engine content, by the model
		stage := map[string]*string{}      // nil: staged delete
		sinceFlush := map[string]*string{} // cache mode: what the next Flush must emit
		var flushOrder []string            // its keys, in first-write order
		var txn []string                   // records emitted in the open transaction
		log := map[string]string{}         // committed changelog, compacted
		offset, checkpoint := int64(-1), NoCheckpoint
		held := map[string]heldModel{} // held updates since the last TakeHeld
		var heldOrder []string         // their keys, in the order first held
		covered := map[string]bool{}   // keys whose staged delete is a range drop's
		var drops []string             // cache mode: the range records the next Flush emits
		dropEnd := map[string]string{} // the farthest end dropped from each start
		var dropped [][2]string        // the ranges dropped since the last commit
		// mergedValue is k's value in the stage over the engine, less
		// the ranges dropped (nil: absent).
		mergedValue := func(k string) *string {
			if v, ok := stage[k]; ok {
				return v
			}
			for _, d := range dropped {
				if k >= d[0] && k < d[1] {
					return nil
				}
			}
			if v, ok := committed[k]; ok {
				return &v
			}
			return nil
		}

		s.SetChangelog(func(k, v []byte) {
			txn = append(txn, recString(k, v))
		})
		s.SetRangeChangelog(func(start, end []byte) {
			txn = append(txn, rangeString0(start, end))
		})
		keyOf := func(b byte) string {
			// Eight keys including the empty key and a key with a 0x00 /
			// 0xff byte, so prefixes and byte order are exercised.
			return []string{"", "a", "a\x00", "ab", "b", "\xff", "c", "ca"}[b%8]
		}
		// mayElide says whether the stage may leave out a tombstone of k
		// (see Staged): no committed state holds k and no value of it went
		// to the changelog in the open transaction, among its records in
		// emitted. The stage elides only where it knows this, so it may
		// emit the tombstone anyway; the replay check at each commit
		// catches an elision that loses a delete.
		mayElide := func(k string, emitted []string) bool {
			if _, ok := committed[k]; ok {
				return false
			}
			for _, r := range emitted {
				if isRangeRec(r) {
					continue
				}
				if rk, _, del := parseRec(r); rk == k && !del {
					return false
				}
			}
			return true
		}
		// sameButElided says whether got is want without some of its
		// tombstones that mayElide allows.
		sameButElided := func(got, want, emitted []string) bool {
			j := 0
			for _, w := range want {
				if j < len(got) && got[j] == w {
					j++
					continue
				}
				if isRangeRec(w) {
					return false
				}
				if k, _, del := parseRec(w); !del || !mayElide(k, emitted) {
					return false
				}
			}
			return j == len(got)
		}
		// write puts v (nil: deletes) under k, held (PutHeld) or not.
		write := func(k string, v *string, hold bool, ts int64) {
			before := len(txn)
			var err error
			switch {
			case hold:
				h, ok := held[k]
				if !ok {
					h.prev = mergedValue(k)
					heldOrder = append(heldOrder, k)
				}
				h.ts = ts
				held[k] = h
				err = s.PutHeld([]byte(k), ptrBytes(v), ts, ts)
			case v == nil:
				err = s.Delete([]byte(k))
			default:
				if _, ok := committed[k]; !ok && ts%3 == 0 {
					// As a window's index entry: the caller knows no
					// committed state holds k.
					err = s.PutNew([]byte(k), []byte(*v))
				} else {
					err = s.Put([]byte(k), []byte(*v))
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			stage[k] = v
			delete(covered, k)
			if cache {
				if _, ok := sinceFlush[k]; !ok {
					flushOrder = append(flushOrder, k)
				}
				sinceFlush[k] = v
			} else if got, want := txn[before:], []string{recString([]byte(k), ptrBytes(v))}; !sameButElided(got, want, txn[:before]) {
				t.Fatalf("a write without cache emitted %q, want %q", got, want)
			}
		}
		takeHeld := func() {
			var got, want []string
			err := s.TakeHeld(func(h Held) error {
				if h.Meta != h.Timestamp {
					t.Fatalf("held update of %q: meta %v, want its timestamp %d", h.Key, h.Meta, h.Timestamp)
				}
				got = append(got, fmt.Sprintf("%q:%s>%s@%d", h.Key, ptrString(stringPtr(h.Prev)), ptrString(stringPtr(h.Value)), h.Timestamp))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range heldOrder {
				h := held[k]
				// The value is the key's now, whoever wrote it last.
				want = append(want, fmt.Sprintf("%q:%s>%s@%d", k, ptrString(h.prev), ptrString(mergedValue(k)), h.ts))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("TakeHeld handed out %q, want %q", got, want)
			}
			clear(held)
			heldOrder = nil
		}
		// dropRange drops [lo, hi): every key of the merged view in it is
		// deleted, by deletes the changelog hears of from the range's
		// record alone. The keys written since the commit stay staged,
		// as deletes; the committed ones the range hides.
		dropRange := func(lo, hi string) {
			before := len(txn)
			if err := s.DropRange([]byte(lo), []byte(hi)); err != nil {
				t.Fatal(err)
			}
			live := false // whether the merged view holds a key in the range
			for k := range keysIn(committed, stage) {
				live = live || k >= lo && k < hi && mergedValue(k) != nil
			}
			var keys []string // in key order, as the stage makes them deletes
			for _, k := range slices.Sorted(maps.Keys(stage)) {
				if v := stage[k]; live && k >= lo && k < hi && (v != nil || !covered[k]) {
					keys = append(keys, k)
				}
			}
			var want []string
			if live {
				dropped = append(dropped, [2]string{lo, hi})
				rec := rangeString0([]byte(lo), []byte(hi))
				if cache {
					drops = append(drops, rec)
				} else {
					want = []string{rec}
				}
			}
			if got := txn[before:]; !slices.Equal(got, want) {
				t.Fatalf("DropRange(%q, %q) emitted %q, want %q", lo, hi, got, want)
			}
			for _, k := range keys {
				stage[k] = nil
				covered[k] = true
				if cache {
					if _, ok := sinceFlush[k]; !ok {
						flushOrder = append(flushOrder, k)
					}
					sinceFlush[k] = nil
				}
			}
		}
		// dropFrom picks a range to drop: from a start that is no key
		// (keyOf's keys each end before it or begin after), to an end
		// at least as far as any dropped from that start before.
		dropFrom := func() (string, string) {
			lo := []string{"\x00", "a\x00\x00", "b\x00"}[next()%3]
			hi := max(keyOf(next())+"\x00", lo, dropEnd[lo])
			dropEnd[lo] = hi
			return lo, hi
		}
		flush := func() {
			before := len(txn)
			s.Flush()
			got := txn[before:]
			var want []string
			if cache {
				want = append(want, drops...)
				for _, k := range flushOrder {
					if covered[k] {
						continue
					}
					want = append(want, recString([]byte(k), ptrBytes(sinceFlush[k])))
				}
			}
			drops = nil
			if !sameButElided(got, want, txn[:before]) {
				t.Fatalf("Flush emitted %q, want %q", got, want)
			}
			clear(sinceFlush)
			flushOrder = nil
		}

		for steps := int64(0); len(data) > 0 && steps < 500; steps++ {
			switch op := next() % 9; op {
			case 0, 1: // put; more likely than the rest
				k := keyOf(next())
				n := int(next() % 4)
				v := strings.Repeat(string(rune('a'+next()%26)), n)
				write(k, &v, next()%2 == 0, steps)
			case 2: // delete
				write(keyOf(next()), nil, next()%2 == 0, steps)
			case 3:
				flush()
			case 7:
				takeHeld()
			case 8:
				dropRange(dropFrom())
			case 4: // end the transaction and commit, as the task does
				takeHeld()
				flush()
				cp := NoCheckpoint
				for _, r := range txn {
					offset++
					cp = offset
					if lo, hi, ok := parseRangeRec(r); ok {
						for k := range log {
							if k >= lo && k < hi {
								delete(log, k)
							}
						}
						continue
					}
					k, v, del := parseRec(r)
					if del {
						delete(log, k)
					} else {
						log[k] = v
					}
				}
				txn = nil
				if err := s.Commit(cp); err != nil {
					t.Fatal(err)
				}
				for _, d := range dropped {
					for k := range committed {
						if k >= d[0] && k < d[1] {
							delete(committed, k)
						}
					}
				}
				dropped = nil
				clear(covered)
				for k, v := range stage {
					if v == nil {
						delete(committed, k)
					} else {
						committed[k] = *v
					}
				}
				clear(stage)
				if cp != NoCheckpoint {
					checkpoint = cp
				}
				if !maps.Equal(committed, log) {
					t.Fatalf("committed state %q differs from the replayed changelog %q", committed, log)
				}
			case 5: // abort
				s.Abort()
				clear(stage)
				clear(sinceFlush)
				flushOrder = nil
				clear(held)
				heldOrder = nil
				clear(covered)
				drops, dropped = nil, nil
				txn = nil
			case 6: // a unit of writes, then rollback or release
				stageBefore, flushBefore, txnBefore := maps.Clone(stage), maps.Clone(sinceFlush), len(txn)
				heldBefore, orderBefore := maps.Clone(held), slices.Clone(heldOrder)
				flushOrderBefore := slices.Clone(flushOrder)
				coveredBefore, dropsBefore, droppedBefore := maps.Clone(covered), slices.Clone(drops), slices.Clone(dropped)
				s.Mark()
				if next()%4 == 0 {
					dropRange(dropFrom())
				}
				for range 1 + next()%3 {
					k := keyOf(next())
					var v *string
					if next()%3 != 0 {
						v = new(string(rune('a' + next()%26)))
					}
					write(k, v, next()%2 == 0, steps)
					if next()%2 == 0 {
						// A range inside the unit orders its writes
						// (the ordered index); the range checks
						// below see whether the rollback took them
						// out again.
						if _, _, _, err := s.First([]byte(keyOf(next())), []byte(keyOf(next()))); err != nil {
							t.Fatal(err)
						}
					}
				}
				if next()%2 == 0 {
					s.Rollback()
					// The task drops the changelog records the unit emitted.
					stage, sinceFlush, txn = stageBefore, flushBefore, txn[:txnBefore]
					held, heldOrder, flushOrder = heldBefore, orderBefore, flushOrderBefore
					covered, drops, dropped = coveredBefore, dropsBefore, droppedBefore
				} else {
					s.Release()
				}
			}

			// Read-your-writes through the stage, committed state in the engine.
			merged := maps.Clone(committed)
			for _, d := range dropped {
				for k := range merged {
					if k >= d[0] && k < d[1] {
						delete(merged, k)
					}
				}
			}
			for k, v := range stage {
				if v == nil {
					delete(merged, k)
				} else {
					merged[k] = *v
				}
			}
			for b := range byte(8) {
				k := keyOf(b)
				v, ok, err := s.Get([]byte(k))
				if err != nil {
					t.Fatal(err)
				}
				want, wantOK := merged[k]
				if ok != wantOK || string(v) != want {
					t.Fatalf("Get(%q) = %q, %v; want %q, %v", k, v, ok, want, wantOK)
				}
			}
			// The whole range only now and then: a stage orders the
			// writes of the key classes (first bytes) it was ranged
			// over, and narrower ranges let classes join late.
			if next()%4 == 0 {
				if got, want := rangeString(t, s, nil, nil), modelRange(merged, "", "\xff\xff"); got != want {
					t.Fatalf("Range = %s, want %s", got, want)
				}
			}
			lo, hi := keyOf(next()), keyOf(next())
			if got, want := rangeString(t, s, []byte(lo), []byte(hi)), modelRange(merged, lo, hi); got != want {
				t.Fatalf("Range(%q, %q) = %s, want %s", lo, hi, got, want)
			}
			// First is the first entry of the same range.
			var want string
			s.Range([]byte(lo), []byte(hi), func(k, v []byte) error {
				want = fmt.Sprintf("%q=%q", k, v)
				return errors.New("stop")
			})
			k, v, ok, err := s.First([]byte(lo), []byte(hi))
			got := ""
			if ok {
				got = fmt.Sprintf("%q=%q", k, v)
			}
			if err != nil || got != want {
				t.Fatalf("First(%q, %q) = %s, %v; want %s", lo, hi, got, err, want)
			}
			if got, want := rangeString(t, eng, nil, nil), modelRange(committed, "", "\xff\xff"); got != want {
				t.Fatalf("engine = %s, want %s", got, want)
			}
			if cp, _ := eng.Checkpoint(); cp != checkpoint {
				t.Fatalf("Checkpoint() = %d, want %d", cp, checkpoint)
			}
			if s.Dirty() != len(stage) {
				t.Fatalf("Dirty() = %d, want %d", s.Dirty(), len(stage))
			}
			if s.Holding() != len(held) {
				t.Fatalf("Holding() = %d, want %d", s.Holding(), len(held))
			}
		}
	})
}

// heldModel is the model's held update of a key: its value before the
// first held write since the last TakeHeld (nil: absent), and the last
// one's timestamp.
type heldModel struct {
	prev *string
	ts   int64
}

func stringPtr(b []byte) *string {
	if b == nil {
		return nil
	}
	return new(string(b))
}

func ptrString(p *string) string {
	if p == nil {
		return "-"
	}
	return strconv.Quote(*p)
}

// rangeString0 renders a range's record like recString a key's.
func rangeString0(start, end []byte) string { return fmt.Sprintf("R%q..%q", start, end) }

func isRangeRec(r string) bool { return strings.HasPrefix(r, "R") }

func parseRangeRec(r string) (lo, hi string, ok bool) {
	if !isRangeRec(r) {
		return "", "", false
	}
	if _, err := fmt.Sscanf(r, "R%q..%q", &lo, &hi); err != nil {
		panic(err)
	}
	return lo, hi, true
}

// keysIn is every key of the committed state and the stage.
func keysIn(committed map[string]string, stage map[string]*string) map[string]bool {
	ks := map[string]bool{}
	for k := range committed {
		ks[k] = true
	}
	for k := range stage {
		ks[k] = true
	}
	return ks
}

func recString(k, v []byte) string {
	if v == nil {
		return fmt.Sprintf("%q-", k)
	}
	return fmt.Sprintf("%q=%q", k, v)
}

func parseRec(r string) (k, v string, del bool) {
	if strings.HasSuffix(r, "-") {
		_, err := fmt.Sscanf(r, "%q-", &k)
		if err != nil {
			panic(err)
		}
		return k, "", true
	}
	if _, err := fmt.Sscanf(r, "%q=%q", &k, &v); err != nil {
		panic(err)
	}
	return k, v, false
}

func ptrBytes(p *string) []byte {
	if p == nil {
		return nil
	}
	return []byte(*p)
}

func rangeString(t *testing.T, r interface {
	Range(start, end []byte, fn func(k, v []byte) error) error
}, start, end []byte) string {
	t.Helper()
	var b strings.Builder
	err := r.Range(start, end, func(k, v []byte) error {
		fmt.Fprintf(&b, "%q=%q ", k, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// modelRange renders m's keys in [lo, hi) like rangeString; every model key
// is below "\xff\xff".
func modelRange(m map[string]string, lo, hi string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k >= lo && k < hi {
			fmt.Fprintf(&b, "%q=%q ", k, m[k])
		}
	}
	return b.String()
}
