package store

import (
	"fmt"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

// fillAndRead writes keys of every length to p (with ~1 KiB values so that
// the data spans many blocks), flushes them to sstables and reads each one
// back, so that the reads go through the block cache.
func fillAndRead(t *testing.T, p *Pebble, tag string) {
	t.Helper()
	var ws []Write
	keys := testkeys.Bytes()
	for i := range 2000 {
		k := append([]byte(fmt.Sprintf("%s-%05d-", tag, i)), keys[i%len(keys)]...)
		ws = append(ws, Write{Key: k, Value: make([]byte, 1024)})
	}
	if err := p.Apply(ws, 1); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if _, ok, err := p.Get(w.Key); err != nil || !ok {
			t.Fatalf("get %q: %v %v", w.Key, ok, err)
		}
	}
}

// blockCacheOf is the size Pebble reports for the block cache p uses.
func blockCacheOf(p *Pebble) int64 { return p.db.Metrics().BlockCache.Size }

// TestSharedCacheIsShared opens two stores on one Cache: reads of either
// fill the one cache, and each store's metrics report the same cache. The
// negative control opens a store without it, whose reads leave the shared
// cache as it was.
func TestSharedCacheIsShared(t *testing.T) {
	c := NewCache(64 << 20)
	a, err := OpenPebbleWith(t.TempDir(), PebbleOptions{Cache: c, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenPebbleWith(t.TempDir(), PebbleOptions{Cache: c, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The stores hold references of their own: the cache stays usable
	// after the caller's is dropped.
	c.Close()

	fillAndRead(t, a, "a")
	afterA := c.Size()
	if afterA == 0 {
		t.Fatal("reads of the first store left the shared cache empty")
	}
	fillAndRead(t, b, "b")
	afterB := c.Size()
	if afterB <= afterA {
		t.Fatalf("reads of the second store did not fill the shared cache: %d then %d bytes", afterA, afterB)
	}
	if ma, mb := blockCacheOf(a), blockCacheOf(b); ma != mb || ma != afterB {
		t.Fatalf("the stores report caches of %d and %d bytes, the shared one holds %d: not one cache", ma, mb, afterB)
	}

	// Negative control: a store with a cache of its own.
	own, err := OpenPebbleWith(t.TempDir(), PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	fillAndRead(t, own, "own")
	if got := c.Size(); got != afterB {
		t.Fatalf("a store without the shared cache changed it: %d → %d bytes", afterB, got)
	}
	if blockCacheOf(own) == blockCacheOf(a) {
		t.Fatal("the check cannot tell a store's own cache from the shared one")
	}
}
