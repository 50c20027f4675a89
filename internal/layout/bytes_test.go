package layout

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
)

func TestPrefixEnd(t *testing.T) {
	cases := []struct {
		name string
		p    []byte
		want []byte // nil: no upper bound
	}{
		{"nil", nil, nil},
		{"empty", []byte{}, nil},
		{"0xff", []byte{0xff}, nil},
		{"all 0xff", bytes.Repeat([]byte{0xff}, 130), nil},
		{"0x00", []byte{0x00}, []byte{0x01}},
		{"one byte", []byte("a"), []byte("b")},
		{"ordinary", []byte("key"), []byte("kez")},
		{"0xfe", []byte{0xfe}, []byte{0xff}},
		{"trailing 0xff", []byte{'a', 0xff}, []byte{'b'}},
		{"trailing 0xffs", []byte{0x00, 0x7f, 0xff, 0xff, 0xff}, []byte{0x00, 0x80}},
		{"inner 0xff", []byte{0xff, 'a', 0xff}, []byte{0xff, 'b'}},
		{"trailing 0x00", []byte{'a', 0x00}, []byte{'a', 0x01}},
		{"a map prefix", []byte{'m', 0x01, 'k'}, []byte{'m', 0x01, 'l'}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := bytes.Clone(c.p)
			got := PrefixEnd(c.p)
			if !bytes.Equal(c.p, in) {
				t.Fatalf("prefixEnd modified its argument: %x, was %x", c.p, in)
			}
			if (got == nil) != (c.want == nil) || !bytes.Equal(got, c.want) {
				t.Fatalf("PrefixEnd(%x) = %x (nil: %v), want %x (nil: %v)", c.p, got, got == nil, c.want, c.want == nil)
			}
		})
	}
}

// TestPrefixEndBoundsExactlyThePrefix checks the bound against its
// definition: over a small alphabet of edge bytes, a key lies in
// [p, PrefixEnd(p)) exactly when it begins with p; and for prefixes of
// every length, the bound does not begin with p, lies above p's longest
// extensions, and shares no bytes with p.
func TestPrefixEndBoundsExactlyThePrefix(t *testing.T) {
	alphabet := []byte{0x00, 0x01, 0x7f, 0xfe, 0xff}
	// all returns every string over alphabet of length at most n.
	all := func(n int) [][]byte {
		out, last := [][]byte{{}}, [][]byte{{}}
		for range n {
			var next [][]byte
			for _, s := range last {
				for _, b := range alphabet {
					next = append(next, append(bytes.Clone(s), b))
				}
			}
			out, last = append(out, next...), next
		}
		return out
	}
	keys := all(4)
	for _, p := range all(3) {
		end := PrefixEnd(p)
		for _, k := range keys {
			in := bytes.Compare(k, p) >= 0 && (end == nil || bytes.Compare(k, end) < 0)
			if in != bytes.HasPrefix(k, p) {
				t.Fatalf("prefix %x, end %x: key %x in range %v, has prefix %v", p, end, k, in, !in)
			}
		}
	}

	prefixes := testkeys.Bytes()
	for _, k := range testkeys.Bytes() {
		prefixes = append(prefixes, append(binary.AppendUvarint([]byte{'m'}, uint64(len(k))), k...), append(bytes.Clone(k), 0xff, 0xff))
	}
	for _, p := range prefixes {
		end := PrefixEnd(p)
		if end == nil {
			if len(bytes.Trim(p, "\xff")) != 0 {
				t.Fatalf("PrefixEnd(%x) = nil, but the prefix is not all 0xff", p)
			}
			continue
		}
		if bytes.HasPrefix(end, p) {
			t.Fatalf("PrefixEnd(%x) = %x begins with the prefix", p, end)
		}
		for _, ext := range [][]byte{p, append(bytes.Clone(p), 0xff), append(bytes.Clone(p), bytes.Repeat([]byte{0xff}, 200)...)} {
			if bytes.Compare(ext, end) >= 0 {
				t.Fatalf("PrefixEnd(%x) = %x is not above %x", p, end, ext)
			}
		}
		// Smallest: end is p cut after its last byte below 0xff, that
		// byte plus one.
		i := len(end) - 1
		if !bytes.Equal(end[:i], p[:i]) || end[i] != p[i]+1 || len(bytes.Trim(p[i+1:], "\xff")) != 0 {
			t.Fatalf("PrefixEnd(%x) = %x is not the smallest bound", p, end)
		}
		in := bytes.Clone(p)
		end[0] ^= 0x5a
		if !bytes.Equal(p, in) {
			t.Fatalf("PrefixEnd(%x) shares its backing array with the prefix", in)
		}
	}
}
