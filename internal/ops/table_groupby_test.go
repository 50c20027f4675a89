package ops

import (
	"bytes"
	"errors"
	"testing"

	"github.com/sluice-streams/sluice/internal/testkeys"
	"github.com/sluice-streams/sluice/serde"
)

// TestTableOpSerdeEveryLength round-trips the group operations with values
// of every length, and decodes the one-sided forms written before updates
// in place existed (flag 0: subtract, 1: add).
func TestTableOpSerdeEveryLength(t *testing.T) {
	s := TableOpSerde[string]{serde.String}
	keys := testkeys.All()
	for i, v := range keys {
		old := keys[(i*7+3)%len(keys)]
		for _, op := range []TableOp[string]{{Add: true, New: v}, {Sub: true, Old: old}, {Add: true, Sub: true, New: v, Old: old}} {
			b, err := s.Encode(op)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Decode(b)
			if err != nil || got != op {
				t.Fatalf("%+v came back as %+v, %v", op, got, err)
			}
		}
		if got, err := s.Decode(append([]byte{0}, v...)); err != nil || got != (TableOp[string]{Sub: true, Old: v}) {
			t.Fatalf("old subtraction decoded as %+v, %v", got, err)
		}
	}
	for _, b := range [][]byte{nil, {3}, {2}, {2, 5, 'a'}, {2, 0x80}} {
		if _, err := s.Decode(b); err == nil {
			t.Fatalf("%q decoded", b)
		}
	}
}

// TestTableOpBytes pins the bytes on the repartition topic, for values of
// every length: a change here is a change of what a running application
// reads back from its topic.
func TestTableOpBytes(t *testing.T) {
	s := TableOpSerde[[]byte]{serde.Bytes}
	vals := testkeys.Bytes()
	for i, v := range vals {
		old := vals[(i*5+1)%len(vals)]
		uv := func(n int) []byte { // uvarint, written out
			var b []byte
			for n >= 0x80 {
				b = append(b, byte(n)|0x80)
				n >>= 7
			}
			return append(b, byte(n))
		}
		cases := []struct {
			op   TableOp[[]byte]
			want []byte
		}{
			{TableOp[[]byte]{Sub: true, Old: old}, append([]byte{0}, old...)},
			{TableOp[[]byte]{Add: true, New: v}, append([]byte{1}, v...)},
			{TableOp[[]byte]{Add: true, Sub: true, New: v, Old: old}, append(append(append([]byte{2}, uv(len(old))...), old...), v...)},
		}
		for _, c := range cases {
			b, err := s.Encode(c.op)
			if err != nil || !bytes.Equal(b, c.want) {
				t.Fatalf("%+v encoded as %x, %v; want %x", c.op, b, err, c.want)
			}
		}
	}
	if _, err := s.Decode([]byte{7, 'a'}); !errors.Is(err, serde.ErrDecode) {
		t.Fatalf("flag 7: %v, want serde.ErrDecode", err)
	}
}
