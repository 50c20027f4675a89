package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/sluice-streams/sluice/internal/testkeys"
)

type engineCase struct {
	name string
	open func(t testing.TB) Engine
}

func engineCases() []engineCase {
	return []engineCase{
		{"pebble", func(t testing.TB) Engine {
			p, err := OpenPebble(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			return p
		}},
		{"memory", func(t testing.TB) Engine {
			m := NewMemory()
			t.Cleanup(func() { _ = m.Close() })
			return m
		}},
	}
}

func forEachEngine(t *testing.T, fn func(t *testing.T, e Engine)) {
	for _, c := range engineCases() {
		t.Run(c.name, func(t *testing.T) { fn(t, c.open(t)) })
	}
}

func mustApply(t testing.TB, e Engine, cp int64, kvs ...string) {
	t.Helper()
	if err := e.Apply(writes(kvs...), cp); err != nil {
		t.Fatal(err)
	}
}

// writes builds a batch from key, value pairs; the value "<nil>" deletes.
func writes(kvs ...string) []Write {
	var ws []Write
	for i := 0; i < len(kvs); i += 2 {
		w := Write{Key: []byte(kvs[i])}
		if kvs[i+1] != "<nil>" {
			w.Value = []byte(kvs[i+1])
		}
		ws = append(ws, w)
	}
	return ws
}

// dump renders Range(start, end) as "k=v k=v".
func dump(t testing.TB, r interface {
	Range(start, end []byte, fn func(k, v []byte) error) error
}, start, end []byte) string {
	t.Helper()
	var b bytes.Buffer
	err := r.Range(start, end, func(k, v []byte) error {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", k, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func wantGet(t testing.TB, g interface {
	Get(key []byte) ([]byte, bool, error)
}, key, want string) {
	t.Helper()
	v, ok, err := g.Get([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	got := "<missing>"
	if ok {
		got = string(v)
	}
	if got != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantCheckpoint(t testing.TB, e Engine, want int64) {
	t.Helper()
	cp, err := e.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if cp != want {
		t.Fatalf("Checkpoint() = %d, want %d", cp, want)
	}
}

func TestEngineGetPutDelete(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		wantGet(t, e, "a", "<missing>")
		mustApply(t, e, NoCheckpoint, "a", "1", "b", "2")
		wantGet(t, e, "a", "1")
		wantGet(t, e, "b", "2")
		mustApply(t, e, NoCheckpoint, "a", "<nil>", "b", "3")
		wantGet(t, e, "a", "<missing>")
		wantGet(t, e, "b", "3")
		// A later write of a key in the same batch wins, in both directions.
		mustApply(t, e, NoCheckpoint, "c", "1", "c", "<nil>", "b", "<nil>", "b", "4")
		wantGet(t, e, "c", "<missing>")
		wantGet(t, e, "b", "4")
		// Deleting a missing key is not an error.
		mustApply(t, e, NoCheckpoint, "zz", "<nil>")
		if got := dump(t, e, nil, nil); got != "b=4" {
			t.Fatalf("Range = %q", got)
		}
	})
}

func TestEngineEmptyValueAndKey(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		if err := e.Apply([]Write{{Key: []byte("k"), Value: []byte{}}, {Key: nil, Value: []byte("root")}}, NoCheckpoint); err != nil {
			t.Fatal(err)
		}
		v, ok, err := e.Get([]byte("k"))
		if err != nil || !ok || v == nil || len(v) != 0 {
			t.Fatalf("Get(k) = %v, %v, %v; want empty non-nil value", v, ok, err)
		}
		wantGet(t, e, "", "root")
		if got := dump(t, e, nil, nil); got != "=root k=" {
			t.Fatalf("Range = %q", got)
		}
	})
}

func TestEngineGetReturnsCopy(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		ws := writes("a", "value")
		mustApply(t, e, NoCheckpoint, "a", "value")
		ws[0].Value[0] = 'X' // the engine must have copied on Apply
		v, _, _ := e.Get([]byte("a"))
		v[0] = 'Y'
		wantGet(t, e, "a", "value")
	})
}

