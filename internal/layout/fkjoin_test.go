package layout

import (
	"bytes"
	"testing"
)

// TestSubscriptionRangesAreDisjoint: over foreign keys and left keys of
// every length, a subscription key lies in the range of its own foreign
// key's prefix only, and the left key comes back from it.
func TestSubscriptionRangesAreDisjoint(t *testing.T) {
	keys := everyKey()
	for i, fk := range keys {
		kb := keys[(i*7+3)%len(keys)]
		key := SubscriptionKey(SubscriptionPrefix(fk), kb)
		if got := key[len(SubscriptionPrefix(fk)):]; !bytes.Equal(got, kb) {
			t.Fatalf("left key %x came back as %x", kb, got)
		}
		for _, other := range keys {
			pre := SubscriptionPrefix(other)
			end := PrefixEnd(pre)
			in := bytes.Compare(key, pre) >= 0 && (end == nil || bytes.Compare(key, end) < 0)
			if in != bytes.Equal(other, fk) {
				t.Fatalf("subscription of foreign key %x (%d bytes) in the range of %x (%d bytes): %v", fk, len(fk), other, len(other), in)
			}
		}
	}
}
