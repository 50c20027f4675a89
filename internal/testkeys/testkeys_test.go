package testkeys

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

func TestKeysHaveEveryLengthAndDiffer(t *testing.T) {
	seen := map[string]bool{}
	lengths := map[int]bool{}
	for _, k := range All() {
		if !utf8.ValidString(k) {
			t.Fatalf("key %q is not UTF-8", k)
		}
		if seen[k] {
			t.Fatalf("key %q twice", k)
		}
		seen[k], lengths[len(k)] = true, true
	}
	for n := 0; n <= MaxLen; n++ {
		if !lengths[n] {
			t.Fatalf("no key of %d bytes", n)
		}
	}
	for _, u := range UUIDs(8) {
		if len(u) != 36 || u[8] != '-' || u[14] != '4' {
			t.Fatalf("UUID %q", u)
		}
	}
	multi := 0
	for _, k := range Lengths() {
		if utf8.RuneCountInString(k) < len(k) {
			multi++
		}
	}
	if multi < MaxLen/2 {
		t.Fatalf("only %d keys have multi-byte characters", multi)
	}
	if Len(5, 1) == Len(5, 2) || Len(1, 1) == Len(1, 2) {
		t.Fatal("seeds give equal keys")
	}
	bs := Bytes()
	for n, b := range bs {
		if len(b) != n || b == nil {
			t.Fatalf("byte key %d has %d bytes", n, len(b))
		}
		if n > 0 && !bytes.Contains(b, []byte{0xff}) {
			t.Fatalf("byte key %d has no 0xff", n)
		}
	}
}