func TestEngineRangeBounds(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		mustApply(t, e, NoCheckpoint, "a", "1", "b", "2", "bb", "3", "c", "4", "d", "5", "\xff", "6")
		for _, tc := range []struct {
			start, end []byte
			want       string
		}{
			{nil, nil, "a=1 b=2 bb=3 c=4 d=5 \xff=6"},
			{[]byte{}, nil, "a=1 b=2 bb=3 c=4 d=5 \xff=6"},
			{nil, []byte{}, ""},
			{[]byte("b"), []byte("c"), "b=2 bb=3"},
			{[]byte("b"), []byte("b"), ""},
			{[]byte("c"), []byte("b"), ""},
			{[]byte("ba"), []byte("bc"), "bb=3"},
			{nil, []byte("b"), "a=1"},
			{[]byte("cc"), nil, "d=5 \xff=6"},
			{[]byte("\xff"), nil, "\xff=6"},
			{[]byte("\xff\x00"), nil, ""},
		} {
			if got := dump(t, e, tc.start, tc.end); got != tc.want {
				t.Errorf("Range(%q, %q) = %q, want %q", tc.start, tc.end, got, tc.want)
			}
		}
		stop := errors.New("stop")
		n := 0
		err := e.Range(nil, nil, func(k, v []byte) error {
			n++
			if n == 2 {
				return stop
			}
			return nil
		})
		if err != stop || n != 2 {
			t.Fatalf("Range stopped with %v after %d keys, want stop after 2", err, n)
		}
	})
}

// TestEngineRangeDelete applies range deletes (Write.End) among other
// writes of one batch: a range deletes what earlier batches and earlier
// writes of its own batch stored in it, not what later writes put there,
// and no key at or past its end; an empty or reversed range deletes
// nothing. The memory engine's sorted view must agree with its map after.
func TestEngineRangeDelete(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		mustApply(t, e, NoCheckpoint, "a", "1", "b", "2", "bb", "3", "c", "4", "d", "5")
		ws := writes("ba", "6", "e", "7")
		ws = append(ws, Write{Key: []byte("b"), End: []byte("c")})
		ws = append(ws, writes("bc", "8")...)
		ws = append(ws, Write{Key: []byte("d"), End: []byte("d")}, Write{Key: []byte("e"), End: []byte("a")})
		if err := e.Apply(ws, 7); err != nil {
			t.Fatal(err)
		}
		if got, want := dump(t, e, nil, nil), "a=1 bc=8 c=4 d=5 e=7"; got != want {
			t.Fatalf("after the range deletes: %q, want %q", got, want)
		}
		for k, want := range map[string]string{"b": "<missing>", "ba": "<missing>", "bb": "<missing>", "bc": "8", "c": "4"} {
			wantGet(t, e, k, want)
		}
		wantCheckpoint(t, e, 7)
		// A range over everything, then a write into it in a later batch.
		if err := e.Apply([]Write{{Key: []byte{}, End: []byte{0xff}}}, NoCheckpoint); err != nil {
			t.Fatal(err)
		}
		mustApply(t, e, NoCheckpoint, "bb", "9")
		if got, want := dump(t, e, nil, nil), "bb=9"; got != want {
			t.Fatalf("after deleting every key and writing one: %q, want %q", got, want)
		}
	})
}

func TestEngineCheckpoint(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		wantCheckpoint(t, e, NoCheckpoint)
		mustApply(t, e, 10, "a", "1")
		wantCheckpoint(t, e, 10)
		// NoCheckpoint leaves the recorded offset alone.
		mustApply(t, e, NoCheckpoint, "b", "2")
		wantCheckpoint(t, e, 10)
		// A checkpoint may move on without writes (e.g. only tombstones
		// of missing keys were logged).
		mustApply(t, e, 12)
		wantCheckpoint(t, e, 12)
		if err := e.Apply(writes("c", "3"), -2); err == nil {
			t.Fatal("Apply with checkpoint -2 succeeded")
		}
		wantGet(t, e, "c", "<missing>")
		wantCheckpoint(t, e, 12)
		// A user key spelling the internal checkpoint key cannot collide.
		mustApply(t, e, 13, "checkpoint", "user", "\x00checkpoint", "user")
		wantCheckpoint(t, e, 13)
		wantGet(t, e, "checkpoint", "user")
		if err := e.Wipe(); err != nil {
			t.Fatal(err)
		}
		wantCheckpoint(t, e, NoCheckpoint)
	})
}

