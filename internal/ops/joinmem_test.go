package ops

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluice-streams/sluice/internal/layout"
	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/store"
)

// memStore is a Staged over a store, with the changelog of its committed
// transactions (as a task's transactions hand it to Kafka) and of the
// open one.
//
// The changelog is kept as the writes its records replay; records counts
// them as Kafka would (a pack is one), and packKeys holds the keys of the
// committed packs, each of which must be unique (store.Packing).
type memStore struct {
	st             *store.Staged
	committed, txn []store.Write
	records        int64
	txnPacks       []string
	packKeys       map[string]bool
	err            error // a pack UnpackWrites could not read
}

func newMemStore(e store.Engine, opts ...store.StagedOption) *memStore {
	m := &memStore{st: store.NewStaged("m", e, opts...), packKeys: map[string]bool{}}
	m.st.SetChangelog(func(k, v []byte) { m.txn = append(m.txn, store.Write{Key: k, Value: v}); m.records++ })
	m.st.SetRangeChangelog(func(start, end []byte) { m.txn = append(m.txn, store.Write{Key: start, End: end}); m.records++ })
	m.st.SetPackChangelog(func(k, v []byte) {
		var err error
		if m.txn, err = store.UnpackWrites(m.txn, k, v); err != nil {
			m.err = err
		}
		m.txnPacks = append(m.txnPacks, string(k))
		m.records++
	})
	return m
}

func (m *memStore) commit(t *testing.T) error {
	t.Helper()
	if err := m.st.Flush(); err != nil {
		t.Fatal(err)
	}
	if m.err != nil {
		return m.err
	}
	// The checkpoint is the offset of the transaction's last record, as
	// a task's.
	cp := store.NoCheckpoint
	if len(m.txn) > 0 { // (a pack holds a write at least)
		cp = m.records - 1
	}
	if err := m.st.Commit(cp); err != nil {
		t.Fatal(err)
	}
	for _, k := range m.txnPacks {
		if m.packKeys[k] {
			return fmt.Errorf("two committed packs have the key %x", k)
		}
		m.packKeys[k] = true
	}
	m.committed, m.txn, m.txnPacks = append(m.committed, m.txn...), nil, nil
	return nil
}

// abort drops the transaction's records; Kafka's offsets move past them.
func (m *memStore) abort() { m.st.Abort(); m.txn, m.txnPacks = nil, nil }

