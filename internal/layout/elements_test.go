package layout

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/window"
)

// TestElementKeys: for keys of every encoded length, a window's element
// keys lie in its ElementPrefix range and no other window's, sort by seq,
// and give their seq back.
func TestElementKeys(t *testing.T) {
	keys := testkeys.Bytes()
	for _, kb := range keys {
		for _, start := range []int64{-1, 0, 1 << 40} {
			data := WindowKey(nil, kb, start)
			pre := ElementPrefix(data)
			if pre[0] != WindowElement || !bytes.Equal(pre[1:], data[1:]) {
				t.Fatalf("ElementPrefix(%x) = %x", data, pre)
			}
			var last []byte
			for _, seq := range []int64{0, 1, 255, 256, 1 << 40} {
				k := ElementKey(data, seq)
				if !bytes.HasPrefix(k, pre) || bytes.Compare(k, PrefixEnd(pre)) >= 0 {
					t.Fatalf("element key %x outside its window's range %x", k, pre)
				}
				if got, ok := ElementSeq(k); !ok || got != seq {
					t.Fatalf("ElementSeq(%x) = %d %v, want %d", k, got, ok, seq)
				}
				if last != nil && bytes.Compare(last, k) >= 0 {
					t.Fatalf("element keys out of seq order: %x, then %x", last, k)
				}
				last = k
			}
			// No other key's windows share the range.
			for _, other := range keys {
				if bytes.Equal(other, kb) {
					continue
				}
				k := ElementKey(WindowKey(nil, other, start), 0)
				if bytes.HasPrefix(k, pre) {
					t.Fatalf("key %x's element %x lies in key %x's range", other, k, kb)
				}
			}
		}
	}
	if _, ok := ElementSeq([]byte("short")); ok {
		t.Fatal("ElementSeq read a seq from a 5-byte key")
	}
}

func TestElementValue(t *testing.T) {
	for _, vb := range [][]byte{nil, {}, []byte("v"), bytes.Repeat([]byte{0xff}, 200)} {
		for _, ts := range []int64{-1 << 63, -1, 0, 1 << 62} {
			val := AppendElement(nil, ts, vb)
			gotTs, gotV, err := ParseElement(val)
			if err != nil || gotTs != ts || !bytes.Equal(gotV, vb) {
				t.Fatalf("ParseElement(AppendElement(%d, %x)) = %d %x %v", ts, vb, gotTs, gotV, err)
			}
		}
	}
	if _, _, err := ParseElement(make([]byte, 7)); !errors.Is(err, window.ErrCorrupt) {
		t.Fatalf("7-byte element: %v, want ErrCorrupt", err)
	}
}