// TestEngineApplyAtomic checks that concurrent readers never see half a
// batch: every batch sets all keys to the same version.
func TestEngineApplyAtomic(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		const keys, batches = 20, 200
		var wg sync.WaitGroup
		done := make(chan struct{})
		for r := 0; r < 4; r++ {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					var first []byte
					n := 0
					err := e.Range(nil, nil, func(k, v []byte) error {
						if first == nil {
							first = bytes.Clone(v)
						} else if !bytes.Equal(v, first) {
							return fmt.Errorf("key %s = %s, key 0 = %s: torn batch", k, v, first)
						}
						n++
						return nil
					})
					if err == nil && n != 0 && n != keys {
						err = fmt.Errorf("saw %d keys, want 0 or %d", n, keys)
					}
					if err != nil {
						t.Error(err)
						return
					}
					if _, _, err := e.Get([]byte("k07")); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		ws := make([]Write, keys)
		for b := range batches {
			for i := range ws {
				ws[i] = Write{Key: fmt.Appendf(nil, "k%02d", i), Value: fmt.Appendf(nil, "v%d", b)}
			}
			if err := e.Apply(ws, int64(b)); err != nil {
				t.Fatal(err)
			}
		}
		close(done)
		wg.Wait()
		wantCheckpoint(t, e, batches-1)
	})
}

func TestEngineWipe(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		mustApply(t, e, 5, "a", "1", "b", "2", "", "empty")
		if err := e.Wipe(); err != nil {
			t.Fatal(err)
		}
		if got := dump(t, e, nil, nil); got != "" {
			t.Fatalf("Range after Wipe = %q", got)
		}
		wantGet(t, e, "a", "<missing>")
		wantCheckpoint(t, e, NoCheckpoint)
		mustApply(t, e, 6, "b", "3")
		if got := dump(t, e, nil, nil); got != "b=3" {
			t.Fatalf("Range after Wipe and Apply = %q", got)
		}
		wantCheckpoint(t, e, 6)
	})
}

func TestEngineApproximateSize(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		val := bytes.Repeat([]byte("x"), 1000)
		ws := make([]Write, 100)
		for i := range ws {
			ws[i] = Write{Key: fmt.Appendf(nil, "k%03d", i), Value: val}
		}
		if err := e.Apply(ws, 1); err != nil {
			t.Fatal(err)
		}
		if got := e.ApproximateSize(); got < 100*1000 {
			t.Fatalf("ApproximateSize() = %d after writing 100 kB", got)
		}
	})
}

func TestEngineClosed(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		mustApply(t, e, 1, "a", "1")
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, _, err := e.Get([]byte("a")); !errors.Is(err, ErrClosed) {
			t.Errorf("Get after Close: %v", err)
		}
		if err := e.Range(nil, nil, func(k, v []byte) error { return nil }); !errors.Is(err, ErrClosed) {
			t.Errorf("Range after Close: %v", err)
		}
		if err := e.Apply(writes("b", "2"), 2); !errors.Is(err, ErrClosed) {
			t.Errorf("Apply after Close: %v", err)
		}
		if _, err := e.Checkpoint(); !errors.Is(err, ErrClosed) {
			t.Errorf("Checkpoint after Close: %v", err)
		}
		if err := e.Wipe(); !errors.Is(err, ErrClosed) {
			t.Errorf("Wipe after Close: %v", err)
		}
		if got := e.ApproximateSize(); got != 0 {
			t.Errorf("ApproximateSize after Close = %d", got)
		}
	})
}

// TestEngineCloseDuringReads checks that Close waits for, or fences off,
// readers on other goroutines instead of pulling the database from under
// them.
func TestEngineCloseDuringReads(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		mustApply(t, e, 1, "a", "1", "b", "2")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					_, _, err := e.Get([]byte("a"))
					if err == nil {
						err = e.Range(nil, nil, func(k, v []byte) error { return nil })
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	})
}

func TestPebbleReopen(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, p, 7, "a", "1", "b", "2", "c", "3")
	mustApply(t, p, 9, "b", "<nil>", "d", "4")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p, err = OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := dump(t, p, nil, nil); got != "a=1 c=3 d=4" {
		t.Fatalf("after reopen Range = %q", got)
	}
	wantCheckpoint(t, p, 9)
	if err := p.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p, err = OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := dump(t, p, nil, nil); got != "" {
		t.Fatalf("after Wipe and reopen Range = %q", got)
	}
	wantCheckpoint(t, p, NoCheckpoint)
}