// rangeDump lists every key and value of r in [start, end) (nil: open),
// in Range's order, for comparing two stores or two runs.
func rangeDump(t *testing.T, r interface {
	Range(start, end []byte, fn func(k, v []byte) error) error
}, start, end []byte) []string {
	t.Helper()
	var out []string
	if err := r.Range(start, end, func(k, v []byte) error {
		out = append(out, fmt.Sprintf("%x=%x", k, v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// memKeys is what TestJoinMemoryMatchesModel writes: j keys of keys of
// every encoded length and UUIDs, in three segments and at times on both
// sides of zero, with sequence numbers past int64's; keys starting with j
// that are no j key (too short, a varint not in its shortest form, a
// length that does not add up); x index keys and the time state's.
func memKeys() [][]byte {
	var out [][]byte
	kbs := testkeys.All()
	for i, seg := range []int64{-60_000, 0, 60_000} {
		for j, kb := range kbs {
			if (i+j)%3 != 0 { // a third of the keys in each segment
				continue
			}
			for _, ts := range []int64{seg, seg + 1, seg + 59_999} {
				for _, seq := range []uint64{0, 1, math.MaxUint64} {
					out = append(out, layout.AppendJoinKeyPart(nil, seg, string(lenPart(kb)), ts, seq))
				}
			}
		}
	}
	nonCanonical := append(layout.AppendTime([]byte{layout.JoinRecord}, 0), 0x81, 0x00, 'k')
	nonCanonical = binaryAppend(layout.AppendTime(nonCanonical, 5), 0)
	// Keys of a j key's segment and key part whose ends are no time and
	// sequence: inside the range of the key's records.
	kb := []byte(testkeys.All()[3])
	cut := layout.JoinKey(kb, 0, 5, 0)
	out = append(out, cut[:len(cut)-4], append(bytes.Clone(cut), 0))
	out = append(out,
		[]byte{layout.JoinRecord}, []byte{layout.JoinRecord, 1}, nonCanonical,
		append(layout.AppendTime([]byte{layout.JoinRecord}, 0), 9, 'k'), // a length longer than the key
		layout.JoinIndexKey(70_000, layout.JoinKey([]byte("k"), 0, 5, 0)),
		layout.JoinIndexKey(10, layout.JoinKey(nil, 0, 5, 0)),
		[]byte("time"), []byte{}, []byte{0xff, 0xff},
	)
	return out
}

func lenPart(kb string) []byte {
	k := layout.JoinKey([]byte(kb), 0, 0, 0)
	return k[9 : len(k)-16]
}

func binaryAppend(b []byte, seq uint64) []byte {
	return append(b, byte(seq>>56), byte(seq>>48), byte(seq>>40), byte(seq>>32), byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq))
}

// memRanges are the bounds TestJoinMemoryMatchesModel reads and drops:
// open ones, a segment's and segments' (as the join drops them), a key's
// records in a segment at times (as the join reads them), the records
// of a key that has keys among them that are no j key, and bounds
// that cut into a key's or a segment's records.
func memRanges(keys [][]byte, rng *rand.Rand) (start, end []byte) {
	switch rng.IntN(7) {
	case 6:
		return layout.JoinRange([]byte(testkeys.All()[3]), 0, 0, 59_999)
	case 0:
		return nil, nil
	case 1:
		return []byte{layout.JoinRecord}, layout.DueEnd(layout.JoinRecord, int64(rng.IntN(3)-1)*60_000)
	case 2:
		seg := int64(rng.IntN(3)-1) * 60_000
		return layout.AppendTime([]byte{layout.JoinRecord}, seg), layout.AppendTime([]byte{layout.JoinRecord}, seg+1)
	case 3:
		kb := testkeys.All()[rng.IntN(len(testkeys.All()))]
		seg := int64(rng.IntN(3)-1) * 60_000
		from := seg + int64(rng.IntN(60_000))
		return layout.JoinRange([]byte(kb), seg, from, from+int64(rng.IntN(60_000)))
	default:
		a, b := keys[rng.IntN(len(keys))], keys[rng.IntN(len(keys))]
		if bytes.Compare(a, b) > 0 {
			a, b = b, a
		}
		return a, append(bytes.Clone(b), byte(rng.IntN(2)))
	}
}

// TestJoinMemoryMatchesModel writes, deletes, drops ranges of, reads and
// ranges over a Staged over JoinMemory and one over a sorted map
// (store.Memory, a plain stage over it: the model) alike, in units rolled
// back or kept, in transactions committed or aborted, and checks after
// every step that the two read alike, and after every commit that a
// replay of JoinMemory's committed changelog, into another JoinMemory and
// into a store.Memory, holds what it holds.
func TestJoinMemoryMatchesModel(t *testing.T) {
	keys := memKeys()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			if err := memModel(t, seed, keys, func(jm *JoinMemory) store.Engine { return jm }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// forgetfulMemory is a JoinMemory whose Abort forgets the transaction's
// writes' undo without undoing them: the fault
// TestJoinMemoryModelCatchesAnAbortKept must see.
type forgetfulMemory struct{ *JoinMemory }

func (f forgetfulMemory) Abort() { f.dropUndo() }

// TestJoinMemoryModelCatchesAnAbortKept is memModel's negative control:
// over an engine that keeps an aborted transaction's writes, it reports a
// difference from the model.
func TestJoinMemoryModelCatchesAnAbortKept(t *testing.T) {
	err := memModel(t, 0, memKeys(), func(jm *JoinMemory) store.Engine { return forgetfulMemory{jm} })
	if err == nil {
		t.Fatal("the model check passes an engine that keeps what an abort should undo")
	}
	t.Logf("caught: %v", err)
}

// memModel runs TestJoinMemoryMatchesModel's steps for seed over the
// engine engine makes of a JoinMemory, and returns the first difference
// from the model it sees.
func memModel(t *testing.T, seed uint64, keys [][]byte, engine func(*JoinMemory) store.Engine) error {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	jm := NewJoinMemory()
	long := seed >= 6
	// Half the seeds, one of them long, pack the changelog records by
	// segment, in packs small enough that many go out before a Flush,
	// inside units too. (The other long seed commits nothing.)
	var opts []store.StagedOption
	if seed%2 == 1 && !long || seed == 6 {
		p := JoinPacking
		p.Limit = 200
		opts = append(opts, store.WithPacking(p))
	}
	a, b := newMemStore(engine(jm), opts...), newMemStore(store.NewMemory(), opts...)
	marked, aMark, bMark, aPacks, bPacks := false, 0, 0, 0, 0
	// The last seeds' transactions are long: thousands of
	// undo steps, over several of the log's chunks, and every
	// 4000th step aborts what the transaction holds.
	mostUndo := 0
	for step := range 12000 {
		var errA, errB error
		op := rng.IntN(100)
		if long && op >= 94 && rng.IntN(150) != 0 {
			op = 0
		}
		if long && step%4000 == 3999 && step < 10000 && !marked {
			op = 99
		}
		mostUndo = max(mostUndo, jm.undo.n)
		switch {
		case op < 45:
			k, v := keys[rng.IntN(len(keys))], []byte(fmt.Sprint(step))
			if rng.IntN(8) == 0 {
				v = []byte{}
			}
			errA, errB = a.st.Put(k, v), b.st.Put(k, v)
		case op < 60:
			k := keys[rng.IntN(len(keys))]
			errA, errB = a.st.Delete(k), b.st.Delete(k)
		case op < 64:
			start, end := memRanges(keys, rng)
			if start == nil {
				start = []byte{}
			}
			if end == nil {
				end = []byte{0xff, 0xff, 0xff}
			}
			errA, errB = a.st.DropRange(start, end), b.st.DropRange(start, end)
		case op < 80:
			k := keys[rng.IntN(len(keys))]
			va, oka, ea := a.st.Get(k)
			vb, okb, eb := b.st.Get(k)
			if ea != nil || eb != nil || oka != okb || !bytes.Equal(va, vb) {
				return fmt.Errorf("step %d: Get(%x) = %x %v %v, model %x %v %v", step, k, va, oka, ea, vb, okb, eb)
			}
		case op < 90:
			start, end := memRanges(keys, rng)
			if ga, gb := rangeDump(t, a.st, start, end), rangeDump(t, b.st, start, end); !slices.Equal(ga, gb) {
				return fmt.Errorf("step %d: Range(%x, %x) = %d keys, model %d\n%q\n%q", step, start, end, len(ga), len(gb), ga, gb)
			}
			ka, va, oka, ea := a.st.First(start, end)
			kb, vb, okb, eb := b.st.First(start, end)
			if ea != nil || eb != nil || oka != okb || !bytes.Equal(ka, kb) || !bytes.Equal(va, vb) {
				return fmt.Errorf("step %d: First(%x, %x) = %x, model %x", step, start, end, ka, kb)
			}
		case op < 94:
			if marked {
				if rng.IntN(2) == 0 {
					a.st.Rollback()
					b.st.Rollback()
					// The model's changelog records of the
					// unit are the caller's to drop; a task
					// drops both.
					a.txn, b.txn = a.txn[:aMark], b.txn[:bMark]
					a.txnPacks, b.txnPacks = a.txnPacks[:aPacks], b.txnPacks[:bPacks]
				} else {
					a.st.Release()
					b.st.Release()
				}
				marked = false
			} else {
				a.st.Mark()
				b.st.Mark()
				aMark, bMark = len(a.txn), len(b.txn)
				aPacks, bPacks = len(a.txnPacks), len(b.txnPacks)
				marked = true
			}
		case op < 98 && !marked:
			if err := errors.Join(a.commit(t), b.commit(t)); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			if err := checkReplay(t, step, jm, a.committed); err != nil {
				return err
			}
			// The model's changelog, packed at its flushes, replays
			// to its engine too.
			replay := store.NewMemory()
			if err := replay.Apply(b.committed, 0); err != nil {
				t.Fatal(err)
			}
			if got, want := rangeDump(t, replay, nil, nil), rangeDump(t, b.st.Engine(), nil, nil); !slices.Equal(got, want) {
				return fmt.Errorf("step %d: the model's changelog replays to %d keys, its engine holds %d", step, len(got), len(want))
			}
		case !marked:
			a.abort()
			b.abort()
		}
		if (errA == nil) != (errB == nil) {
			return fmt.Errorf("step %d: errors %v, model %v", step, errA, errB)
		}
	}
	if got := rangeDump(t, a.st, nil, nil); len(got) == 0 {
		t.Fatal("the store ended empty: the steps wrote too little to compare")
	}
	if len(opts) > 0 && (len(a.packKeys) < 20 || len(b.packKeys) < 20) {
		t.Fatalf("%d and %d packs committed: too few to test packing", len(a.packKeys), len(b.packKeys))
	}
	if long && mostUndo <= undoChunk {
		t.Fatalf("at most %d steps to undo: the long transactions kept to one chunk of the log", mostUndo)
	}
	return nil
}

// checkReplay checks that the committed changelog, replayed into a fresh
// JoinMemory and a fresh store.Memory, holds what jm holds, and that jm
// counts the B-tree's keys that start with j right.
func checkReplay(t *testing.T, step int, jm *JoinMemory, log []store.Write) error {
	t.Helper()
	js := 0
	for k := range jm.rest.Ascend(bounds(nil, nil)) {
		if len(k) > 0 && k[0] == layout.JoinRecord {
			js++
		}
	}
	if js != jm.restJ {
		return fmt.Errorf("step %d: the B-tree holds %d keys that start with j, and counts %d", step, js, jm.restJ)
	}
	want := rangeDump(t, jm, nil, nil)
	for _, e := range []store.Engine{NewJoinMemory(), store.NewMemory()} {
		if err := e.Apply(log, int64(len(log))); err != nil {
			t.Fatal(err)
		}
		if got := rangeDump(t, e, nil, nil); !slices.Equal(got, want) {
			return fmt.Errorf("step %d: the changelog's replay into %T holds %d keys, the store %d", step, e, len(got), len(want))
		}
	}
	return nil
}

// TestJoinMemoryCannotApplyOverATransaction: a restore's batch never
// lands among a transaction's writes, which an abort would then undo
// around.
func TestJoinMemoryCannotApplyOverATransaction(t *testing.T) {
	jm := NewJoinMemory()
	if _, _, err := jm.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := jm.Apply([]store.Write{{Key: []byte("k2"), Value: []byte("v")}}, 1); err == nil {
		t.Fatal("Apply with a transaction open succeeded")
	}
	jm.Abort()
	if err := jm.Apply([]store.Write{{Key: []byte("k2"), Value: []byte("v")}}, 1); err != nil {
		t.Fatal(err)
	}
	jm.Close()
	if _, _, err := jm.Get([]byte("k2")); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
}

// TestStreamJoinSideOnJoinMemory drives both sides of a join, outer and
// inner, over JoinMemory as over Pebble (streamJoinSteps: keys of every
// encoded length and UUIDs, records that join, far ones, deletes, a
// watermark that removes every record, a late one), in transactions of
// several sizes, every other one aborted once and replayed: the results,
// in order, are those over Pebble without aborts, and the stores end
// empty, with nothing left to undo.
func TestStreamJoinSideOnJoinMemory(t *testing.T) {
	never := func(int) bool { return false }
	mem := func() store.Engine { return NewJoinMemory() }
	for _, outer := range []bool{true, false} {
		c0, l0, r0 := newJoinRunOf(t, outer)
		want, _ := c0.runTxns(t, streamJoinSteps(c0, l0, r0), 3, never, l0, r0)
		for _, per := range []int{1, 3, 7} {
			for _, abort := range []func(int) bool{never, func(i int) bool { return i%2 == 0 }} {
				c := newJoinCtxOn(t, mem, nil, "j-left", "j-right")
				left, right := joinSidesOf(outer)
				if err := errorsJoin(left.Init(c), right.Init(c)); err != nil {
					t.Fatal(err)
				}
				out, _ := c.runTxns(t, streamJoinSteps(c, left, right), per, abort, left, right)
				if !slices.Equal(out, want) {
					t.Fatalf("outer %v, %d steps a transaction: %d results, want %d\n got  %q\n want %q", outer, per, len(out), len(want), out, want)
				}
				for _, name := range []string{"j-left", "j-right"} {
					if keys := c.storeKeys(t, name); len(keys) != 0 {
						t.Fatalf("store %s keeps %d keys after the watermark, e.g. %s", name, len(keys), keys[0])
					}
					if jm := c.stores[name].Engine().(*JoinMemory); jm.undo.n != 0 || jm.ApproximateSize() != 0 {
						t.Fatalf("store %s: %d steps to undo and %d bytes after the last commit", name, jm.undo.n, jm.ApproximateSize())
					}
				}
			}
		}
	}
}
