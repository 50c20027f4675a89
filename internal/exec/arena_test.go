package exec

import (
	"bytes"
	"strings"
	"testing"
)

func TestArena(t *testing.T) {
	var a Arena
	appendStr := func(s string) []byte {
		b, err := a.Append(func(dst []byte) ([]byte, error) { return append(dst, s...), nil })
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	x := appendStr("hello")
	y := appendStr("world")
	if string(x) != "hello" || string(y) != "world" || cap(x) != len(x) {
		t.Fatalf("got %q (cap %d) and %q", x, cap(x), y)
	}
	// A holder's append must not overwrite the next slice.
	_ = append(x, "XXXXX"...)
	if string(y) != "world" {
		t.Fatalf("an append to the first slice reached the second: %q", y)
	}
	// Larger than a chunk: its own memory, and the arena goes on.
	big := appendStr(strings.Repeat("b", arenaChunk+1))
	z := appendStr("after")
	if len(big) != arenaChunk+1 || string(z) != "after" || !bytes.Equal(big[:3], []byte("bbb")) {
		t.Fatalf("big %d bytes, then %q", len(big), z)
	}
	if n := testing.AllocsPerRun(100, func() { appendStr("k") }); n > 0.1 {
		t.Errorf("%.2f allocations per small append, want about 1/%d", n, arenaChunk)
	}
}