func TestPebbleCorruptCheckpoint(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(checkpointKey, []byte{1, 2, 3}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Twice: the failed open must have released the directory's lock, or
	// the second attempt would fail on the lock instead.
	for range 2 {
		if p, err := OpenPebble(dir); !errors.Is(err, ErrCorrupted) {
			if p != nil {
				_ = p.Close()
			}
			t.Fatalf("OpenPebble with a 3-byte checkpoint: %v, want ErrCorrupted", err)
		}
	}
}

func TestPebbleDirLocked(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if q, err := OpenPebble(dir); err == nil {
		_ = q.Close()
		t.Fatal("second OpenPebble of the same dir succeeded")
	}
}

// TestEngineRangeSeesEveryWrite: a Range sees every write applied before
// it, however the ranges before it were bounded, and a Range running while
// another goroutine writes sees a committed state no older than the last
// one it saw. Pebble keeps an iterator from one Range to the next; one
// made before a write must not answer after it.
func TestEngineRangeSeesEveryWrite(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		mustApply(t, e, NoCheckpoint, "a", "1", "b", "2")
		if got := dump(t, e, []byte("a"), []byte("b")); got != "a=1" {
			t.Fatalf("Range = %q", got)
		}
		mustApply(t, e, NoCheckpoint, "a", "<nil>", "ab", "3")
		if got, want := dump(t, e, []byte("a"), []byte("b")), "ab=3"; got != want {
			t.Fatalf("Range after a write = %q, want %q", got, want)
		}
		if got, want := dump(t, e, nil, nil), "ab=3 b=2"; got != want {
			t.Fatalf("Range of everything = %q, want %q", got, want)
		}
		if err := e.Wipe(); err != nil {
			t.Fatal(err)
		}
		if got := dump(t, e, nil, nil); got != "" {
			t.Fatalf("Range after Wipe = %q", got)
		}

		raceWrites(t, e, func(key func(int) []byte) (int, error) {
			n := 0
			err := e.Range(nil, nil, func(k, _ []byte) error {
				if !bytes.Equal(k, key(n)) {
					return fmt.Errorf("key %q where %q was due", k, key(n))
				}
				n++
				return nil
			})
			return n, err
		}, func(key []byte) {
			if got, want := dump(t, e, key, nil), string(key)+"=v"; got != want {
				t.Fatalf("after the write of %q: Range = %q, want %q", key, got, want)
			}
		})
	})
}

// raceWrites writes key i (k0000, k0001, ...) by the i-th of
// raceWriteCount Applies while three readers call seen, which reads the
// engine and says how many keys it saw: a committed state is the keys
// below some n, and no reader's n may go back. After each Apply, check
// reads the key just written.
func raceWrites(t *testing.T, e Engine, seen func(key func(int) []byte) (int, error), check func(key []byte)) {
	t.Helper()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%04d", i) }
	var wg sync.WaitGroup
	done := make(chan struct{})
	// Also when check fails the test: the readers stop before the
	// engine closes.
	defer wg.Wait()
	defer close(done)
	for range 3 {
		wg.Go(func() {
			last := 0
			for {
				n, err := seen(key)
				if err != nil {
					t.Error(err)
					return
				}
				if n < last {
					t.Errorf("a reader saw %d keys after it saw %d", n, last)
					return
				}
				last = n
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	for i := range raceWriteCount {
		if err := e.Apply([]Write{{Key: key(i), Value: []byte("v")}}, NoCheckpoint); err != nil {
			t.Fatal(err)
		}
		check(key(i))
	}
}

// raceWriteCount is the number of writes raceWrites makes.
const raceWriteCount = 200

// TestEngineGetSeesEveryWrite: a Get sees every write applied before it —
// put, overwritten, deleted, range-deleted, wiped — for keys of every
// length, keys that are prefixes of each other and UUIDs, and a Get running
// while another goroutine writes sees a committed state no older than the
// last one it saw. Pebble keeps an iterator from one Get to the next; one
// made before a write must not answer after it.
func TestEngineGetSeesEveryWrite(t *testing.T) {
	keys := testkeys.Bytes()
	for _, u := range testkeys.UUIDs(8) {
		keys = append(keys, []byte(u))
	}
	// Every key also with a byte more and a byte less: a key found must be
	// the key asked for, not one it prefixes or that prefixes it.
	ext := func(k []byte) []byte { return append(bytes.Clone(k), 0) }
	stored := make(map[string]bool)
	for _, k := range keys {
		stored[string(k)] = true
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		want := func(k []byte, v string) {
			t.Helper()
			got, ok, err := e.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			g := "<missing>"
			if ok {
				g = string(got)
			}
			if g != v {
				t.Fatalf("Get(%q) = %q, want %q", k, g, v)
			}
		}
		for i, k := range keys {
			want(k, "<missing>")
			if err := e.Apply([]Write{{Key: k, Value: fmt.Appendf(nil, "v%d", i)}}, NoCheckpoint); err != nil {
				t.Fatal(err)
			}
			want(k, fmt.Sprintf("v%d", i))
			want(ext(k), "<missing>")
			if short := k[:max(len(k)-1, 0)]; !stored[string(short)] {
				want(short, "<missing>")
			}
		}
		for i, k := range keys {
			want(k, fmt.Sprintf("v%d", i))
			var w Write
			switch i % 3 {
			case 0: // overwritten
				w = Write{Key: k, Value: []byte("w")}
			case 1: // deleted
				w = Write{Key: k}
			case 2: // range-deleted, with the key a byte longer
				w = Write{Key: k, End: ext(ext(k))}
			}
			if err := e.Apply([]Write{w}, NoCheckpoint); err != nil {
				t.Fatal(err)
			}
			if i%3 == 0 {
				want(k, "w")
			} else {
				want(k, "<missing>")
			}
		}
		if err := e.Wipe(); err != nil {
			t.Fatal(err)
		}
		want(keys[0], "<missing>")
		want(keys[len(keys)-1], "<missing>")

		raceWrites(t, e, func(key func(int) []byte) (int, error) {
			for n := range raceWriteCount {
				if _, ok, err := e.Get(key(n)); err != nil || !ok {
					return n, err
				}
			}
			return raceWriteCount, nil
		}, func(key []byte) { want(key, "v") })
	})
}

// TestPebbleKeepsIteratorsUntilAWrite: Get and Range keep their iterators
// for the next read, and a write drops both, so that no iterator pins a
// memtable or a file past it.
func TestPebbleKeepsIteratorsUntilAWrite(t *testing.T) {
	p, err := OpenPebble(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	kept := func() (gets, ranges bool) {
		p.iterMu.Lock()
		defer p.iterMu.Unlock()
		return p.gets.it != nil, p.ranges.it != nil
	}
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"Apply", func() error { return p.Apply(writes("a", "1"), NoCheckpoint) }},
		{"Wipe", p.Wipe},
	} {
		if _, _, err := p.Get([]byte("a")); err != nil {
			t.Fatal(err)
		}
		dump(t, p, nil, nil)
		if g, r := kept(); !g || !r {
			t.Fatalf("after a Get and a Range: Get's iterator kept %v, Range's %v", g, r)
		}
		if err := w.write(); err != nil {
			t.Fatal(err)
		}
		if g, r := kept(); g || r {
			t.Fatalf("after %s: Get's iterator kept %v, Range's %v", w.name, g, r)
		}
	}

	// A read on another goroutine that made its iterator before a write
	// and ends after it must not keep the iterator, which reads the
	// database as it was before the write.
	it, gen := p.takeIter(&p.gets)
	if it != nil {
		t.Fatal("an iterator kept after a write")
	}
	if it, err = p.db.NewIter(nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(writes("a", "2"), NoCheckpoint); err != nil {
		t.Fatal(err)
	}
	p.keepIter(&p.gets, it, gen)
	if g, _ := kept(); g {
		t.Fatal("an iterator made before a write kept after it")
	}
	wantGet(t, p, "a", "2")
}

// TestPebbleKeptIteratorLetsCompactedFilesGo: a store that is only read
// (a global table) keeps its Get iterator for good, and a compaction after
// the last write must not leave the files it replaced pinned by that
// iterator: the next read takes a fresh one, and the old files go.
func TestPebbleKeptIteratorLetsCompactedFilesGo(t *testing.T) {
	// Only the compaction asked for below: one of Pebble's own, finishing
	// while the first read keeps its iterator, would leave nothing pinned.
	p, err := openPebble(t.TempDir(), &pebble.Options{DisableAutomaticCompactions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Two tables of the same keys: the compaction merges them into a new
	// table, where tables of their own keys would move down as they are.
	for i := range 2 {
		mustApply(t, p, int64(i), "k0", "v", "k1", "v")
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	wantGet(t, p, "k0", "v")
	if err := p.db.Compact(context.Background(), []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	if z := p.db.Metrics().Table.ZombieCount; z == 0 {
		t.Fatal("no zombie tables after the compaction: the test does not pin any")
	}
	wantGet(t, p, "k1", "v")
	// Pebble deletes what no version refers to in the background.
	deadline := time.Now().Add(10 * time.Second)
	for z := p.db.Metrics().Table.ZombieCount; z > 0; z = p.db.Metrics().Table.ZombieCount {
		if time.Now().After(deadline) {
			t.Fatalf("%d zombie tables 10 s after a read that followed the compaction", z)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
